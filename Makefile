# The two fresh-machine commands are `make demo` and `make test`; each sets itself up.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint e2e without-example binaries bench bench-smoke up down clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# setuptools tells every editable install, as a warning, not to shadow the package with a
# folder of its name; quiet means quiet, so that one note is filtered (by its text only).
$(STAMP): pyproject.toml setup.py cafe-wire-hook.pth | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	PYTHONWARNINGS="ignore:Editable installation" \
		$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[grpc,test,bench]'
	touch $@

## One café shift offline, as a story: the shift, its private recording, its spans, what leaves as OpenTelemetry, its replay.
demo: $(STAMP)
	$(BIN)/cafe demo

## Lint, unit and property tests, then the end-to-end tests against a real Collector and Jaeger.
test: $(STAMP)
	VENV=$(VENV) bash scripts/test.sh

lint: $(STAMP)
	$(BIN)/ruff check .

## The product without its worked example: a copy with the café deleted, type-checked and tested.
without-example: $(STAMP)
	VENV=$(VENV) bash scripts/without-example.sh

## Build (or reuse) the Collector and Jaeger binaries from their Go modules.
binaries:
	bash scripts/build-otel-binaries.sh

e2e: $(STAMP) binaries
	CAFE_E2E_STRICT=1 $(BIN)/python -m pytest -m e2e tests

## The local stack without Docker: the built Collector and Jaeger (Badger) on 127.0.0.1.
## STACK_PORTS moves ports: make up STACK_PORTS="collector.otlp_grpc=24317 collector.otlp_http=24318"
STACK_DIR ?= .stack
STACK_PORTS ?=
up: $(STAMP) binaries
	$(BIN)/python -m otelstack up --dir "$(STACK_DIR)" $(foreach port,$(STACK_PORTS),--port $(port))

down: $(STAMP)
	$(BIN)/python -m otelstack down --dir "$(STACK_DIR)"

## The benchmarks of bench/README.md; prints a table of figures and targets.
bench: $(STAMP) binaries
	$(BIN)/python -m bench

bench-smoke: $(STAMP)
	$(BIN)/python -m bench --smoke

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
