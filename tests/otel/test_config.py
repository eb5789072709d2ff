"""Settings are read in one place, once: `cafe_otel._config.resolve` reads every variable of the
environ it is handed once, into a frozen `TelemetryConfig` that `configure()` builds from; every
variable's name is a constant of `cafe_otel._config.variables`; `configure()`'s less everyday
arguments come in groups, and their old flat spellings still work, with a DeprecationWarning."""

from __future__ import annotations

import ast
import dataclasses
import io
import os
import re
import subprocess
import sys
import warnings
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

import cafe_otel
import cafe_otel._configure
from cafe.cli import main
from cafe_otel import AdvancedOptions, BatchOptions, MetricsOptions, TelemetryConfigError, configure
from cafe_otel._config import TelemetryConfig, read_environ, resolve
from cafe_otel._config import variables as v
from cafe_otel._configure import MOVED_ARGUMENTS, build

from .conftest import closed_port

PACKAGE = Path(cafe_otel.__file__).parent
CONFIG = PACKAGE / "_config"
ROOT = PACKAGE.parent


class CountingEnviron(Mapping[str, str]):
    """An environ that counts how often each name is looked at, whichever way."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self.values, self.reads, self.listed = dict(values), Counter[str](), 0

    def __getitem__(self, name: str) -> str:
        self.reads[name] += 1
        return self.values[name]

    def __contains__(self, name: object) -> bool:
        self.reads[str(name)] += 1
        return name in self.values

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        self.reads[name] += 1
        return self.values.get(name, default)

    def __iter__(self) -> Iterator[str]:
        self.listed += 1
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)


# Variables of every part of the settings, all valid, so each reader runs.
FULL = {
    "OTEL_SERVICE_NAME": "counter", "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-team=a", "OTEL_EXPORTER_OTLP_TIMEOUT": "2000",
    "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_INSECURE": "true",
    "OTEL_BSP_MAX_QUEUE_SIZE": "64", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "32", "OTEL_BSP_SCHEDULE_DELAY": "50",
    "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5",
    "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "64", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "unset",
    "OTEL_METRICS_EXPORTER": "otlp", "OTEL_METRIC_EXPORT_INTERVAL": "60000", "OTEL_METRIC_EXPORT_TIMEOUT": "1000",
    "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "delta",
    "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION": "explicit_bucket_histogram",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true", "CAFE_SCRUB_PATTERNS": "sk-[a-z]{8}",
    "CAFE_JAEGER_URL": "http://127.0.0.1:16686", "UNRELATED": "x",
}


def test_configure_reads_each_variable_of_its_environ_once_and_lists_none():
    environ = CountingEnviron(FULL)
    handle = configure(environ=environ, set_global=False, batch=BatchOptions(shutdown_timeout=0.0))
    handle.shutdown(0.0)
    assert handle.settings is not None and handle.settings.service_name == "counter"
    assert handle.metric_settings is not None  # the metrics signal was resolved too
    read_twice = sorted(name for name, count in environ.reads.items() if count > 1)
    assert read_twice == []
    assert environ.listed == 0  # nothing walks the whole environment
    assert set(environ.reads) <= v.KNOWN_VARIABLES


def test_the_cli_reads_each_variable_once_for_a_whole_session(tmp_path):
    environ = CountingEnviron({**FULL, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{closed_port()}"})
    out, err = io.StringIO(), io.StringIO()
    code = main(["shift", "--seed", "1", "--otlp-protocol", "http/protobuf"], environ=environ,
                out=out, err=err)
    assert code in (0, 48), err.getvalue()  # nothing listens: the spans may be lost, never the rule
    read_twice = sorted(name for name, count in environ.reads.items()
                        if count > 1 and name.startswith(("OTEL_", "CAFE_JAEGER", "CAFE_SCRUB")))
    assert read_twice == []


def test_the_resolved_configuration_is_frozen_and_explicit_arguments_win():
    environ = {"OTEL_SERVICE_NAME": "from-env", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4317",
               "OTEL_BSP_MAX_QUEUE_SIZE": "64", "OTEL_TRACES_SAMPLER": "always_on", "OTEL_METRICS_EXPORTER": "none"}
    config = resolve(environ, service_name="given", endpoint="http://given:4317",
                     batch=BatchOptions(max_queue_size=8), advanced=AdvancedOptions(sampler=ALWAYS_OFF), metrics=True)
    assert isinstance(config, TelemetryConfig)
    assert (config.settings.service_name, config.settings.endpoint) == ("given", "http://given:4317")
    assert config.batch.max_queue_size == 8 and config.sampler is ALWAYS_OFF and config.metrics is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.console = True  # type: ignore[misc]
    # Given nothing, the environ decides.
    fallback = resolve(environ)
    assert (fallback.settings.service_name, fallback.batch.max_queue_size, fallback.metrics) == ("from-env", 64, None)


def test_the_configuration_shows_no_credential_secret_or_scrub_pattern():
    environ = {"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20tok-1234567890",
               "OTEL_EXPORTER_OTLP_ENDPOINT": "http://user:pass-0987654321@127.0.0.1:4317?token=q-5555555555",
               "CAFE_SCRUB_PATTERNS": "literal-secret-4242424242"}
    shown = repr(resolve(environ, secrets=("sk-live-1111111111",))) + repr(read_environ(environ))
    for secret in ("tok-1234567890", "pass-0987654321", "q-5555555555", "literal-secret-4242424242",
                   "sk-live-1111111111"):
        assert secret not in shown


def test_building_a_configuration_reads_no_environment(monkeypatch):
    config = resolve({}, exporter=InMemorySpanExporter(), set_global=False)
    for name in ("OTEL_TRACES_SAMPLER", "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_SPAN_EVENT_COUNT_LIMIT", "OTEL_SDK_DISABLED"):
        monkeypatch.setenv(name, "not a value anyone accepts")
    handle = build(config)  # would be exit 20 if anything read os.environ now
    assert handle.enabled
    handle.shutdown(0.0)


def test_an_environment_snapshot_refuses_a_name_that_is_not_a_constant():
    snapshot = read_environ({"OTEL_SERVICE_NAME": "x", "OTEL_NOT_A_SETTING": "y"})
    assert dict(snapshot) == {"OTEL_SERVICE_NAME": "x"}
    with pytest.raises(LookupError, match="OTEL_NOT_A_SETTING is not a constant"):
        snapshot.get("OTEL_NOT_A_SETTING")


def _python_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


_NAME = re.compile(r"(OTEL|CAFE|GRPC)_[A-Z0-9_]*")


def test_every_variable_name_is_a_constant_of_the_variables_module():
    """No string in cafe_otel but those of `variables.py` is a variable's name (or a piece of
    one, as in an f-string): each name that is read is a constant there. (Prose may mention one.)"""
    offenders = []
    for path in _python_files():
        if path == CONFIG / "variables.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
                    and _NAME.fullmatch(node.value.strip())):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value[:50]!r}")
    assert offenders == []


def test_every_constant_of_the_variables_module_is_read_by_the_snapshot():
    names = {value for name, value in vars(v).items() if name.isupper() and isinstance(value, str)
             and value.startswith(("OTEL_", "CAFE_")) and value.endswith(tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))}
    assert names - v.KNOWN_VARIABLES == set()
    import cafe.privacy

    assert cafe.privacy.ENV_PATTERNS == v.CAFE_SCRUB_PATTERNS  # cafe's own name, spelled the same


_READS = {"get", "items", "keys", "values", "setdefault", "pop"}
_ENVIRON_NAMES = {"environ", "env", "environment"}


def test_only_the_config_package_reads_an_environment():
    """Outside `cafe_otel/_config/`, an environ is only handed on: nothing looks into one,
    and nothing touches `os.environ` or calls `os.getenv`."""
    offenders = []
    for path in _python_files():
        if CONFIG in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv") and (
                    isinstance(node.value, ast.Name) and node.value.id == "os"):
                offenders.append(f"{where}: os.{node.attr}")
            if (isinstance(node, ast.Attribute) and node.attr in _READS and isinstance(node.value, ast.Name)
                    and node.value.id in _ENVIRON_NAMES):
                offenders.append(f"{where}: {node.value.id}.{node.attr}")
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in _ENVIRON_NAMES:
                offenders.append(f"{where}: {node.value.id}[...]")
            if isinstance(node, ast.Compare) and any(
                    isinstance(c, ast.Name) and c.id in _ENVIRON_NAMES for c in node.comparators):
                offenders.append(f"{where}: ... in {ast.unparse(node.comparators[0])}")
    assert offenders == []


@pytest.mark.parametrize(("keyword", "value"), [
    ("export_timeout", 2.0), ("max_queue_size", 16), ("max_export_batch_size", 4), ("schedule_delay", 0.2),
    ("shutdown_timeout", 0.1), ("metric_exporter", "an exporter"), ("metric_export_interval", 30.0),
    ("id_generator", "an id generator"), ("sampler", ALWAYS_OFF), ("resource", "a resource"),
    ("extra_processors", "a processor"), ("metadata_only", False), ("replay", True),
])
def test_a_moved_keyword_still_works_and_its_warning_names_the_new_spelling(keyword, value, monkeypatch):
    value = _made(value)
    built: list[TelemetryConfig] = []
    monkeypatch.setattr(cafe_otel._configure, "build", lambda config: built.append(config) or build(config))
    group_keyword, group = MOVED_ARGUMENTS[keyword]
    field = {"metric_exporter": "exporter", "metric_export_interval": "export_interval"}.get(keyword, keyword)
    with pytest.warns(DeprecationWarning, match=rf"configure\({keyword}=\.\.\.\) is deprecated: use "
                                                rf"configure\({group_keyword}={group}\({field}=\.\.\.\)\)") as caught:
        handle = configure(exporter=InMemorySpanExporter(), environ={}, set_global=False,
                           metrics=keyword.startswith("metric_") or None, **{keyword: value})
    assert caught[0].filename == __file__  # the warning points at the caller's line
    handle.shutdown(0.5)
    (config,) = built
    found = {
        "export_timeout": config.settings.export_timeout, "max_queue_size": config.batch.max_queue_size,
        "max_export_batch_size": config.batch.max_export_batch_size, "schedule_delay": config.batch.schedule_delay,
        "shutdown_timeout": config.batch.shutdown_timeout, "metric_exporter": config.metric_exporter,
        "metric_export_interval": config.metrics.export_interval if config.metrics else None,
    }.get(keyword, getattr(config.advanced, keyword, None))
    assert found == value


def _made(value):
    """The SDK objects a moved keyword takes, made fresh."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from cafe_otel import SequentialIdGenerator

    from .test_metrics_setup import Metrics

    return {"an exporter": lambda: Metrics(), "an id generator": SequentialIdGenerator,
            "a resource": lambda: Resource({"service.name": "given"}),
            "a processor": lambda: (SimpleSpanProcessor(InMemorySpanExporter()),),
            }.get(value, lambda: value)() if isinstance(value, str) else value


def test_a_keyword_given_twice_both_flat_and_in_its_group_is_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(TelemetryConfigError, match=r"^max_queue_size: given both .* batch=BatchOptions"):
            configure(exporter=InMemorySpanExporter(), environ={}, batch=BatchOptions(schedule_delay=1.0),
                      max_queue_size=8)
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_queue'"):
        configure(exporter=InMemorySpanExporter(), environ={}, max_queue=8)  # type: ignore[call-arg]


@pytest.mark.parametrize(("make", "field"), [
    (lambda: BatchOptions(max_queue_size="8"), "BatchOptions.max_queue_size"),  # type: ignore[arg-type]
    (lambda: BatchOptions(schedule_delay="soon"), "BatchOptions.schedule_delay"),  # type: ignore[arg-type]
    (lambda: BatchOptions(max_queue_size=4, max_export_batch_size=8), "BatchOptions.max_export_batch_size"),
    (lambda: MetricsOptions(exporter=object()), "MetricsOptions.exporter"),  # type: ignore[arg-type]
    (lambda: MetricsOptions(enabled="yes"), "MetricsOptions.enabled"),  # type: ignore[arg-type]
    (lambda: AdvancedOptions(sampler="always_on"), "AdvancedOptions.sampler"),  # type: ignore[arg-type]
    (lambda: AdvancedOptions(extra_processors=[object()]), "AdvancedOptions.extra_processors"),  # type: ignore[list-item]
    (lambda: AdvancedOptions(replay=1), "AdvancedOptions.replay"),  # type: ignore[arg-type]
    (lambda: configure(environ={}, batch={"max_queue_size": 8}), "batch"),  # type: ignore[arg-type]
    (lambda: configure(environ={}, metrics="on"), "metrics"),  # type: ignore[arg-type]
    (lambda: configure(environ={}, advanced=BatchOptions()), "advanced"),  # type: ignore[arg-type]
])
def test_a_wrong_value_in_a_group_is_a_configuration_error_naming_the_field(make, field):
    with pytest.raises(TelemetryConfigError) as caught:
        make()
    assert str(caught.value).startswith(f"{field}: ")
    assert caught.value.exit_code == 20


def test_a_batch_larger_than_a_queue_from_the_environ_names_the_field():
    with pytest.raises(TelemetryConfigError, match=r"^BatchOptions\.max_export_batch_size: .* 1 to 4"):
        resolve({"OTEL_BSP_MAX_QUEUE_SIZE": "4"}, batch=BatchOptions(max_export_batch_size=8))


def test_metrics_options_decide_on_or_off_and_give_their_parts():
    from .test_metrics_setup import Metrics

    exporter = Metrics()
    on = resolve({"OTEL_METRICS_EXPORTER": "none"}, exporter=InMemorySpanExporter(),
                 metrics=MetricsOptions(exporter=exporter, export_interval=5.0, enabled=True))
    assert on.metrics is not None and on.metrics.export_interval == 5.0 and on.metric_exporter is exporter
    # Undecided: the variable decides, and a metric exporter counts as a destination.
    assert resolve({"OTEL_METRICS_EXPORTER": "none"}, metrics=MetricsOptions(exporter=exporter)).metrics is None
    assert resolve({}, exporter=InMemorySpanExporter(), metrics=MetricsOptions(exporter=exporter)).metrics is not None


_GRPC_CORE = r"""
import os, socket, sys, threading
from cafe_otel._config.environment import import_grpc_quietly
import_grpc_quietly()
assert "GRPC_VERBOSITY" not in os.environ, "the process environment was changed"
import grpc
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen(4)
def answer():  # not TLS: the client's handshake fails
    for _ in range(8):
        connection, _ = server.accept(); connection.recv(64); connection.sendall(b"HTTP/1.1 400 no\r\n\r\n")
        connection.close()
threading.Thread(target=answer, daemon=True).start()
exporter = OTLPSpanExporter(endpoint=f"https://127.0.0.1:{server.getsockname()[1]}", insecure=False,
                            credentials=grpc.ssl_channel_credentials(), timeout=1)
provider = TracerProvider(); provider.add_span_processor(SimpleSpanProcessor(exporter))
import logging; logging.disable(logging.CRITICAL)
with provider.get_tracer("t").start_as_current_span("s"):
    pass
provider.shutdown()
print("done")
"""


def test_grpc_core_is_imported_quiet_without_changing_the_process_environment():
    pytest.importorskip("grpc")
    environ = {name: value for name, value in os.environ.items() if name != "GRPC_VERBOSITY"}
    done = subprocess.run([sys.executable, "-c", _GRPC_CORE], capture_output=True, text=True, timeout=120,
                          env={**environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done"
    assert "ssl_transport_security" not in done.stderr and "Handshake failed" not in done.stderr, done.stderr
