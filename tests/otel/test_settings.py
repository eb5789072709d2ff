"""Telemetry settings as configure() and the cafe command read them: the OTEL_* variables,
their bounds, TLS files per signal, the sampler, and an environment that is hostile."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
import pytest
import requests
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.grpc import exporter as sdk_grpc_exporter
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, TraceIdRatioBased

from cafe.cli import main
from cafe.counter.cli import plugin as COUNTER
from cafe.errors import ConfigurationError
from cafe_otel import AdvancedOptions, BatchOptions, MetricsOptions, TelemetryConfigError, configure, resolve_settings
from cafe_otel._cli.plugin import plugin
from cafe_otel._config.environment import LIMIT_VARIABLES
from cafe_otel._config.sampling import SAMPLERS, sampler_from
from cafe_otel._config.settings import resolve_batch_settings

from .conftest import closed_port
from .shift import seed_shift

# Bounds: an out-of-range setting is a configuration error (exit 20) naming the variable.

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
    # What the exporter would fail every export on, said once: no DNS name, no IP address.
    ("http://-1", "neither a DNS name nor an IP address"),
    ("http://" + "9" * 40, "neither a DNS name nor an IP address"),
    ("http://1.2.3.999:4317", "neither a DNS name nor an IP address"),
    ("http://ünïcødé☕:4317", "not ASCII"), ("http://bad-.example", "neither a DNS name nor an IP address"),
])
def test_a_bad_endpoint_names_its_variable(variable, url, problem):
    with pytest.raises(TelemetryConfigError) as caught:
        resolve_settings(environ={variable: url})
    assert str(caught.value).startswith(f"{variable}: ") and problem in str(caught.value)


@pytest.mark.parametrize("url", ["http://localhost:4318", "http://otel_collector:4317", "https://ingest.example.com.",
                                 "http://[::1]:4317", "http://10.0.0.7", "http://xn--caf-dma.example"])
def test_an_endpoint_of_any_host_a_collector_is_found_at_is_taken(url):
    assert resolve_settings(environ={"OTEL_EXPORTER_OTLP_ENDPOINT": url}).endpoint == url


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
    code, out, err = _cli(["export", SEED_RECORDING_ARG, "--out", str(target)], {"OTEL_SDK_DISABLED": "true"})
    assert (code, err) == (0, "")  # was exit 70: an internal error
    assert out == "telemetry disabled (OTEL_SDK_DISABLED=true): nothing written\n"
    assert not target.exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "3601"])
def test_export_timeout_option_out_of_range_is_a_usage_error(value):
    code, _out, err = _cli(["export", SEED_RECORDING_ARG, "--otlp=http://127.0.0.1:9", "--timeout", value], {})
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


SEED_RECORDING_ARG = str(Path(__file__).parents[1] / "recordings" / "seed-shift.jsonl")


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
            else ["export", SEED_RECORDING_ARG, "--out", str(tmp_path / "out.otlp")])
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


# A hostile environment: the variables the SDK reads itself, given garbage, are named errors.

ROOT = Path(__file__).resolve().parents[2]
RECORDING = ROOT / "tests" / "recordings" / "seed-shift.jsonl"


@pytest.mark.parametrize("variable", sorted(LIMIT_VARIABLES))
@pytest.mark.parametrize("value", ["-3", "abc", "", "1e3", "99999999999"])
def test_a_bad_span_limit_is_a_configuration_error_naming_it(variable: str, value: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        configure("svc", exporter=InMemorySpanExporter(), environ={variable: value}, metrics=False)
    assert str(raised.value).startswith(f"{variable}: ") and raised.value.exit_code == 20


def test_span_limits_are_read_from_the_mapping_configure_is_given() -> None:
    handle = configure("svc", exporter=InMemorySpanExporter(), metrics=False,
                       environ={"OTEL_SPAN_EVENT_COUNT_LIMIT": "1", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "unset",
                                "OTEL_ATTRIBUTE_COUNT_LIMIT": " 7 "})
    try:
        limits = handle.provider._span_limits  # type: ignore[union-attr]
        assert (limits.max_events, limits.max_attribute_length, limits.max_span_attributes) == (1, None, 7)
        assert limits.max_links == 128
    finally:
        handle.shutdown()


def test_a_bad_span_limit_through_the_cli_is_exit_20_not_70() -> None:
    code, _, err = _cli(["shift", "--seed", "1", f"--otlp=http://127.0.0.1:{closed_port()}"],
                        {"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "-3"})
    assert code == 20, err
    assert err == ("cafe: error: OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: expected a whole number from 0 "
                   "to 2147483647 in ASCII digits, or unset (the value given is not shown)\n")


def test_a_limit_the_sdk_reads_on_import_stops_the_command_with_its_name(tmp_path: Path) -> None:
    # The plugin must not "not load (ValueError)", leaving --otlp an unrecognised argument.
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "abc"}
    environ.pop("CAFE_DEBUG", None)
    done = subprocess.run([sys.executable, "-m", "cafe", "shift", "--seed", "1", "--otlp=http://127.0.0.1:9"],
                          capture_output=True, text=True, env=environ, timeout=60, check=False, cwd=tmp_path)
    assert done.returncode == 20, done.stderr
    assert done.stderr == ("cafe: error: OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT: expected a whole number "
                           "from 0 to 2147483647 in ASCII digits, or unset (the value given is not shown)\n")


@pytest.mark.parametrize(("variable", "value", "shown", "accepted"), [
    ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "sometimes", "sometimes", "cumulative, delta or lowmemory"),
    # A value spelt like a key (a secret pasted into the wrong variable) is never echoed.
    ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "sk-not-a-temporality", "[REDACTED]",
     "cumulative, delta or lowmemory"),
    ("OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION", "exponential", "exponential",
     "explicit_bucket_histogram or base2_exponential_bucket_histogram"),
])
def test_a_metrics_choice_the_sdk_would_only_warn_about_is_exit_20(
    variable: str, value: str, shown: str, accepted: str, capfd: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(["shift", "--seed", "1", f"--otlp=http://127.0.0.1:{closed_port()}"], {variable: value})
    assert code == 20 and err == f"cafe: error: {variable}: {shown!r} is not {accepted}\n"
    assert capfd.readouterr().err == ""  # no warning of the SDK's own on the real stderr


@pytest.mark.parametrize(("variable", "value"), [
    ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", " Delta "),
    ("OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION", "base2_exponential_bucket_histogram"),
    ("OTEL_SPAN_LINK_COUNT_LIMIT", "unset"),
])
def test_the_values_the_sdk_accepts_still_run_the_shift(variable: str, value: str) -> None:
    code, _, err = _cli(["shift", "--seed", "1", f"--otlp=http://127.0.0.1:{closed_port()}"], {variable: value})
    assert code == 0 and err.startswith("telemetry: "), err


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
                                      "OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE"])
@pytest.mark.parametrize("kind", ["missing", "directory", "fifo"])
def test_a_tls_file_that_is_not_a_readable_file_is_exit_20(
    tmp_path: Path, variable: str, kind: str, capfd: pytest.CaptureFixture[str]
) -> None:
    # gRPC's exporter reads these when it is built: a missing one printed the SDK's
    # traceback, a directory was exit 70, a FIFO would block.
    path = tmp_path / "ca.pem"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    code, _, err = _cli(["shift", "--seed", "1", f"--otlp=https://127.0.0.1:{closed_port()}"],
                        {variable: str(path)})
    assert code == 20 and err.count("\n") == 1 and err.startswith(f"cafe: error: {variable}: "), err
    assert capfd.readouterr().err == ""


def test_a_readable_tls_file_is_accepted(tmp_path: Path) -> None:
    pem = tmp_path / "ca.pem"
    pem.write_text("not really a certificate\n")
    code, _, err = _cli(["shift", "--seed", "1", f"--otlp=http://127.0.0.1:{closed_port()}"],
                        {"OTEL_EXPORTER_OTLP_CERTIFICATE": str(pem)})
    assert code == 0 and err.startswith("telemetry: "), err


@pytest.mark.parametrize(("variable", "value"), [
    ("OTEL_TRACES_EXPORTER", "none"), ("OTEL_TRACES_EXPORTER", "zipkin"),
])
def test_a_span_exporter_cafe_does_not_offer_is_reported_not_ignored(variable: str, value: str) -> None:
    # Before, the shift exported every span over OTLP whatever these said.
    code, out, err = _cli(["shift", "--seed", "1", f"--otlp=http://127.0.0.1:{closed_port()}"], {variable: value})
    assert code == 20 and out == "" and err.startswith(f"cafe: error: {variable}: {value!r} is not offered ("), err


@pytest.mark.parametrize(("variable", "value"), [
    ("OTEL_TRACES_SAMPLER", "parentbased_always_on"), ("OTEL_TRACES_SAMPLER", " ALWAYS_ON "),
    ("OTEL_TRACES_EXPORTER", "otlp"), ("OTEL_TRACES_EXPORTER", ""),
])
def test_the_choices_cafe_makes_may_be_spelt_out(variable: str, value: str) -> None:
    code, _, err = _cli(["shift", "--seed", "1", f"--otlp=http://127.0.0.1:{closed_port()}"], {variable: value})
    assert code == 0 and err.startswith("telemetry: "), err


_SPY = """
import os, sys
class Spy(dict):
    read = []
    def __getitem__(self, key):
        Spy.read.append(key); return dict.__getitem__(self, key)
    def get(self, key, default=None):
        Spy.read.append(key); return dict.get(self, key, default)
    def __contains__(self, key):
        Spy.read.append(key); return dict.__contains__(self, key)
os.environ = Spy(os.environ)
import cafe_otel
print(sorted({k for k in Spy.read if k.startswith(("OTEL_", "CAFE_"))}), "opentelemetry.sdk.trace" in sys.modules)
"""


def test_importing_cafe_otel_reads_no_environment_and_survives_a_hostile_one() -> None:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "abc",
               "OTEL_SPAN_EVENT_COUNT_LIMIT": "-1", "OTEL_SPAN_LINK_COUNT_LIMIT": "١٢"}
    done = subprocess.run([sys.executable, "-c", _SPY], capture_output=True, text=True, env=environ,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] False"


def test_a_hostile_span_limit_is_refused_when_configuration_is_resolved() -> None:
    from cafe_otel._config.settings import resolve_settings

    with pytest.raises(ConfigurationError) as raised:
        resolve_settings(environ={"OTEL_SPAN_EVENT_COUNT_LIMIT": "abc"})
    assert str(raised.value).startswith("OTEL_SPAN_EVENT_COUNT_LIMIT: ") and "abc" not in str(raised.value)


@pytest.mark.parametrize("variable", [
    "OTEL_TRACES_SAMPLER_ARG", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    "OTEL_BSP_SCHEDULE_DELAY", "OTEL_METRIC_EXPORT_INTERVAL", "OTEL_METRIC_EXPORT_TIMEOUT",
    "OTEL_SPAN_EVENT_COUNT_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
])
@pytest.mark.parametrize("value", ["\u0661", "\uff11", "1_0", "\u0660.\u0665", " \u0969 "])
def test_a_number_not_written_in_ascii_digits_is_refused_naming_the_variable_not_the_value(
    variable: str, value: str
) -> None:
    environ = {variable: value, "OTEL_TRACES_SAMPLER": "traceidratio"}
    with pytest.raises(ConfigurationError) as raised:
        configure("svc", exporter=InMemorySpanExporter(), metrics=True, environ=environ)
    message = str(raised.value)
    assert raised.value.exit_code == 20 and message.startswith(f"{variable}: ")
    assert value.strip() not in message and "\n" not in message


def test_ascii_numbers_are_still_accepted() -> None:
    environ = {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": " 0.5 ",
               "OTEL_EXPORTER_OTLP_TIMEOUT": "1e3", "OTEL_BSP_MAX_QUEUE_SIZE": "+64"}
    handle = configure("svc", exporter=InMemorySpanExporter(), metrics=False, environ=environ)
    try:
        assert handle.settings is not None and handle.settings.export_timeout == 1.0
    finally:
        handle.shutdown()


@pytest.mark.parametrize(("headers", "protocol", "named"), [
    ("authorization=Bearer%20one,authorization=Bearer%20two", "http/protobuf", "'authorization'"),
    ("Authorization=a,authorization=b", "grpc", "'authorization'"),
    ("content-type=text/plain", "http/protobuf", "'content-type'"),
    ("Content-Length=5", "http/protobuf", "'content-length'"),
    ("host=evil.example", "grpc", "'host'"),
    ("te=trailers", "grpc", "'te'"),
    ("user-agent=me", "http/protobuf", "'user-agent'"),
    (":authority=evil.example", "grpc", "header 1"),
    ("x-ok=1,grpc-timeout=1S", "grpc", "header 2"),
])
def test_a_duplicate_or_reserved_header_is_refused_by_name(headers: str, protocol: str, named: str) -> None:
    secret = "sk-proj-header-value-never-shown"
    environ = {"OTEL_EXPORTER_OTLP_TRACES_HEADERS": headers.replace("Bearer%20two", secret),
               "OTEL_EXPORTER_OTLP_PROTOCOL": protocol}
    with pytest.raises(ConfigurationError) as raised:
        configure("svc", environ=environ, metrics=False)
    message = str(raised.value)
    assert raised.value.exit_code == 20 and named in message and "OTEL_EXPORTER_OTLP_TRACES_HEADERS" in message
    assert secret not in message


def test_a_duplicate_metrics_header_is_refused_too() -> None:
    environ = {"OTEL_EXPORTER_OTLP_METRICS_HEADERS": "x-key=1,X-Key=2"}
    with pytest.raises(ConfigurationError, match="OTEL_EXPORTER_OTLP_METRICS_HEADERS: given more than once"):
        configure("svc", environ=environ)


# TLS: the exporters' certificates come from the environ handed in, per signal.

SIGNALS = ("", "TRACES_", "METRICS_")
KINDS = ("CERTIFICATE", "CLIENT_KEY", "CLIENT_CERTIFICATE", "INSECURE")
HTTP, GRPC = "http/protobuf", "grpc"


@pytest.fixture(autouse=True)
def no_tls_in_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    for signal in SIGNALS:
        for kind in KINDS:
            monkeypatch.delenv(f"OTEL_EXPORTER_OTLP_{signal}{kind}", raising=False)


@pytest.fixture
def pem(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A file of the given name whose content is its name (so a reader can be told apart)."""
    def make(name: str) -> str:
        path = tmp_path / name
        path.write_bytes(name.encode())
        return str(path)
    return make


@pytest.fixture
def sessions(monkeypatch: pytest.MonkeyPatch) -> list[requests.Session]:
    """Every requests.Session made (ours or the SDK transport's), in order: traces' first."""
    made: list[requests.Session] = []

    class Recorded(requests.Session):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    monkeypatch.setattr(requests, "Session", Recorded)
    return made


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every gRPC ssl_channel_credentials call (ours, or the SDK's reading os.environ), in order."""
    calls: list[dict[str, Any]] = []
    real = grpc.ssl_channel_credentials

    def recorded(root_certificates: bytes | None = None, private_key: bytes | None = None,
                 certificate_chain: bytes | None = None) -> grpc.ChannelCredentials:
        calls.append({"root": root_certificates, "key": private_key, "chain": certificate_chain})
        return real(root_certificates, private_key, certificate_chain)

    monkeypatch.setattr(grpc, "ssl_channel_credentials", recorded)
    monkeypatch.setattr(sdk_grpc_exporter, "ssl_channel_credentials", recorded)
    return calls


def _configure(protocol: str, environ: dict[str, str], scheme: str = "https") -> None:
    handle = configure("svc", protocol=protocol, endpoint=f"{scheme}://127.0.0.1:{closed_port()}",
                       environ=environ, metrics=True)
    handle.shutdown(0.0)


# --- a bad file handed in is the named error ------------------------------------------------

@pytest.mark.parametrize("protocol", [HTTP, GRPC])
@pytest.mark.parametrize("variable", [f"OTEL_EXPORTER_OTLP_{signal}{kind}" for signal in SIGNALS
                                      for kind in ("CERTIFICATE", "CLIENT_KEY", "CLIENT_CERTIFICATE")])
def test_a_missing_file_handed_in_is_named_though_the_process_lacks_it(
    tmp_path: Path, protocol: str, variable: str
) -> None:
    assert variable not in os.environ
    with pytest.raises(ConfigurationError) as raised:
        _configure(protocol, {variable: str(tmp_path / "absent.pem")})
    assert str(raised.value) == f"{variable}: no file can be read at that path" and raised.value.exit_code == 20


# --- OTLP/HTTP -------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"])
@pytest.mark.parametrize("signal", SIGNALS)
def test_http_a_file_set_only_in_the_process_is_not_used(
    monkeypatch: pytest.MonkeyPatch, pem: Any, sessions: list[requests.Session], signal: str, kind: str
) -> None:
    monkeypatch.setenv(f"OTEL_EXPORTER_OTLP_{signal}{kind}", pem("process.pem"))
    if kind == "CLIENT_KEY":  # the SDK reads a key only with its certificate
        monkeypatch.setenv(f"OTEL_EXPORTER_OTLP_{signal}CLIENT_CERTIFICATE", pem("process-cert.pem"))
    _configure(HTTP, {})
    assert len(sessions) == 2  # one a signal
    assert [(session.verify, session.cert) for session in sessions] == [(True, None), (True, None)]


def test_http_the_files_handed_in_are_what_each_signal_sends_with(
    monkeypatch: pytest.MonkeyPatch, pem: Any, sessions: list[requests.Session]
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", pem("process-ca.pem"))
    _configure(HTTP, {
        "OTEL_EXPORTER_OTLP_CERTIFICATE": pem("ca.pem"),
        "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": pem("traces-ca.pem"),
        "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": pem("client.pem"),
        "OTEL_EXPORTER_OTLP_CLIENT_KEY": pem("client.key"),
        "OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY": pem("metrics-client.key"),
    })
    shown = [(Path(str(s.verify)).name, tuple(Path(part).name for part in s.cert)) for s in sessions]
    assert shown == [("traces-ca.pem", ("client.pem", "client.key")),
                     ("ca.pem", ("client.pem", "metrics-client.key"))]


def test_http_a_client_certificate_alone_is_one_pem_with_its_key(pem: Any, sessions: list[requests.Session]) -> None:
    _configure(HTTP, {"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": pem("both.pem")})
    assert [Path(str(session.cert)).name for session in sessions] == ["both.pem", "both.pem"]


# --- gRPC ------------------------------------------------------------------------------------

@pytest.mark.parametrize("signal", SIGNALS)
def test_grpc_a_certificate_set_only_in_the_process_is_not_used(
    monkeypatch: pytest.MonkeyPatch, pem: Any, credentials: list[dict[str, Any]], signal: str
) -> None:
    monkeypatch.setenv(f"OTEL_EXPORTER_OTLP_{signal}CERTIFICATE", pem("process.pem"))
    _configure(GRPC, {})
    assert credentials and all(call["root"] is None for call in credentials), credentials


def test_grpc_the_files_handed_in_are_what_each_signal_trusts_and_presents(
    monkeypatch: pytest.MonkeyPatch, pem: Any, credentials: list[dict[str, Any]]
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", pem("process-ca.pem"))
    _configure(GRPC, {
        "OTEL_EXPORTER_OTLP_CERTIFICATE": pem("ca.pem"),
        "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE": pem("metrics-ca.pem"),
        "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE": pem("traces-client.pem"),
        "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY": pem("traces-client.key"),
    })
    assert credentials == [
        {"root": b"ca.pem", "key": b"traces-client.key", "chain": b"traces-client.pem"},
        {"root": b"metrics-ca.pem", "key": None, "chain": None},
    ]


def test_grpc_insecure_handed_in_is_honoured_per_signal(credentials: list[dict[str, Any]]) -> None:
    # An http:// endpoint is plain gRPC unless INSECURE says false; https:// is TLS whatever it says.
    _configure(GRPC, {"OTEL_EXPORTER_OTLP_TRACES_INSECURE": "false"}, scheme="http")
    assert credentials == [{"root": None, "key": None, "chain": None}]  # traces only
    credentials.clear()
    _configure(GRPC, {"OTEL_EXPORTER_OTLP_INSECURE": "FALSE", "OTEL_EXPORTER_OTLP_METRICS_INSECURE": "true"},
               scheme="http")
    assert len(credentials) == 1  # traces TLS, metrics plain
    credentials.clear()
    _configure(GRPC, {"OTEL_EXPORTER_OTLP_INSECURE": "true"}, scheme="https")
    assert len(credentials) == 2


def test_grpc_insecure_set_only_in_the_process_is_not_used(
    monkeypatch: pytest.MonkeyPatch, credentials: list[dict[str, Any]]
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "false")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_INSECURE", "false")
    _configure(GRPC, {}, scheme="http")
    assert credentials == []


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_METRICS_INSECURE"])
def test_an_insecure_that_is_not_true_or_false_is_named(variable: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        _configure(GRPC, {variable: "1"}, scheme="http")
    assert str(raised.value) == f"{variable}: '1' is not true or false"


# --- a key without its certificate ------------------------------------------------------------

@pytest.mark.parametrize("protocol", [HTTP, GRPC])
def test_a_client_key_without_its_certificate_is_named(pem: Any, protocol: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        _configure(protocol, {"OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY": pem("client.key")})
    assert str(raised.value).startswith("OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY is set but no client certificate is")


def test_a_grpc_client_certificate_without_its_key_is_exit_20_not_an_aborted_process(pem: Any) -> None:
    # gRPC's core aborts the interpreter (SIGABRT) on a certificate chain without a key.
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "OTEL_EXPORTER_OTLP_CERTIFICATE": pem("ca.pem"),
               "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": pem("client.pem")}
    environ.pop("CAFE_DEBUG", None)
    done = subprocess.run([sys.executable, "-m", "cafe", "shift", "--seed", "1",
                           f"--otlp=https://127.0.0.1:{closed_port()}"],
                          capture_output=True, text=True, env=environ, timeout=60, check=False,
                          cwd=Path(pem("x")).parent)
    assert done.returncode == 20, done.stderr
    assert done.stderr.startswith("cafe: error: OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE is set but no client key is")
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize("variable", ["OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
                                      "OTEL_PYTHON_EXPORTER_OTLP_GRPC_METRICS_CREDENTIAL_PROVIDER"])
def test_the_sdks_credential_provider_is_refused_not_silently_skipped(variable: str) -> None:
    # The exporters are handed their TLS in full, so the SDK would never consult it.
    with pytest.raises(ConfigurationError) as raised:
        _configure(GRPC, {variable: "my_provider"})
    assert str(raised.value).startswith(f"{variable}: a credential provider is not offered (")
    assert "my_provider" not in str(raised.value)


# Sampling: OTEL_TRACES_SAMPLER and its argument; a shift kept or left out whole.

@pytest.mark.parametrize(("environ", "description"), [
    ({}, "ParentBased{root:AlwaysOnSampler,"),
    ({"OTEL_TRACES_SAMPLER": " Always_On "}, "AlwaysOnSampler"),
    ({"OTEL_TRACES_SAMPLER": "always_off"}, "AlwaysOffSampler"),
    ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}, "TraceIdRatioBased{0.25}"),
    ({"OTEL_TRACES_SAMPLER": "traceidratio"}, "TraceIdRatioBased{1.0}"),
    ({"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"},
     "ParentBased{root:TraceIdRatioBased{0.0},"),
    ({"OTEL_TRACES_SAMPLER": "parentbased_always_off"}, "ParentBased{root:AlwaysOffSampler,"),
])
def test_each_sampler_the_specification_names_is_built(environ: dict[str, str], description: str) -> None:
    assert sampler_from(environ).get_description().startswith(description)


@pytest.mark.parametrize(("environ", "message"), [
    ({"OTEL_TRACES_SAMPLER": "jaeger_remote"}, "OTEL_TRACES_SAMPLER: 'jaeger_remote' is not one cafe builds ("),
    ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "half"},
     "OTEL_TRACES_SAMPLER_ARG: expected a ratio from 0 to 1 in ASCII digits (the value given is not shown)"),
    ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"}, "expected a ratio"),
    ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "nan"}, "expected a ratio"),
])
def test_a_sampler_not_built_or_a_bad_ratio_is_a_named_error(environ: dict[str, str], message: str) -> None:
    with pytest.raises(TelemetryConfigError) as caught:
        configure(exporter=InMemorySpanExporter(), environ=environ)
    assert message in str(caught.value)


def test_the_error_lists_only_samplers_that_are_built() -> None:
    with pytest.raises(TelemetryConfigError) as caught:
        sampler_from({"OTEL_TRACES_SAMPLER": "xray"})
    for name in SAMPLERS:
        sampler_from({"OTEL_TRACES_SAMPLER": name})  # each one named works
        assert name in str(caught.value)


def _shifts(environ: dict[str, str], count: int, **options: object) -> tuple[InMemorySpanExporter, object]:
    sink = InMemorySpanExporter()
    handle = configure(exporter=sink, environ=environ, **options, batch=BatchOptions(schedule_delay=0.05))  # type: ignore[arg-type]
    for _ in range(count):
        seed_shift(handle.tracer())
    assert handle.force_flush(5.0)
    account = handle.account.snapshot()
    handle.shutdown(2.0)
    return sink, account


def test_always_off_exports_nothing_and_the_shift_runs_as_ever() -> None:
    sink, account = _shifts({"OTEL_TRACES_SAMPLER": "always_off"}, 2)
    assert sink.get_finished_spans() == ()
    assert account.exported == 0 and account.dropped == 0  # nothing sampled is nothing lost


def test_a_ratio_keeps_or_leaves_out_each_shift_whole() -> None:
    everything, _ = _shifts({}, 1)
    per_shift = len(everything.get_finished_spans())
    sink, account = _shifts({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5"}, 40)
    spans_per_trace = Counter(span.context.trace_id for span in sink.get_finished_spans())
    assert set(spans_per_trace.values()) == {per_shift}  # no shift cut in part
    assert 5 <= len(spans_per_trace) <= 35  # about half of 40 kept (a bound a fair coin meets)
    assert account.exported == sum(spans_per_trace.values())


def test_an_explicit_sampler_wins_over_the_environment() -> None:
    sink, _ = _shifts({"OTEL_TRACES_SAMPLER": "always_on"}, 1, advanced=AdvancedOptions(sampler=ALWAYS_OFF))
    assert sink.get_finished_spans() == ()
    sink, _ = _shifts({"OTEL_TRACES_SAMPLER": "always_off"}, 1,
                      advanced=AdvancedOptions(sampler=TraceIdRatioBased(1.0)))
    assert sink.get_finished_spans()


def test_metrics_count_every_call_whatever_the_sampler() -> None:
    kept: list[MetricsData] = []

    class Keeping(MetricExporter):
        def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
                   **kwargs: object) -> MetricExportResult:
            kept.append(metrics_data)
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: object) -> None:
            return None

    sink = InMemorySpanExporter()
    handle = configure(exporter=sink, environ={"OTEL_TRACES_SAMPLER": "always_off"},
                       metrics=MetricsOptions(exporter=Keeping()))
    run = seed_shift(handle.tracer())
    handle.shutdown(2.0)
    assert sink.get_finished_spans() == ()
    durations = [point.count for data in kept for resource in data.resource_metrics
                 for scope in resource.scope_metrics for metric in scope.metrics
                 if metric.name == "gen_ai.client.operation.duration" for point in metric.data.data_points]
    assert sum(durations) == run.model_calls > 0


def test_the_cli_names_only_traces_it_sent() -> None:
    from tests.otel.test_cli_plugin import Receiver

    receiver = Receiver()
    receiver.thread.start()

    def notes(sampler: str) -> list[str]:
        out, err = io.StringIO(), io.StringIO()
        # A receiver that stores them: a trace note names only spans delivered.
        code = main(["shift", "--seed", "1", "--otlp-protocol", "http/protobuf", f"--otlp={receiver.url}"],
                    environ={"OTEL_TRACES_SAMPLER": sampler, "OTEL_METRICS_EXPORTER": "none"},
                    out=out, err=err, load_plugins=lambda warn: [COUNTER, plugin])
        assert code == 0, err.getvalue()
        return [line for line in (out.getvalue() + err.getvalue()).splitlines() if line.startswith("trace: ")]

    try:
        assert len(notes("always_on")) == 1
        assert notes("always_off") == []  # a trace left out is on no backend: no id to look up
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


def test_a_sampler_cafe_does_not_build_stops_the_cli_with_its_exit_code() -> None:
    err = io.StringIO()
    code = main(["shift", "--seed", "1", f"--otlp=http://127.0.0.1:{closed_port()}"],
                environ={"OTEL_TRACES_SAMPLER": "xray"}, out=io.StringIO(), err=err,
                load_plugins=lambda warn: [COUNTER, plugin])
    assert code == 20 and err.getvalue().startswith("cafe: error: OTEL_TRACES_SAMPLER: 'xray' is not one cafe builds")
