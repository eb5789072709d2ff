"""OTel variables that the SDK reads for itself, given garbage: each is a named
configuration error (exit 20, one line), never an internal error (70), a plugin that
silently did not load, or the SDK's own warning line on stderr beside ours."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cafe.cli import main
from cafe.errors import ConfigurationError
from cafe_otel import configure
from cafe_otel._config.environment import LIMIT_VARIABLES

from .conftest import closed_port

ROOT = Path(__file__).resolve().parents[2]
RECORDING = ROOT / "tests" / "recordings" / "seed-shift.jsonl"


def _cli(argv: list[str], environ: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, environ=environ, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


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


@pytest.mark.parametrize(("variable", "value", "accepted"), [
    ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "sk-not-a-temporality", "cumulative, delta or lowmemory"),
    ("OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION", "exponential",
     "explicit_bucket_histogram or base2_exponential_bucket_histogram"),
])
def test_a_metrics_choice_the_sdk_would_only_warn_about_is_exit_20(
    variable: str, value: str, accepted: str, capfd: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(["shift", "--seed", "1", f"--otlp=http://127.0.0.1:{closed_port()}"], {variable: value})
    assert code == 20 and err == f"cafe: error: {variable}: {value!r} is not {accepted}\n"
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
