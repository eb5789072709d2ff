#!/usr/bin/env bash
# The README's test command (`make test`) runs this after setting up the venv:
# lint, type-check, build or reuse the Collector and Jaeger binaries, then every test.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}

"$VENV/bin/ruff" check .
# Strict typing over both packages (pyproject.toml's [tool.mypy]).
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

# The real GenAI consumers of their end-to-end tests (tests/e2e/test_mlflow.py, test_phoenix.py),
# each in its own cached venv, never this one.
for consumer in mlflow phoenix; do
  if ! bash scripts/consumer-venv.sh "$consumer" >/dev/null; then
    if [ "${CAFE_E2E_STRICT:-0}" = 1 ]; then
      echo "error: CAFE_E2E_STRICT=1 but $consumer could not be installed (bash scripts/$consumer-venv.sh)" >&2
      exit 1
    fi
    echo "note: $consumer could not be installed, so its end-to-end test will be skipped."
  fi
done

# The page tests look through headless Chromium (Debian's package); as root with apt, install it.
if ! command -v "${CAFE_CHROMIUM:-chromium}" >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian's chromium for the page tests"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  elif [ "${CAFE_E2E_STRICT:-0}" = 1 ]; then
    echo "error: CAFE_E2E_STRICT=1 but headless Chromium is not installed (apt-get install chromium)" >&2
    exit 1
  else
    echo "note: Chromium is not installed, so the page tests will be skipped (apt-get install chromium)."
  fi
fi

"$VENV/bin/python" -m pytest "$@"

# The other client library: openai 1.x and Groq's SDK on `httpx` (this venv's openai 3.x is on
# httpx2), in the cached second environment of scripts/httpx-venv.sh. The files that drive the
# seam through a real SDK: the marker, cafe record / replay-run, the spans, cafe view, and a
# recording made through one library replaying through the other.
HTTPX_VENV=$(bash scripts/httpx-venv.sh)
"$HTTPX_VENV/bin/python" -m pytest -m "not e2e" -p no:cacheprovider \
  tests/wire/test_libraries.py tests/wire/test_record_replay.py tests/wire/test_observed.py \
  tests/wire/test_pytest_marker.py tests/wire/test_run_cli.py tests/wire/test_wire_recordings_in_tools.py \
  tests/otel/test_instrumentation.py tests/otel/test_instrumentation_stream.py
