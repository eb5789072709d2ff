"""Fixtures that find the built binaries and run Jaeger + the Collector per test.

Binaries: $CAFE_OTELCOL_BIN / $CAFE_JAEGER_BIN, else this checkout's build,
$CAFE_OTEL_BIN_CACHE/<key>/{otelcol-cafe,jaeger} (default cache ~/.cache/cafe-otel/bin;
the key hashes the manifest, tools/jaeger/go.mod + go.sum and `go version`, as
scripts/build-otel-binaries.sh computes it; otelstack/binaries.py).
A missing binary skips the test with instructions, or fails it when
CAFE_E2E_STRICT=1 (CI: a missing build must not pass as a skip).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from otelstack import BUILD_HINT, Collector, Jaeger, binary_path, usable


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: runs the real Collector and Jaeger binaries (slow)")


def _binary(env_var: str, name: str) -> Path:
    path, explicit = binary_path(env_var, name)
    if usable(path):
        return path
    message = f"{name} binary not found at {path} (set {env_var} or {BUILD_HINT})"
    # A path someone set on purpose and got wrong is an error, not a reason to skip.
    if explicit or os.environ.get("CAFE_E2E_STRICT") == "1":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def otelcol_bin() -> Path:
    return _binary("CAFE_OTELCOL_BIN", "otelcol-cafe")


@pytest.fixture(scope="session")
def jaeger_bin() -> Path:
    return _binary("CAFE_JAEGER_BIN", "jaeger")


@pytest.fixture
def procs(request: pytest.FixtureRequest) -> Iterator[list]:
    """Every process a test starts; all are stopped afterwards, logs shown on failure."""
    started: list = []
    yield started
    for proc in reversed(started):
        proc.stop()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        for proc in started:
            print(proc.tail())


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture
def jaeger(jaeger_bin: Path, tmp_path: Path, procs: list) -> Jaeger:
    proc = Jaeger.create(jaeger_bin, tmp_path)
    procs.append(proc)
    proc.start()
    return proc


@pytest.fixture
def collector(otelcol_bin: Path, tmp_path: Path, jaeger: Jaeger, procs: list) -> Collector:
    """The shipped collector.yaml, exporting to `jaeger`, queue under tmp_path."""
    proc = Collector.create(otelcol_bin, tmp_path, upstream=jaeger.otlp_grpc, queue_dir=tmp_path / "queue")
    procs.append(proc)
    proc.start()
    return proc
