#!/usr/bin/env bash
# The README's test command (`make test`) runs this after setting up the venv:
# lint, type-check, build or reuse the Collector and Jaeger binaries, then every test.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}

"$VENV/bin/ruff" check .
# Strict typing over the modules pyproject.toml's [tool.mypy] lists (those clean so far).
"$VENV/bin/mypy"

if command -v go >/dev/null 2>&1; then
  bash scripts/build-otel-binaries.sh
elif [ "${CAFE_E2E_STRICT:-0}" = 1 ]; then
  echo "error: CAFE_E2E_STRICT=1 but Go is not installed: the end-to-end tests cannot run" >&2
  exit 1
else
  echo "note: Go is not installed, so the end-to-end tests (a real Collector and Jaeger) will be"
  echo "      skipped. Install Go >= 1.26, then run 'make test' again (it builds them once)."
fi

"$VENV/bin/python" -m pytest "$@"
