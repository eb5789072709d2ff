#!/usr/bin/env bash
# The second test environment: openai 1.x (and groq) on `httpx`, where the project's venv has
# openai 3.x on `httpx2`. Created once per version of tests/wire/httpx-requirements.txt and of
# the project's dependencies (pyproject.toml's `dependencies`) under ~/.cache/cafe-otel/httpx/<hash> (CAFE_HTTPX_CACHE moves it), never in the
# project's venv; the checkout it runs is installed into it (editable, so the tests run this
# checkout's code), again whenever it is used from another checkout or pyproject.toml changed.
# Prints its path.
#   usage: bash scripts/httpx-venv.sh
set -euo pipefail
cd "$(dirname "$0")/.."
REQUIREMENTS=tests/wire/httpx-requirements.txt
KEY=$( (cat "$REQUIREMENTS"; sed -n '/^dependencies = \[/,/^\]/p' pyproject.toml) | sha256sum | cut -c1-16)
CACHE=${CAFE_HTTPX_CACHE:-$HOME/.cache/cafe-otel/httpx}
TARGET="$CACHE/$KEY"
# The checkout installed into it, and its pyproject.toml (entry points, extras): either changed, it is
# installed again.
CHECKOUT="$(pwd -P) $(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$TARGET/.complete" ] || [ ! -x "$TARGET/bin/python" ]; then
  mkdir -p "$CACHE"
  # Built in place (a venv's scripts name its path, so it cannot be moved), and marked
  # complete last: a build that was interrupted is started again.
  rm -rf "$TARGET"
  python3 -m venv "$TARGET"
  "$TARGET/bin/pip" install -q --disable-pip-version-check -r "$REQUIREMENTS" >&2
  # The project's own dependencies beside those pins (the checkout itself is installed below).
  PYTHONWARNINGS="ignore:Editable installation" "$TARGET/bin/pip" install -q --disable-pip-version-check \
    --no-build-isolation -r "$REQUIREMENTS" -e . >&2
  echo "$CHECKOUT" > "$TARGET/.checkout"
  touch "$TARGET/.complete"
fi
if [ "$(cat "$TARGET/.checkout" 2>/dev/null)" != "$CHECKOUT" ]; then
  PYTHONWARNINGS="ignore:Editable installation" "$TARGET/bin/pip" install -q --disable-pip-version-check \
    --no-build-isolation --no-deps -e . >&2
  echo "$CHECKOUT" > "$TARGET/.checkout"
fi
echo "$TARGET"
