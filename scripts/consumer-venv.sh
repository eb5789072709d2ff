#!/usr/bin/env bash
# A real GenAI consumer's own venv for its end-to-end test (tests/e2e/test_NAME.py), NAME being
# mlflow or phoenix: created once per version of tests/e2e/NAME-requirements.txt under
# ~/.cache/cafe-otel/NAME/<hash>, never in the project's venv (each is large and brings its own
# dependencies). Prints the venv's path. CAFE_<NAME>_CACHE moves the cache.
#   usage: bash scripts/consumer-venv.sh NAME
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=${1:?usage: bash scripts/consumer-venv.sh NAME (mlflow or phoenix)}
REQUIREMENTS=tests/e2e/$NAME-requirements.txt
if [ ! -f "$REQUIREMENTS" ]; then
  echo "error: no $REQUIREMENTS: NAME is one of mlflow, phoenix" >&2
  exit 2
fi
KEY=$(sha256sum "$REQUIREMENTS" | cut -c1-16)
CACHE_VARIABLE="CAFE_$(echo "$NAME" | tr '[:lower:]' '[:upper:]')_CACHE"
CACHE=${!CACHE_VARIABLE:-$HOME/.cache/cafe-otel/$NAME}
TARGET="$CACHE/$KEY"
# The venv's command has the consumer's name (bin/mlflow, bin/phoenix).
if [ -x "$TARGET/bin/$NAME" ] && [ -f "$TARGET/.complete" ]; then
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
