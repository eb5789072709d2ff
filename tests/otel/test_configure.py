"""configure(): explicit arguments beat OTEL_* variables, which beat defaults."""

from __future__ import annotations

import threading
import time

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import cafe
from cafe_otel import AdvancedOptions, BatchOptions, OTelTracer, TelemetryConfigError, configure, resolve_settings
from cafe_otel._spans.content import CaptureMode
from tests.timing import SCHEDULING_SLACK

from .shift import seed_shift


def test_defaults():
    s = resolve_settings(environ={})
    assert (s.service_name, s.protocol, s.endpoint, s.headers, s.export_timeout, s.capture, s.disabled) == (
        "cafe", "grpc", "http://localhost:4317", {}, 5.0, CaptureMode.NO_CONTENT, False)


def test_service_name_precedence():
    env = {"OTEL_SERVICE_NAME": "from-env", "OTEL_RESOURCE_ATTRIBUTES": "service.name=from-resource,team=bar"}
    assert resolve_settings(service_name="explicit", environ=env).service_name == "explicit"
    assert resolve_settings(environ=env).service_name == "from-env"
    only_resource = {"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-resource"}
    assert resolve_settings(environ=only_resource).service_name == "from-resource"


def test_resource_attributes_are_parsed_percent_decoded_and_kept():
    env = {"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=prod,team=caf%C3%A9%2Cbar"}
    handle = configure(exporter=InMemorySpanExporter(), environ=env, advanced=AdvancedOptions(replay=True))
    attributes = dict(handle.provider.resource.attributes)
    assert attributes["team"] == "café,bar"
    assert attributes["deployment.environment.name"] == "prod"
    assert attributes["service.name"] == "cafe"
    assert "service.instance.id" not in attributes  # replay: no random part
    live = configure(exporter=InMemorySpanExporter(), environ=env)
    assert "service.instance.id" in live.provider.resource.attributes
    with pytest.raises(TelemetryConfigError, match="OTEL_RESOURCE_ATTRIBUTES"):
        resolve_settings(environ={"OTEL_RESOURCE_ATTRIBUTES": "novalue"})


def test_endpoint_precedence_and_http_path():
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://generic:4317",
           "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://signal:4317"}
    assert resolve_settings(endpoint="http://explicit:1", environ=env).endpoint == "http://explicit:1"
    assert resolve_settings(environ=env).endpoint == "http://signal:4317"
    generic = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://generic:4318"}
    assert resolve_settings(environ=generic).endpoint == "http://generic:4318"
    assert resolve_settings(protocol="http/protobuf", environ=generic).endpoint == "http://generic:4318/v1/traces"
    signal = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://signal:4318/custom"}
    assert resolve_settings(protocol="http/protobuf", environ=signal).endpoint == "http://signal:4318/custom"
    assert resolve_settings(protocol="http", environ={}).endpoint == "http://localhost:4318/v1/traces"
    assert resolve_settings(endpoint="127.0.0.1:4317", environ={}).endpoint == "http://127.0.0.1:4317"


def test_protocol_precedence():
    env = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}
    assert resolve_settings(environ=env).protocol == "http/protobuf"
    assert resolve_settings(protocol="grpc", environ=env).protocol == "grpc"
    assert resolve_settings(environ={"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}).protocol == "http/protobuf"
    with pytest.raises(TelemetryConfigError, match="http/json"):
        resolve_settings(environ={"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})


def test_headers_precedence():
    env = {"OTEL_EXPORTER_OTLP_HEADERS": "a=1,b=two%20words", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "c=3"}
    assert resolve_settings(environ=env).headers == {"c": "3"}
    assert resolve_settings(environ={"OTEL_EXPORTER_OTLP_HEADERS": "a=1,b=two%20words"}).headers == {
        "a": "1", "b": "two words"}
    assert resolve_settings(headers={"x": "y"}, environ=env).headers == {"x": "y"}


def test_timeout_variable_is_milliseconds_and_the_argument_seconds():
    assert resolve_settings(environ={"OTEL_EXPORTER_OTLP_TIMEOUT": "2500"}).export_timeout == 2.5
    env = {"OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "700"}
    assert resolve_settings(environ=env).export_timeout == 0.7
    assert resolve_settings(export_timeout=3, environ=env).export_timeout == 3.0
    with pytest.raises(TelemetryConfigError, match="milliseconds"):
        resolve_settings(environ={"OTEL_EXPORTER_OTLP_TIMEOUT": "10s"})


def test_capture_precedence():
    env = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}
    assert resolve_settings(environ=env).capture is CaptureMode.SPAN_ONLY
    assert resolve_settings(capture_content=False, environ=env).capture is CaptureMode.NO_CONTENT
    handle = configure(exporter=InMemorySpanExporter(), environ=env)
    assert handle.tracer().capture is CaptureMode.SPAN_ONLY


def test_the_environ_argument_is_all_that_is_read(monkeypatch):
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-process")
    assert resolve_settings(environ={}).service_name == "cafe"
    assert resolve_settings().service_name == "from-process"  # os.environ, read at call time


@pytest.mark.parametrize("value", ["true", "TRUE", " True "])
def test_sdk_disabled_gives_a_no_op_handle(value):
    handle = configure(endpoint="http://127.0.0.1:9", environ={"OTEL_SDK_DISABLED": value})
    assert not handle.enabled and handle.provider is None
    tracer = handle.tracer()
    assert type(tracer) is cafe.Tracer
    assert seed_shift(tracer).stop_reason == "answered"
    started = time.monotonic()
    assert handle.shutdown(5.0) == 0.0
    assert time.monotonic() - started < SCHEDULING_SLACK  # nothing waited: far below the 5 s bound
    assert handle.force_flush() is True


def test_sdk_disabled_false_is_enabled():
    handle = configure(exporter=InMemorySpanExporter(), environ={"OTEL_SDK_DISABLED": "false"})
    assert handle.enabled and isinstance(handle.tracer(), OTelTracer)
    handle.shutdown(1.0)


def test_configure_told_not_to_sets_nothing_global_and_each_tracer_is_fresh():
    before = trace.get_tracer_provider()
    handle = configure(exporter=InMemorySpanExporter(), environ={}, set_global=False)
    assert trace.get_tracer_provider() is before
    assert handle.tracer() is not handle.tracer()
    handle.shutdown(1.0)


def test_otlp_exporters_get_every_setting_explicitly():
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from cafe_otel._export.otlp import build_exporter

    settings = resolve_settings(protocol="http/protobuf", endpoint="http://127.0.0.1:1", headers={"k": "v"},
                                export_timeout=1.5, environ={})
    exporter = build_exporter("traces", settings.traces)
    assert isinstance(exporter, OTLPSpanExporter)
    exporter.shutdown()
    grpc = build_exporter("traces", resolve_settings(endpoint="http://127.0.0.1:1", environ={}).traces)
    assert type(grpc).__module__.startswith("opentelemetry.exporter.otlp.proto.grpc")
    grpc.shutdown()


def test_sequential_ids_are_non_zero_and_ordered():
    from cafe_otel import SequentialIdGenerator

    ids = SequentialIdGenerator()
    assert [ids.generate_trace_id(), ids.generate_span_id(), ids.generate_span_id()] == [1, 1, 2]
    with pytest.raises(ValueError):
        SequentialIdGenerator(0)


def test_importing_cafe_otel_has_no_side_effects():
    import subprocess
    import sys

    code = ("import threading, logging; from opentelemetry import trace; before = threading.active_count(); "
            "import cafe_otel; assert threading.active_count() == before; "
            "assert type(trace.get_tracer_provider()).__name__ == 'ProxyTracerProvider'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_credentials_in_headers_or_the_endpoint_never_reach_a_repr_or_an_error():
    from .conftest import closed_port

    secret = "sk-canary-header-5f1e"
    environ = {"OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer {secret}"}
    settings = resolve_settings(environ=environ)
    assert settings.headers == {"authorization": f"Bearer {secret}"}
    assert secret not in repr(settings)
    handle = configure(endpoint=f"http://user:{secret}@127.0.0.1:{closed_port()}?token={secret}", environ=environ,
                       batch=BatchOptions(export_timeout=0.5))
    assert secret not in repr(handle)
    seed_shift(handle.tracer())
    handle.shutdown(1.0)
    assert handle.account.dropped > 0
    assert "127.0.0.1" in handle.account.last_error
    assert secret not in handle.account.last_error and secret not in handle.account.summary()


class GatedExporter(InMemorySpanExporter):
    """Holds every export until released: what is queued meanwhile stays queued."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def export(self, spans):
        self.gate.wait(10)
        return super().export(spans)


def test_batch_settings_come_from_otel_bsp_variables_with_arguments_winning():
    environ = {"OTEL_BSP_MAX_QUEUE_SIZE": "3", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "3",
               "OTEL_BSP_SCHEDULE_DELAY": "60000"}
    sink = GatedExporter()
    handle = configure(exporter=sink, environ=environ)
    # 17 spans while the exporter holds its first batch: 3 in it, 3 queued, at least 11 dropped.
    seed_shift(handle.tracer())
    sink.gate.set()
    handle.shutdown(2.0)
    account = handle.account
    assert account.dropped_queue_full >= 17 - 6
    assert account.exported + account.dropped == 17
    assert len(sink.get_finished_spans()) == account.exported <= 6
    explicit = configure(exporter=InMemorySpanExporter(), environ=environ, batch=BatchOptions(max_queue_size=64))
    seed_shift(explicit.tracer())
    explicit.shutdown(2.0)
    assert explicit.account.dropped == 0 and explicit.account.exported == 17
    with pytest.raises(TelemetryConfigError, match="OTEL_BSP_MAX_QUEUE_SIZE"):
        configure(exporter=InMemorySpanExporter(), environ={"OTEL_BSP_MAX_QUEUE_SIZE": "lots"})


# --- per-signal OTLP settings ----------------------------------------------------------------

TRACES_ONLY = {
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces.example:4318/v1/traces",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "authorization=Bearer%20traces-only-credential",
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://metrics.example:4318/v1/metrics",
    "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
}


def test_a_traces_only_setting_never_reaches_the_metrics_exporter():
    from cafe_otel._config.metrics import resolve_metric_settings

    traces = resolve_settings(environ=TRACES_ONLY)
    metrics = resolve_metric_settings(traces.options, environ=TRACES_ONLY)
    assert (traces.protocol, traces.headers, traces.compression) == (
        "grpc", {"authorization": "Bearer traces-only-credential"}, "gzip")
    assert (metrics.protocol, metrics.endpoint, metrics.headers, metrics.compression) == (
        "http/protobuf", "http://metrics.example:4318/v1/metrics", {}, None)


def test_a_traces_only_endpoint_is_not_the_metrics_endpoint():
    from cafe_otel._config.metrics import resolve_metric_settings

    environ = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces.example:4318/v1/traces",
               "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
    assert resolve_metric_settings(environ=environ).endpoint == "http://localhost:4318/v1/metrics"


def test_general_settings_apply_to_both_signals_and_explicit_arguments_win():
    from cafe_otel._config.metrics import resolve_metric_settings

    environ = {"OTEL_EXPORTER_OTLP_HEADERS": "x-team=cafe", "OTEL_EXPORTER_OTLP_TIMEOUT": "2500",
               "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf"}
    traces = resolve_settings(environ=environ)
    metrics = resolve_metric_settings(traces.options, environ=environ)
    for signal in (traces, metrics):
        assert (signal.headers, signal.compression) == ({"x-team": "cafe"}, "gzip")
    assert (traces.export_timeout, metrics.export_timeout) == (2.5, 2.5)
    explicit = resolve_settings(protocol="grpc", headers={"x-team": "ops"}, export_timeout=1.0, environ=environ)
    metrics = resolve_metric_settings(explicit.options, environ=environ)
    assert (metrics.protocol, metrics.headers, metrics.export_timeout) == ("grpc", {"x-team": "ops"}, 1.0)


def test_metrics_are_built_for_their_own_protocol_with_their_own_headers():
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    from cafe_otel._config.metrics import resolve_metric_settings
    from cafe_otel._export.otlp import build_exporter

    settings = resolve_metric_settings(environ=TRACES_ONLY)
    exporter = build_exporter("metrics", settings.exporter, preferred_temporality=settings.preferred_temporality(),
                              preferred_aggregation=settings.preferred_aggregation())
    assert isinstance(exporter, OTLPMetricExporter)  # HTTP, as METRICS_PROTOCOL says, not the traces' gRPC
    assert "authorization" not in {key.lower() for key in exporter._client._headers}
    exporter.shutdown()


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
@pytest.mark.parametrize("signal", ["traces", "metrics"])
def test_one_builder_hands_each_signal_its_own_settings(signal, protocol):
    """Both signals' exporters come from one builder, each given its own resolved settings
    (endpoint, headers, timeout, compression) and never the other signal's."""
    from cafe_otel._config.signal import resolve_signal
    from cafe_otel._export.otlp import build_exporter

    other = "metrics" if signal == "traces" else "traces"
    own, theirs = f"OTEL_EXPORTER_OTLP_{signal.upper()}_", f"OTEL_EXPORTER_OTLP_{other.upper()}_"
    environ = {"OTEL_EXPORTER_OTLP_PROTOCOL": protocol, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1",
               f"{own}HEADERS": "x-own=1", f"{theirs}HEADERS": "x-theirs=1", f"{own}TIMEOUT": "1500",
               f"{theirs}TIMEOUT": "9000", f"{own}COMPRESSION": "gzip"}
    config = resolve_signal(signal, environ)
    preferences = {} if signal == "traces" else {"preferred_temporality": {}, "preferred_aggregation": {}}
    exporter = build_exporter(signal, config, **preferences)
    try:
        sent = exporter if protocol == "grpc" else exporter._client  # type: ignore[attr-defined]
        headers = {key.lower(): value for key, value in dict(sent._headers).items()}
        assert (headers.get("x-own"), "x-theirs" in headers, sent._timeout) == ("1", False, 1.5)
        assert sent._compression.name.lower() == "gzip"
        assert sent._endpoint == ("127.0.0.1:1" if protocol == "grpc" else f"http://127.0.0.1:1/v1/{signal}")
        transport, kind = "grpc" if protocol == "grpc" else "http", "trace" if signal == "traces" else "metric"
        assert type(exporter).__module__ == f"opentelemetry.exporter.otlp.proto.{transport}.{kind}_exporter"
    finally:
        exporter.shutdown()
    with pytest.raises(ValueError, match=f"{other} exporter built from the {signal} settings"):
        build_exporter(other, config, **({} if other == "traces" else {"preferred_temporality": {},
                                                                        "preferred_aggregation": {}}))


# What the process environment holds and the resolved settings leave out: another signal's
# credential, one outside the environ handed in, one that explicit headers replace.
PROCESS_HEADERS = {"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20process-general-credential",
                   "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-process-traces=1",
                   "OTEL_EXPORTER_OTLP_METRICS_HEADERS": "x-process-metrics=1"}


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
@pytest.mark.parametrize("signal", ["traces", "metrics"])
@pytest.mark.parametrize(("handed", "explicit", "expected"), [
    ({}, None, {}),
    ({"OTEL_EXPORTER_OTLP_HEADERS": "x-team=cafe"}, None, {"x-team": "cafe"}),
    ({"OTEL_EXPORTER_OTLP_HEADERS": "x-team=cafe"}, {"x-api-key": "explicit"}, {"x-api-key": "explicit"}),
    ({}, {}, {}),  # explicit: no headers at all
])
def test_an_exporter_sends_the_resolved_headers_and_none_from_the_process_environment(
        signal, protocol, handed, explicit, expected, monkeypatch):
    from cafe_otel._config.signal import OTLPOptions, resolve_signal
    from cafe_otel._export.otlp import build_exporter

    for name, value in PROCESS_HEADERS.items():
        monkeypatch.setenv(name, value)
    environ = {"OTEL_EXPORTER_OTLP_PROTOCOL": protocol, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1",
               **handed}
    config = resolve_signal(signal, environ, OTLPOptions(headers=explicit))
    assert config.headers == expected
    preferences = {} if signal == "traces" else {"preferred_temporality": {}, "preferred_aggregation": {}}
    exporter = build_exporter(signal, config, **preferences)
    try:
        sent = dict(exporter._headers) if protocol == "grpc" else {  # type: ignore[attr-defined]
            name.lower(): value for name, value in exporter._client._headers.items()  # type: ignore[attr-defined]
            if name.lower() not in ("content-type", "user-agent")}
        assert sent == expected
    finally:
        exporter.shutdown()


def test_a_shift_sends_each_receiver_its_own_headers_and_no_process_credential(monkeypatch):
    """Over the wire: a traces-only credential goes to the traces receiver alone, the
    metrics receiver gets the metrics' own header, and a credential that only the process
    environment holds (configure() was handed its own environ) goes to neither."""
    from tests.local_http import QuietHandler, serving

    received: list[tuple[str, dict[str, str]]] = []

    class Receiver(QuietHandler):
        def do_POST(self) -> None:
            self.read_body()
            received.append((self.path, {name.lower(): value for name, value in self.headers.items()}))
            self.answer(200, b"", "application/x-protobuf")

    for name, value in PROCESS_HEADERS.items():
        monkeypatch.setenv(name, value)
    with serving(Receiver) as traces_port, serving(Receiver) as metrics_port:
        environ = {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                   "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{traces_port}/v1/traces",
                   "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "authorization=Bearer%20traces-only-credential",
                   "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": f"http://127.0.0.1:{metrics_port}/v1/metrics",
                   "OTEL_EXPORTER_OTLP_METRICS_HEADERS": "x-metrics-team=cafe"}
        handle = configure(environ=environ, set_global=False, batch=BatchOptions(shutdown_timeout=5.0))
        seed_shift(handle.tracer())
        handle.shutdown(5.0)
    by_path = {path: headers for path, headers in received}
    assert set(by_path) == {"/v1/traces", "/v1/metrics"}
    assert by_path["/v1/traces"]["authorization"] == "Bearer traces-only-credential"
    assert by_path["/v1/metrics"]["x-metrics-team"] == "cafe"
    assert "authorization" not in by_path["/v1/metrics"]
    for headers in by_path.values():
        assert not {"x-process-traces", "x-process-metrics"} & set(headers)
        assert "process-general-credential" not in str(headers)


def test_one_resolver_reads_every_per_signal_variable_for_each_signal():
    from cafe_otel._config.signal import resolve_signal

    for signal in ("traces", "metrics"):
        prefix = f"OTEL_EXPORTER_OTLP_{signal.upper()}_"
        other = "OTEL_EXPORTER_OTLP_METRICS_" if signal == "traces" else "OTEL_EXPORTER_OTLP_TRACES_"
        environ = {prefix + "PROTOCOL": "http/protobuf", prefix + "HEADERS": "k=mine",
                   prefix + "TIMEOUT": "1500", prefix + "COMPRESSION": "gzip", prefix + "ENDPOINT": "http://mine:1/x",
                   other + "HEADERS": "k=theirs", other + "TIMEOUT": "9000", other + "ENDPOINT": "http://theirs:2/y"}
        found = resolve_signal(signal, environ)  # type: ignore[arg-type]
        assert (found.protocol, found.headers, found.timeout, found.compression, found.endpoint) == (
            "http/protobuf", {"k": "mine"}, 1.5, "gzip", "http://mine:1/x")


def _shape_module(tmp_path, monkeypatch: pytest.MonkeyPatch, name: str = "myapp_shapes") -> None:
    (tmp_path / f"{name}.py").write_text(
        "from cafe_otel import int_shape, text_shape\n"
        "SHAPES = {'myapp.tier': text_shape(values={'gold', 'silver'}), 'myapp.retries': int_shape(0, 10)}\n"
        "NOT_A_TABLE = 3\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))


def _exported_attributes(environ: dict[str, str], **options) -> dict:
    sink = InMemorySpanExporter()
    handle = configure(exporter=sink, environ=environ, set_global=False, metrics=False, **options)
    assert handle.provider is not None
    with handle.provider.get_tracer("myapp").start_as_current_span("handle order") as span:
        span.set_attributes({"myapp.tier": "gold", "myapp.retries": 2, "myapp.note": "free text"})
    handle.shutdown(2.0)
    (exported,) = sink.get_finished_spans()
    return dict(exported.attributes or {})


def test_a_shape_table_named_in_the_environment_lets_its_keys_out_as_configure_shapes_does(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    _shape_module(tmp_path, monkeypatch)
    assert _exported_attributes({}) == {}  # undeclared: removed
    named = _exported_attributes({"OTEL_PYTHON_CAFE_SHAPES": " myapp_shapes:SHAPES "})
    assert named == {"myapp.tier": "gold", "myapp.retries": 2}
    from cafe_otel import int_shape

    # An explicit configure(shapes=...) is added over the named tables.
    both = _exported_attributes({"OTEL_PYTHON_CAFE_SHAPES": "myapp_shapes:SHAPES"},
                                shapes={"myapp.retries": int_shape(0, 1)})
    assert both == {"myapp.tier": "gold"}


@pytest.mark.parametrize(("value", "said"), [
    ("myapp_shapes", "is not package.module:TABLE"),
    ("no_such_module_for_shapes:SHAPES", "'no_such_module_for_shapes' cannot be imported (ModuleNotFoundError)"),
    ("myapp_shapes:NOT_A_TABLE", "is not a mapping of attribute keys to cafe_otel shapes"),
    ("myapp_shapes:MISSING", "is not a mapping of attribute keys to cafe_otel shapes"),
])
def test_a_shape_table_that_does_not_load_is_a_named_error(tmp_path, monkeypatch: pytest.MonkeyPatch,
                                                           value: str, said: str) -> None:
    _shape_module(tmp_path, monkeypatch)
    with pytest.raises(TelemetryConfigError) as raised:
        configure(exporter=InMemorySpanExporter(), environ={"OTEL_PYTHON_CAFE_SHAPES": value}, set_global=False)
    assert str(raised.value).startswith("OTEL_PYTHON_CAFE_SHAPES: ") and said in str(raised.value)


def test_a_second_configure_says_that_its_handle_is_local_and_how_zero_code_declares_shapes() -> None:
    import subprocess
    import sys

    code = (
        "import warnings\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "from cafe_otel import configure\n"
        "first = configure(exporter=InMemorySpanExporter(), environ={}, metrics=False)\n"
        "assert first.is_global and 'local' not in first.account.summary()\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    second = configure(exporter=InMemorySpanExporter(), environ={}, metrics=False)\n"
        "assert not second.is_global\n"
        "(warning,) = [w for w in caught if w.category is RuntimeWarning]\n"
        "assert warning.filename == '<string>', warning.filename\n"
        "print(warning.message)\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    configure(exporter=InMemorySpanExporter(), environ={}, metrics=False, set_global=False)\n"
        "assert not caught\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    (said,) = done.stdout.splitlines()
    assert "the global providers were already set by an earlier configure()" in said
    assert "this handle is local" in said and "OTEL_PYTHON_CAFE_SHAPES=package.module:TABLE" in said
