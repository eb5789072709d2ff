#!/usr/bin/env bash
# MLflow's own venv for the end-to-end test (tests/e2e/test_mlflow.py): created once per
# version of tests/e2e/mlflow-requirements.txt under ~/.cache/cafe-otel/mlflow/<hash>, never
# in the project's venv (MLflow is large and brings its own dependencies). Prints the venv's
# path. CAFE_MLFLOW_CACHE moves the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
REQUIREMENTS=tests/e2e/mlflow-requirements.txt
KEY=$(sha256sum "$REQUIREMENTS" | cut -c1-16)
CACHE=${CAFE_MLFLOW_CACHE:-$HOME/.cache/cafe-otel/mlflow}
TARGET="$CACHE/$KEY"
if [ -x "$TARGET/bin/mlflow" ] && [ -f "$TARGET/.complete" ]; then
  echo "$TARGET"
  exit 0
fi
mkdir -p "$CACHE"
# Built in place (a venv's scripts name its path, so it cannot be moved), and marked
# complete last: a build that was interrupted is started again.
rm -rf "$TARGET"
python3 -m venv "$TARGET"
"$TARGET/bin/pip" install -q --disable-pip-version-check -r "$REQUIREMENTS" >&2
touch "$TARGET/.complete"
echo "$TARGET"
