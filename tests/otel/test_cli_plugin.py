"""The `cafe` command with the otel plugin: --otlp on shift/replay, and `cafe export`."""

from __future__ import annotations

import gzip
import http.server
import io
import logging
import threading
import time
from collections.abc import Iterator

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from cafe import counter
from cafe.cli import main
from cafe.counter.cli import plugin as COUNTER
from cafe.recording.errors import RecordingNotFound
from cafe_otel import BatchOptions
from cafe_otel._cli.plugin import ExporterLogCapture, TelemetryExportFailed, plugin

from .conftest import SEED_DECISIONS, closed_port

ORIGIN = 1_767_225_600_000_000_000


class Receiver:
    """A minimal OTLP/HTTP receiver on 127.0.0.1 that keeps what it was sent."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.metric_requests: list[ExportMetricsServiceRequest] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path.endswith("/v1/metrics"):
                    receiver.metric_requests.append(ExportMetricsServiceRequest.FromString(body))
                else:
                    receiver.requests.append(ExportTraceServiceRequest.FromString(body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                return None

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def spans(self) -> list:
        return [span for request in self.requests for rs in request.resource_spans
                for ss in rs.scope_spans for span in ss.spans]

    def metric_points(self) -> list[tuple[str, object]]:
        """(metric name, data point) of every point received."""
        return [(metric.name, point) for request in self.metric_requests for rm in request.resource_metrics
                for sm in rm.scope_metrics for metric in sm.metrics
                for point in getattr(metric, metric.WhichOneof("data")).data_points]

    def raw(self) -> bytes:
        return b"".join(request.SerializeToString() for request in [*self.requests, *self.metric_requests])


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    found.thread.start()
    yield found
    found.server.shutdown()
    found.server.server_close()


def _cli(argv, environ=None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, environ=environ or {}, out=out, err=err, load_plugins=lambda warn: [COUNTER, plugin])
    return code, out.getvalue(), err.getvalue()


def test_cafe_shift_ships_spans_to_a_receiver_and_reports(receiver):
    code, out, err = _cli(["shift", "--seed", "1", "--otlp-protocol", "http/protobuf", f"--otlp={receiver.url}"])
    assert code == 0, err
    assert "stop reason: answered" in out
    assert err == "telemetry: 17 spans exported, 0 dropped; 9 metric points exported, 0 dropped\n"
    names = sorted(span.name for span in receiver.spans())
    assert names.count("chat scripted-barista-1") == 5 and "invoke_agent cafe-counter" in names
    assert b"latte" not in receiver.raw()  # the customer's line stays home


def _attributes(point) -> dict[str, str]:
    return {kv.key: kv.value.string_value for kv in point.attributes}


def test_cafe_shift_sends_genai_metrics_that_add_up_to_the_shift(receiver):
    code, out, err = _cli(["shift", "--seed", "1", "--otlp-protocol", "http/protobuf", f"--otlp={receiver.url}"])
    assert code == 0, err
    points = receiver.metric_points()
    tokens = {_attributes(p)["gen_ai.token.type"]: p.sum for name, p in points if name == "gen_ai.client.token.usage"}
    # The usage the shift printed (== usage ==) is what the histograms hold.
    usage_line = out.split("== usage ==\n", 1)[1].splitlines()[0]
    assert usage_line.startswith(f"5 model call(s), {tokens['input']:.0f} input + {tokens['output']:.0f} output")
    (duration,) = [p for name, p in points if name == "gen_ai.client.operation.duration"]
    assert duration.count == 5 and _attributes(duration)["gen_ai.request.model"] == "scripted-barista-1"
    (shifts,) = [p for name, p in points if name == "cafe.shifts"]
    assert _attributes(shifts) == {"cafe.stop_reason": "answered"} and shifts.as_int == 1
    metric_bytes = b"".join(request.SerializeToString() for request in receiver.metric_requests)
    assert b"latte" not in metric_bytes and b"shift-" not in metric_bytes  # no text, no conversation id


def test_metrics_exporter_none_sends_spans_only(receiver):
    code, _, err = _cli(["shift", "--seed", "1", "--otlp-protocol", "http/protobuf", f"--otlp={receiver.url}"],
                        {"OTEL_METRICS_EXPORTER": "none"})
    assert code == 0 and err == "telemetry: 17 spans exported, 0 dropped\n"
    assert receiver.metric_requests == [] and len(receiver.spans()) == 17


def test_an_unknown_metrics_exporter_is_a_configuration_error():
    code, _, err = _cli(["shift", "--seed", "1", "--otlp=http://127.0.0.1:9"], {"OTEL_METRICS_EXPORTER": "prometheus"})
    assert code == 20 and err == "cafe: error: OTEL_METRICS_EXPORTER: 'prometheus' is not otlp or none\n"


def test_the_endpoint_variable_alone_turns_export_on(receiver):
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
           "OTEL_SERVICE_NAME": "counter-3"}
    code, _, err = _cli(["shift", "--seed", "1"], env)
    assert code == 0 and err == "telemetry: 17 spans exported, 0 dropped; 9 metric points exported, 0 dropped\n"
    resource = {kv.key: kv.value.string_value for kv in receiver.requests[0].resource_spans[0].resource.attributes}
    assert resource["service.name"] == "counter-3"


def test_no_export_without_the_option_or_the_variable():
    code, _, err = _cli(["shift", "--seed", "1"])
    assert code == 0 and err == ""


def test_sdk_disabled_turns_the_plugin_off():
    code, _, err = _cli(["shift", "--seed", "1", "--otlp=http://127.0.0.1:9"], {"OTEL_SDK_DISABLED": "true"})
    assert code == 0 and err == ""


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_a_dead_collector_costs_the_shift_nothing_and_is_reported(protocol):
    port = closed_port()
    env = {"OTEL_EXPORTER_OTLP_TIMEOUT": "500"}  # milliseconds
    started = time.monotonic()
    code, out, err = _cli(["shift", "--seed", "1", "--otlp-protocol", protocol, f"--otlp=http://127.0.0.1:{port}"], env)
    assert time.monotonic() - started < 5.0
    assert code == 0 and "stop reason: answered" in out
    # Both signals lost, both counted: the metrics' one final export too.
    assert err.startswith("telemetry: 0 spans exported, 17 dropped (17 export failed); "
                          "0 metric points exported, 9 dropped; last error: ")
    assert f"127.0.0.1:{port}" in err and err.count("\n") == 1
    # The exporters' own retry log was held for the one line, and the logger is as it was.
    otlp_logger = logging.getLogger(ExporterLogCapture.LOGGER)
    assert otlp_logger.propagate is True
    assert not any(isinstance(h, ExporterLogCapture) for h in otlp_logger.handlers)


def test_cafe_replay_with_otlp_uses_the_recorded_timeline(receiver, tmp_path):
    path = tmp_path / "shift.jsonl"
    counter.record_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, path,
                         responder=counter.make_responder(SEED_DECISIONS),
                      decisions=SEED_DECISIONS, seed=3, wall_clock_ns=lambda: ORIGIN)
    code, _out, err = _cli(["replay", str(path), "--otlp-protocol", "http/protobuf", "--otlp", receiver.url])
    assert code == 0, err
    assert err == "telemetry: 17 spans exported, 0 dropped; 9 metric points exported, 0 dropped\n"
    root = next(s for s in receiver.spans() if s.name == "invoke_agent cafe-counter")
    assert root.start_time_unix_nano == ORIGIN


def test_cafe_export_sends_a_recording(receiver, tmp_path):
    path = tmp_path / "shift.jsonl"
    counter.record_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, path,
                         responder=counter.make_responder(SEED_DECISIONS),
                      decisions=SEED_DECISIONS, seed=3, wall_clock_ns=lambda: ORIGIN)
    code, out, err = _cli(["export", str(path), "--otlp-protocol", "http/protobuf", "--otlp", receiver.url])
    assert code == 0, err
    # The whole shift's tree, as a replay of it would give (issue 9), not just the calls.
    assert out == f"exported 17 spans (5 model calls) from {path}\n"
    assert err == "telemetry: 17 spans exported, 0 dropped\n"
    assert len(receiver.spans()) == 17


def test_cafe_export_to_a_dead_collector_fails_in_one_line(tmp_path):
    path = tmp_path / "shift.jsonl"
    counter.record_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, path,
                         responder=counter.make_responder(SEED_DECISIONS))
    code, _, err = _cli(["export", str(path), "--otlp-protocol", "http/protobuf", "--timeout", "1",
                         "--otlp", f"http://127.0.0.1:{closed_port()}"], {"OTEL_EXPORTER_OTLP_TIMEOUT": "300"})
    assert code == TelemetryExportFailed.exit_code
    # One line: the error carries the telemetry report.
    assert err.count("\n") == 1
    assert err.startswith("cafe: error: 17 of 17 spans were not exported (telemetry: 0 spans exported, 17 dropped")
    assert "Traceback" not in err


def test_cafe_export_errors_are_one_line(tmp_path):
    code, _, err = _cli(["export", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "x.otlp")])
    assert code == RecordingNotFound.exit_code and err.count("\n") == 1 and err.startswith("cafe: error: ")
    path = tmp_path / "shift.jsonl"
    counter.record_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, path,
                         responder=counter.make_responder(SEED_DECISIONS))
    code, _, err = _cli(["export", str(path)])
    assert code == 2
    assert err == "cafe: error: cafe export needs --otlp=ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT or --out FILE\n"
    code, _, err = _cli(["export", str(path), "--otlp"], {"OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"})
    assert code == 20 and "carrier-pigeon" in err and err.count("\n") == 1


# --- what the report says is what happened -----------------------------------------------------

RECEIVER_SECRET = "sk-proj-RECEIVERTEXTabcdef123456"


def _answering(status: int, *, reason: str = "", location: str = "", delay: float = 0.0):
    from tests.local_http import QuietHandler

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            self.read_body()
            if delay:
                time.sleep(delay)
            self.send_response(status, reason or None)
            if location:
                self.send_header("Location", location)
            body = RECEIVER_SECRET.encode() if status >= 400 else b""
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def _recorded(tmp_path) -> str:
    path = tmp_path / "shift.jsonl"
    counter.record_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, path,
                         responder=counter.make_responder(SEED_DECISIONS))
    return str(path)


def test_the_report_names_a_receivers_failure_by_its_kind_never_its_text(tmp_path):
    from tests.local_http import serving

    with serving(_answering(500, reason=f"boom {RECEIVER_SECRET}")) as port:
        code, out, err = _cli(["export", _recorded(tmp_path), "--otlp-protocol", "http/protobuf",
                               "--otlp", f"http://127.0.0.1:{port}"])
    assert code == TelemetryExportFailed.exit_code
    assert RECEIVER_SECRET not in out + err and "boom" not in err
    assert "(exporter: HTTP 500)" in err and err.count("\n") == 1


@pytest.mark.parametrize("endpoint", [
    "http://127.0.0.1:{port}/" + RECEIVER_SECRET + "/v1/traces",  # a receiver that takes its key in the path
    "http://127.0.0.1:{port}/v1/deploy_" + RECEIVER_SECRET,
])
def test_the_report_never_shows_a_key_in_the_endpoints_path(tmp_path, endpoint):
    from cafe.urls import shown_url
    from tests.local_http import serving

    with serving(_answering(500)) as port:
        url = endpoint.format(port=port)
        code, out, err = _cli(["export", _recorded(tmp_path), "--otlp-protocol", "http/protobuf", "--otlp", url])
    assert code == TelemetryExportFailed.exit_code
    assert RECEIVER_SECRET[8:] not in out + err and "[REDACTED]" in err and err.count("\n") == 1
    host = shown_url(f"https://{RECEIVER_SECRET}.ingest.example:4318/v1/traces")
    assert RECEIVER_SECRET[8:].lower() not in host.lower() and host.endswith(".ingest.example:4318/v1/traces")


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_not_delivered(tmp_path, status):
    from tests.local_http import serving

    with serving(_answering(status, location="https://127.0.0.1:1/v1/traces")) as port:
        code, _out, err = _cli(["export", _recorded(tmp_path), "--otlp-protocol", "http/protobuf",
                                "--otlp", f"http://127.0.0.1:{port}"])
    assert code == TelemetryExportFailed.exit_code, err
    assert "telemetry: 0 spans exported, 17 dropped" in err
    assert f"the receiver answered {status}, not 2xx" in err


def test_a_redirect_is_counted_under_its_status_in_the_self_observability_points():
    from cafe_otel import configure
    from tests.local_http import serving

    with serving(_answering(308, location="https://127.0.0.1:1/")) as port:
        handle = configure(endpoint=f"http://127.0.0.1:{port}", protocol="http/protobuf", environ={}, metrics=False,
                           batch=BatchOptions(shutdown_timeout=5.0))
        counter.run_shift(counter.ScriptedClient(), list(counter.DEFAULT_SCRIPT), counter.make_responder([]),
                       tracer=handle.tracer())
        handle.shutdown()
    points = {(p.name, p.error_type): p.value for p in handle.account.points()}
    assert points[("otel.sdk.exporter.span.exported", "308")] == 14  # the shift rejected: no ticket
    assert points[("otel.sdk.exporter.span.exported", None)] == 0


def test_cafe_export_waits_for_its_export_within_the_export_timeout_not_the_exit_bound(tmp_path):
    from tests.local_http import serving

    # The receiver answers after 1.5 s: past the 0.5 s exit bound, well within the 10 s export timeout.
    with serving(_answering(200, delay=1.5)) as port:
        code, _out, err = _cli(["export", _recorded(tmp_path), "--otlp-protocol", "http/protobuf",
                               "--otlp", f"http://127.0.0.1:{port}"], {"OTEL_EXPORTER_OTLP_TIMEOUT": "10000"})
    assert code == 0, err
    assert err == "telemetry: 17 spans exported, 0 dropped\n"


def test_an_export_still_in_flight_at_the_bound_is_unconfirmed_never_dropped(tmp_path):
    from tests.local_http import serving

    release = threading.Event()

    class Slow(_answering(200)):  # type: ignore[misc]
        def do_POST(self) -> None:
            release.wait(10)
            super().do_POST()

    with serving(Slow) as port:
        try:
            code, _out, err = _cli(["export", _recorded(tmp_path), "--otlp-protocol", "http/protobuf",
                                    "--timeout", "0.2", "--otlp", f"http://127.0.0.1:{port}"])
        finally:
            release.set()
    assert code == TelemetryExportFailed.exit_code
    assert "17 of 17 spans were not confirmed delivered (17 unconfirmed" in err
    assert "0 spans exported, 0 dropped, 17 unconfirmed" in err


def test_an_export_its_receiver_took_and_never_answered_in_time_is_unconfirmed(tmp_path):
    from tests.local_http import serving

    release = threading.Event()
    received = threading.Event()

    class Holding(_answering(200)):  # type: ignore[misc]
        def do_POST(self) -> None:
            self.read_body()  # the whole request: a receiver may store it now
            received.set()
            release.wait(10)

    # The exporter's own timeout ends the export (FAILURE, after a ReadTimeout), well within
    # the command's wait: what the receiver did with the spans is still unknown.
    with serving(Holding) as port:
        try:
            code, _out, err = _cli(["export", _recorded(tmp_path), "--otlp-protocol", "http/protobuf",
                                    "--timeout", "5", "--otlp", f"http://127.0.0.1:{port}"],
                                   {"OTEL_EXPORTER_OTLP_TIMEOUT": "300"})
        finally:
            release.set()
    assert received.is_set()
    assert code == TelemetryExportFailed.exit_code
    assert "17 of 17 spans were not confirmed delivered (17 unconfirmed" in err, err
    assert "0 spans exported, 0 dropped, 17 unconfirmed" in err and "(ReadTimeout)" in err


def test_replay_show_with_otlp_draws_and_exports_the_recorded_timings(receiver, tmp_path):
    from cafe.recording import load_recording
    from cafe.trace.render import format_seconds

    path = _recorded(tmp_path)
    recording = load_recording(path)
    code, out, err = _cli(["replay", path, "--show", "--otlp-protocol", "http/protobuf", "--otlp", receiver.url])
    assert code == 0, err
    drawn = [line.split("[generation]")[1].split()[0] for line in out.splitlines() if "[generation]" in line]
    assert drawn == [format_seconds(call.timing.duration_ns / 1e9) for call in recording.calls]
    chats = sorted((span for span in receiver.spans() if span.name.startswith("chat ")),
                   key=lambda span: span.start_time_unix_nano)
    assert [(span.start_time_unix_nano, span.end_time_unix_nano - span.start_time_unix_nano) for span in chats] == [
        (call.timing.start_unix_nano, call.timing.duration_ns) for call in recording.calls]


def test_no_trace_link_when_no_span_was_delivered(tmp_path):
    from tests.local_http import serving

    with serving(_answering(503)) as port:
        code, out, err = _cli(["replay", _recorded(tmp_path), "--show", "--otlp-protocol", "http/protobuf",
                               "--otlp", f"http://127.0.0.1:{port}"],
                              {"OTEL_EXPORTER_OTLP_TIMEOUT": "300", "CAFE_JAEGER_URL": "http://127.0.0.1:16686"})
    assert code == 0, err
    assert "0 spans exported" in err
    assert "trace:" not in out


def test_a_trace_link_when_spans_were_delivered(receiver, tmp_path):
    code, out, err = _cli(["replay", _recorded(tmp_path), "--otlp-protocol", "http/protobuf", "--otlp", receiver.url])
    assert code == 0, err
    assert [line for line in out.splitlines() if line.startswith("trace: ")] != []


def test_cafe_replay_with_otlp_reads_its_recording_once(receiver, tmp_path, monkeypatch):
    import cafe.counter.cli
    import cafe.recording.reader
    import cafe_otel._cli.plugin

    path = _recorded(tmp_path)
    loads: list[object] = []
    real = cafe.recording.reader.load_recording

    def counting(*args, **kwargs):
        loads.append(args[0] if args else kwargs.get("path"))
        return real(*args, **kwargs)

    for module in (counter.cli, cafe.recording.reader, cafe_otel._cli.plugin):
        monkeypatch.setattr(module, "load_recording", counting)
    code, _out, err = _cli(["replay", path, "--otlp-protocol", "http/protobuf", "--otlp", receiver.url])
    assert code == 0, err
    assert len(loads) == 1


@pytest.mark.parametrize("argv", [
    ["replay", "--otlp", "{path}"],
    ["replay", "--otlp", "--otlp-protocol", "http/protobuf", "{path}"],
    ["replay", "{path}", "--otlp"],
    ["replay", "--otlp", "{url}", "{path}"],
    ["replay", "--otlp={url}", "{path}"],
    ["replay", "{path}", "--otlp", "{url}"],
])
def test_a_bare_otlp_never_swallows_the_recording_path(receiver, tmp_path, argv):
    path = tmp_path / "shift.jsonl"
    counter.record_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, path,
                         responder=counter.make_responder(SEED_DECISIONS),
                      decisions=SEED_DECISIONS, seed=3)
    filled = [word.format(path=path, url=receiver.url) for word in argv]
    # Without a URL after the flag, the endpoint comes from the environment, as --help says.
    code, out, err = _cli(filled, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
                                   "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
    assert code == 0, err
    assert f"replayed 5 call(s) from {path}" in out
    assert "telemetry: 17 spans exported, 0 dropped" in err and receiver.spans()


@pytest.mark.parametrize("argv", [
    ["replay", "--otlp", "{endpoint}", "{path}"],
    ["replay", "{path}", "--otlp", "{endpoint}"],
    ["export", "--otlp", "{endpoint}", "{path}"],
])
def test_an_endpoint_without_its_scheme_after_a_bare_otlp_is_the_endpoint(receiver, tmp_path, argv):
    path = tmp_path / "shift.jsonl"
    counter.record_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, path,
                         responder=counter.make_responder(SEED_DECISIONS),
                      decisions=SEED_DECISIONS, seed=3)
    endpoint = receiver.url.removeprefix("http://")  # 127.0.0.1:PORT, as --otlp=127.0.0.1:PORT takes it
    filled = [word.format(path=path, endpoint=endpoint) for word in argv]
    code, _out, err = _cli(filled, {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{closed_port()}",
                                    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
    assert code == 0, err
    assert len(receiver.spans()) == 17  # sent to the word after --otlp, not to the environment's


def test_a_bare_otlp_on_export_takes_the_endpoint_from_the_environment(receiver, tmp_path):
    path = tmp_path / "shift.jsonl"
    counter.record_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, path,
                         responder=counter.make_responder(SEED_DECISIONS),
                      decisions=SEED_DECISIONS, seed=3)
    code, out, err = _cli(["export", "--otlp", str(path)], {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
                                                             "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
    assert code == 0, err
    assert f"exported 17 spans (5 model calls) from {path}" in out
