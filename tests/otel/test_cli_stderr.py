"""The real `cafe` command in a subprocess: stderr carries our one line and no secret, with
a dead collector, a token in the endpoint's query string, uppercase header keys, odd live
replies and an endpoint that echoes the API key."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cafe import counter
from cafe.cli import main
from cafe.counter.cli import plugin as COUNTER
from cafe_otel._cli.logs import ExporterLogCapture, redactor
from cafe_otel._cli.plugin import plugin
from cafe_otel._config.settings import TelemetryConfigError, resolve_settings

from .conftest import closed_port
from .echo_server import echo_server, planted_reply
from .metadata_examples import MARK

ROOT = Path(__file__).resolve().parents[2]
TOKEN, HEADER_SECRET = "tok3nSECRETq", "hdrSECRETv4lue"
KEY = "live-echo-5e4d3c2b1a0f9e8d"
SECRETS = (TOKEN, HEADER_SECRET, KEY, MARK)


def _cafe(*argv: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "cafe"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "cafe.cli"]
    environ = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "HOME": os.environ.get("HOME", "/tmp"),
               **env}
    return subprocess.run([*command, *argv], env=environ, capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, check=False)


def _assert_one_clean_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    for secret in SECRETS:
        assert secret not in result.stderr, result.stderr
    return lines[0]


HEADERS = {"OTEL_EXPORTER_OTLP_HEADERS": f"X-Api-Token={HEADER_SECRET},Authorization=Bearer%20{HEADER_SECRET}"}


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_a_dead_collector_with_a_token_and_uppercase_headers_is_one_clean_line(protocol):
    endpoint = f"http://127.0.0.1:{closed_port()}/v1/traces?token={TOKEN}"
    result = _cafe("shift", "--seed", "1", "--otlp-protocol", protocol, f"--otlp={endpoint}",
                   env={**HEADERS, "OTEL_EXPORTER_OTLP_TIMEOUT": "2000"})
    assert result.returncode == 0, result.stderr
    line = _assert_one_clean_line(result)
    # Waiting to retry a dead collector when the exit bound ran out: nothing reached it, nothing more will.
    assert line.startswith("telemetry: 0 spans exported, 17 dropped (17 export failed)")
    assert "Illegal header" not in result.stderr and "Invalid metadata" not in line


def test_a_schemeless_endpoint_with_a_token_is_one_clean_configuration_error():
    # Without a scheme the gRPC exporter would take it as is, query string and all, and log
    # "Failed to export traces to 127.0.0.1:PORT?token=...": it is refused before that.
    port = closed_port()
    result = _cafe("shift", "--seed", "1", env={
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"127.0.0.1:{port}?token={TOKEN}", "OTEL_EXPORTER_OTLP_TIMEOUT": "300"})
    assert result.returncode == 20, result.stderr
    line = _assert_one_clean_line(result)
    assert line.startswith("cafe: error: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: ")


def test_a_live_shift_with_odd_replies_and_an_echoed_key_prints_one_clean_line():
    reply = planted_reply(response_id=f"chatcmpl {MARK}!", model=f"gpt {MARK}!", finish_reason=f"{MARK} stop!",
                          call_id=f"call {MARK} {{n}}!", tool_name=f"lookup {MARK}!",
                          text="Your key is {authorization}, as you asked.")
    # Wrong types: the SDK's pydantic models warn about them (quoting the value) when dumped.
    odd = {"created": f"yesterday {MARK}", "system_fingerprint": 12345}
    with echo_server(reply, odd=odd) as url:
        result = _cafe("shift", "--seed", "1", "--capture-content", "--otlp-protocol", "http/protobuf",
                       f"--otlp=http://127.0.0.1:{closed_port()}?token={TOKEN}",
                       env={**HEADERS, "COURSE_MODE": "live", "CAFE_BASE_URL": url, "CAFE_API_KEY": KEY,
                            "CAFE_MODEL": "gpt-4o-mini", "OTEL_EXPORTER_OTLP_TIMEOUT": "1000"})
    assert result.returncode == 0, result.stderr
    line = _assert_one_clean_line(result)
    assert line.startswith("telemetry: 0 spans exported")


def test_debug_shows_the_exporters_lines_redacted():
    endpoint = f"http://127.0.0.1:{closed_port()}/v1/traces?token={TOKEN}"
    result = _cafe("shift", "--seed", "1", "--otlp-protocol", "http/protobuf", f"--otlp={endpoint}",
                   env={**HEADERS, "OTEL_EXPORTER_OTLP_TIMEOUT": "2000", "CAFE_DEBUG": "1"})
    assert result.returncode == 0, result.stderr
    assert "cafe: debug: opentelemetry.exporter" in result.stderr
    for secret in SECRETS:
        assert secret not in result.stderr


PATH_KEY = "sk-proj-PATHKEYabcdefghijklmn"  # some receivers take their key in the path
DETAILS_KEY = "ghp_Ab3dEf6hIj9lMn2pQr5tUv"  # what a receiver's error details may echo


@contextmanager
def refusing_grpc_receiver(status: str = "UNKNOWN") -> Iterator[str]:
    """An OTLP/gRPC receiver on 127.0.0.1 that refuses every export with `status` and error
    details holding a key (UNKNOWN makes the SDK's exporter log the error's traceback too)."""
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    class Refusing:
        def Export(self, request: object, context: grpc.ServicerContext) -> None:
            context.abort(grpc.StatusCode[status], f"bad credentials: {DETAILS_KEY}")

    class Traces(Refusing, trace_service_pb2_grpc.TraceServiceServicer):
        pass

    class Metrics(Refusing, metrics_service_pb2_grpc.MetricsServiceServicer):
        pass

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop(0)


def _recorded(tmp_path: Path) -> str:

    path = tmp_path / "shift.jsonl"
    counter.record_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, path, responder=counter.make_responder([]))
    return str(path)


def test_debug_shows_no_key_of_the_endpoints_path(tmp_path):
    # `cafe export` waits for its export (--timeout): the exporter's retry line is sure to come.
    endpoint = f"http://127.0.0.1:{closed_port()}/{PATH_KEY}/v1/traces?token={TOKEN}"
    result = _cafe("export", _recorded(tmp_path), "--otlp-protocol", "http/protobuf", f"--otlp={endpoint}",
                   "--timeout", "3", env={"OTEL_EXPORTER_OTLP_TIMEOUT": "2000", "CAFE_DEBUG": "1"})
    assert result.returncode == 48, result.stderr
    assert "cafe: debug: opentelemetry.exporter" in result.stderr and "Transient error" in result.stderr
    assert "/[REDACTED]/v1/traces" in result.stderr
    assert PATH_KEY[8:] not in result.stderr and TOKEN not in result.stderr


@pytest.mark.parametrize("status", ["UNKNOWN", "PERMISSION_DENIED"])
def test_a_grpc_receivers_error_details_holding_a_key_never_reach_stderr(tmp_path, status):
    recording = _recorded(tmp_path)
    with refusing_grpc_receiver(status) as endpoint:
        for debug in ({}, {"CAFE_DEBUG": "1"}):
            result = _cafe("export", recording, "--otlp-protocol", "grpc", f"--otlp={endpoint}", "--timeout", "3",
                           env={"OTEL_EXPORTER_OTLP_TIMEOUT": "2000", **debug})
            assert result.returncode == 48, result.stderr
            assert DETAILS_KEY not in result.stderr, result.stderr
            if debug:
                # The exporter's own line was shown, redacted (for UNKNOWN with its traceback).
                assert f"error code: StatusCode.{status}, error details: bad credentials: [REDACTED]" in result.stderr
            else:
                assert result.stderr.count("\n") == 1 and result.stderr.startswith("cafe: error: 14 of 14 spans")


# --- in process ---------------------------------------------------------------------

def test_the_redactor_masks_every_credential_the_settings_hold():
    settings = resolve_settings(endpoint=f"http://user:pw-{TOKEN}@collector:4318/v1/traces?token={TOKEN}&x=1",
                                protocol="http/protobuf", headers={"x-api-token": HEADER_SECRET}, environ={})
    redact = redactor(settings)
    text = (f"export to {settings.endpoint} failed; url: /v1/traces?token={TOKEN} (header {HEADER_SECRET}); "
            f"target collector:4318?token={TOKEN}")
    clean = redact(text)
    assert TOKEN not in clean and HEADER_SECRET not in clean and "pw-" not in clean
    assert "http://collector:4318/v1/traces" in clean  # as our own error texts show it


def exporter_headers(headers: dict[str, str], protocol: str) -> dict[str, str]:
    """The headers the exporter is built with (`SignalConfig.headers`)."""
    return resolve_settings(headers=headers, protocol=protocol, environ={}).traces.headers


def test_header_keys_are_lowercased_and_a_bad_one_is_a_configuration_error():
    assert exporter_headers({"X-Api-Token": "v", "Authorization": "Bearer x"}, "grpc") == {
        "x-api-token": "v", "authorization": "Bearer x"}
    with pytest.raises(TelemetryConfigError) as caught:
        exporter_headers({"api token": HEADER_SECRET}, "grpc")
    assert caught.value.exit_code == 20 and HEADER_SECRET not in str(caught.value)
    with pytest.raises(TelemetryConfigError) as caught:
        exporter_headers({"x-token": f"{HEADER_SECRET}\n"}, "http/protobuf")
    assert HEADER_SECRET not in str(caught.value) and "x-token" in str(caught.value)


def test_a_header_no_exporter_can_send_is_exit_20_in_one_line():
    out, err = io.StringIO(), io.StringIO()
    code = main(["shift", "--seed", "1", f"--otlp=http://127.0.0.1:{closed_port()}"],
                environ={"OTEL_EXPORTER_OTLP_HEADERS": f"bad key={HEADER_SECRET}"}, out=out, err=err,
                load_plugins=lambda warn: [COUNTER, plugin])
    assert code == 20
    assert err.getvalue().count("\n") == 1 and err.getvalue().startswith("cafe: error: OTLP header 1")
    assert HEADER_SECRET not in err.getvalue()


def test_after_the_command_a_null_handler_keeps_late_lines_off_the_last_resort_stderr():
    with ExporterLogCapture():
        assert logging.getLogger("opentelemetry").propagate is False
    for name in ("opentelemetry", "grpc"):
        logger = logging.getLogger(name)
        assert logger.propagate is True
        assert any(isinstance(h, logging.NullHandler) for h in logger.handlers)
        assert not any(isinstance(h, ExporterLogCapture) for h in logger.handlers)


def test_the_subprocess_runs_this_worktree_with_the_plugin_loaded():
    result = _cafe("export", "--help", env={})  # `export` exists only when the otel plugin loaded
    assert result.returncode == 0 and "--otlp" in result.stdout
