"""Out-of-range telemetry settings are configuration errors (exit 20) that name the
variable and what it accepts, never a dead worker thread or an internal error (70)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cafe.cli import main
from cafe_otel import BatchOptions, TelemetryConfigError, configure, resolve_settings
from cafe_otel._config.settings import resolve_batch_settings

from .conftest import closed_port

BAD_MILLIS = ["inf", "-inf", "1e13", "nan", "NaN", "0", "-5", "3600001", "10s", "0x10"]


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"])
@pytest.mark.parametrize("value", BAD_MILLIS)
def test_an_export_timeout_out_of_range_names_its_variable_and_range(variable, value):
    with pytest.raises(TelemetryConfigError) as caught:
        resolve_settings(environ={variable: value})
    assert str(caught.value).startswith(f"{variable}: ")
    assert "(0, 3600000]" in str(caught.value)


@pytest.mark.parametrize("value", ["1", "2500", "3600000", " 700 ", "0.5"])
def test_an_export_timeout_in_range_is_taken_in_milliseconds(value):
    assert resolve_settings(environ={"OTEL_EXPORTER_OTLP_TIMEOUT": value}).export_timeout == float(value) / 1000


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 0, -1.0, 1e13, 3600.5, True, "5"])
def test_an_explicit_export_timeout_out_of_range_is_refused(value):
    with pytest.raises(TelemetryConfigError, match=r"export_timeout argument: .*\(0, 3600\]"):
        resolve_settings(export_timeout=value, environ={})


@pytest.mark.parametrize(("variable", "value", "accepted"), [
    ("OTEL_BSP_MAX_QUEUE_SIZE", "0", "1 to 1000000"),
    ("OTEL_BSP_MAX_QUEUE_SIZE", "-3", "1 to 1000000"),
    ("OTEL_BSP_MAX_QUEUE_SIZE", "1e3", "1 to 1000000"),
    ("OTEL_BSP_MAX_QUEUE_SIZE", "99999999999999999999", "1 to 1000000"),
    ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "0", "1 to 2048"),
    ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4096", "1 to 2048 (at most the queue size)"),
    ("OTEL_BSP_SCHEDULE_DELAY", "inf", "(0, 3600000]"),
    ("OTEL_BSP_SCHEDULE_DELAY", "nan", "(0, 3600000]"),
    ("OTEL_BSP_SCHEDULE_DELAY", "0", "(0, 3600000]"),
])
def test_batch_variables_out_of_range_name_their_variable_and_range(variable, value, accepted):
    with pytest.raises(TelemetryConfigError) as caught:
        resolve_batch_settings(shutdown_timeout=0.5, environ={variable: value})
    assert str(caught.value).startswith(f"{variable}: ") and accepted in str(caught.value)


def test_a_batch_larger_than_its_queue_is_refused_whichever_way_it_is_given():
    with pytest.raises(TelemetryConfigError, match=r"OTEL_BSP_MAX_EXPORT_BATCH_SIZE: expected .* 1 to 3"):
        resolve_batch_settings(shutdown_timeout=0.5, environ={"OTEL_BSP_MAX_QUEUE_SIZE": "3",
                                                              "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "5"})
    with pytest.raises(TelemetryConfigError, match="max_export_batch_size argument"):
        resolve_batch_settings(max_queue_size=8, max_export_batch_size=9, shutdown_timeout=0.5, environ={})
    # A small queue without a batch size gets a batch that fits it.
    assert resolve_batch_settings(shutdown_timeout=0.5, environ={"OTEL_BSP_MAX_QUEUE_SIZE": "3"}
                                  ).max_export_batch_size == 3


@pytest.mark.parametrize(("argument", "value"), [
    ("max_queue_size", 0), ("max_queue_size", True), ("max_queue_size", 2.5),
    ("max_export_batch_size", -1), ("schedule_delay", float("inf")), ("schedule_delay", 0),
    ("shutdown_timeout", float("nan")), ("shutdown_timeout", -1), ("export_timeout", float("inf")),
])
def test_configure_refuses_explicit_arguments_out_of_range(argument, value):
    with pytest.raises(TelemetryConfigError, match=rf"^BatchOptions\.{argument}: "):
        configure(exporter=InMemorySpanExporter(), environ={}, batch=BatchOptions(**{argument: value}))


@pytest.mark.parametrize("value", ["1", "yes", "disabled", "on"])
def test_sdk_disabled_accepts_true_or_false_only(value):
    with pytest.raises(TelemetryConfigError, match=r"OTEL_SDK_DISABLED: .* is not true or false"):
        resolve_settings(environ={"OTEL_SDK_DISABLED": value})


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"])
@pytest.mark.parametrize(("url", "problem"), [
    ("http://127.0.0.1:99999", "port"), ("http://[::1", "IPv6"), ("http://host:port", "port"),
    ("ftp://x", "scheme 'ftp'"), ("http://:4317", "no host"), ("http://127.0.0.1:0", "port 0"),
    ("http://exa mple:4317", "space"),
])
def test_a_bad_endpoint_names_its_variable(variable, url, problem):
    with pytest.raises(TelemetryConfigError) as caught:
        resolve_settings(environ={variable: url})
    assert str(caught.value).startswith(f"{variable}: ") and problem in str(caught.value)


def test_a_bad_explicit_endpoint_names_the_option():
    with pytest.raises(TelemetryConfigError, match=r"endpoint argument \(--otlp\): .*port"):
        resolve_settings(endpoint="http://127.0.0.1:99999", environ={})


def test_a_bad_endpoint_error_does_not_echo_credentials():
    secret = "sk-canary-in-the-url-77"
    with pytest.raises(TelemetryConfigError) as caught:
        resolve_settings(environ={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://u:{secret}@127.0.0.1:99999"})
    assert secret not in str(caught.value)


def _cli(argv, environ):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, environ=environ, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_the_issue_11_timeouts_are_exit_20_through_the_cli():
    port = closed_port()
    for value in ("inf", "1e13", "nan"):
        code, _out, err = _cli(["shift", "--seed", "1", f"--otlp=http://127.0.0.1:{port}"],
                               {"OTEL_EXPORTER_OTLP_TIMEOUT": value})
        assert code == 20
        assert err == ("cafe: error: OTEL_EXPORTER_OTLP_TIMEOUT: expected a number of milliseconds "
                       "in (0, 3600000], in ASCII digits (the value given is not shown)\n")


def test_export_to_a_file_with_the_sdk_disabled_says_so_instead_of_failing(tmp_path):
    target = tmp_path / "out.otlp"
    code, out, err = _cli(["export", RECORDING, "--out", str(target)], {"OTEL_SDK_DISABLED": "true"})
    assert (code, err) == (0, "")  # was exit 70: an internal error
    assert out == "telemetry disabled (OTEL_SDK_DISABLED=true): nothing written\n"
    assert not target.exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "3601"])
def test_export_timeout_option_out_of_range_is_a_usage_error(value):
    code, _out, err = _cli(["export", RECORDING, "--otlp=http://127.0.0.1:9", "--timeout", value], {})
    assert code == 2
    assert "argument --timeout: expected a number of seconds in [0, 3600]" in err and err.count("\n") == 1


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0])
def test_the_handles_flush_and_shutdown_bounds_are_checked(value):
    handle = configure(exporter=InMemorySpanExporter(), environ={})
    with pytest.raises(TelemetryConfigError, match="force_flush timeout"):
        handle.force_flush(value)
    with pytest.raises(TelemetryConfigError, match="shutdown timeout"):
        handle.shutdown(value)
    assert handle.shutdown(1.0) >= 0.0  # still open: the refused call did nothing


def _endpoints(port: int) -> st.SearchStrategy[str]:
    # Built from parts, loopback only: a drawn host never sends anything off this machine.
    scheme = st.sampled_from(["http://", "https://", "ftp://", "", "HTTP://"])
    host = st.sampled_from(["127.0.0.1", "[::1]", "[::1", "::1", "", "127.0.0.1]"])
    tail = st.sampled_from([f":{port}", "", ":0", ":99999", ":port", ":-1", ":65536", f":{port}/v1/traces"])
    return st.builds(lambda a, b, c: a + b + c, scheme, host, tail)


MILLIS = st.sampled_from(["", "1", "50", "2500", "3600000", "3600001", "0", "-1", "1e13", "inf", "nan",
                          "10s", " 60 "]) | st.text(max_size=6)
SIZES = st.sampled_from(["", "1", "2", "512", "2048", "0", "-1", "1e3", "99999999999"]) | st.text(max_size=4)
BOOLEANS = st.sampled_from(["", "true", "false", "TRUE", " False ", "1", "yes"]) | st.text(max_size=4)
PORT = closed_port()


RECORDING = str(Path(__file__).parents[1] / "recordings" / "seed-shift.jsonl")


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(["shift", "export"]), environ=st.fixed_dictionaries({}, optional={
    "OTEL_EXPORTER_OTLP_ENDPOINT": _endpoints(PORT),
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": _endpoints(PORT),
    "OTEL_EXPORTER_OTLP_TIMEOUT": MILLIS,
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": MILLIS,
    "OTEL_EXPORTER_OTLP_PROTOCOL": st.sampled_from(["grpc", "http/protobuf", "http/json", "", "GRPC"]),
    "OTEL_EXPORTER_OTLP_HEADERS": st.text(max_size=12),
    "OTEL_EXPORTER_OTLP_COMPRESSION": st.sampled_from(["gzip", "none", "zstd", ""]),
    "OTEL_RESOURCE_ATTRIBUTES": st.text(max_size=12),
    "OTEL_SERVICE_NAME": st.text(max_size=8),
    "OTEL_BSP_MAX_QUEUE_SIZE": SIZES,
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": SIZES,
    "OTEL_BSP_SCHEDULE_DELAY": MILLIS,
    "OTEL_SDK_DISABLED": BOOLEANS,
    # Read by the SDK itself (a bare ValueError there, or a warning of its own on stderr):
    "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": SIZES,
    "OTEL_SPAN_EVENT_COUNT_LIMIT": SIZES,
    "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": st.sampled_from(["delta", "CUMULATIVE", "x", ""]),
    "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION": st.sampled_from(
        ["explicit_bucket_histogram", "base2_exponential_bucket_histogram", "x", ""]),
}))
def test_any_otel_settings_end_in_one_stderr_line_and_a_documented_exit_code(tmp_path, command, environ):
    # `export --out` resolves every setting too, and sends nothing: a fast path to the checks.
    argv = (["shift", "--seed", "1", "--otlp"] if command == "shift"
            else ["export", RECORDING, "--out", str(tmp_path / "out.otlp")])
    code, _out, err = _cli(argv, environ)
    event(f"{command} exit {code}")
    # 48: `cafe export` lost spans (a queue of 1 from OTEL_BSP_MAX_QUEUE_SIZE does that).
    assert code in ((0, 20) if command == "shift" else (0, 20, 48)), (code, err)
    assert err.count("\n") <= 1 and (err == "" or err.endswith("\n")), err
    assert "Traceback" not in err
    if code == 20:
        assert err.startswith("cafe: error: "), err
        assert "OTEL_" in err or "argument" in err, err
    elif code == 48:
        assert err.startswith("cafe: error: ") and "dropped" in err, err
    else:
        assert err == "" or err.startswith("telemetry: "), err
