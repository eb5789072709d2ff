#!/usr/bin/env bash
# MLflow's own venv for tests/e2e/test_mlflow.py, cached under ~/.cache/cafe-otel/mlflow/<hash of
# tests/e2e/mlflow-requirements.txt> (scripts/consumer-venv.sh). Prints the venv's path.
exec bash "$(dirname "$0")/consumer-venv.sh" mlflow
