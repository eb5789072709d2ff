# The two fresh-machine commands are `make demo` and `make test`; each sets itself up.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint e2e binaries bench bench-smoke clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	touch $@

## One café shift offline, as a story: the shift, its private recording, its spans, what leaves as OpenTelemetry, its replay.
demo: $(STAMP)
	$(BIN)/cafe demo

## Lint, unit and property tests, then the end-to-end tests against a real Collector and Jaeger.
test: $(STAMP)
	VENV=$(VENV) bash scripts/test.sh

lint: $(STAMP)
	$(BIN)/ruff check .

## Build (or reuse) the Collector and Jaeger binaries from their Go modules.
binaries:
	bash scripts/build-otel-binaries.sh

e2e: $(STAMP) binaries
	CAFE_E2E_STRICT=1 $(BIN)/python -m pytest -m e2e tests

## The five benchmarks of bench/README.md; prints a table of figures and targets.
bench: $(STAMP) binaries
	$(BIN)/python -m bench

bench-smoke: $(STAMP)
	$(BIN)/python -m bench --smoke

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
