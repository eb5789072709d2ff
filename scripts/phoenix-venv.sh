#!/usr/bin/env bash
# Phoenix's own venv for tests/e2e/test_phoenix.py, cached under ~/.cache/cafe-otel/phoenix/<hash of
# tests/e2e/phoenix-requirements.txt> (scripts/consumer-venv.sh). Prints the venv's path.
exec bash "$(dirname "$0")/consumer-venv.sh" phoenix
