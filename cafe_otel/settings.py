"""Telemetry settings: explicit arguments first, then the `OTEL_*` variables of the
`environ` handed in (os.environ at call time when none is), then the defaults.

OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT is read in MILLISECONDS, as the specification says
(the Python OTLP exporters read it in seconds; `configure` passes them an explicit
timeout, so their reading never applies). The explicit `export_timeout` is in seconds.

Every value is checked here, at the boundary: a number out of its range (NaN, inf, zero,
negative, absurdly large), a batch larger than its queue, a boolean that is neither true nor
false, or an endpoint that is not an http(s) URL with a host and a port in 1-65535 is a
`TelemetryConfigError` (exit 20) naming the variable or argument and what it accepts. Nothing
out of range reaches a worker thread, where it would fail later and out of sight.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from cafe.errors import ConfigurationError
from cafe.urls import http_url_problem, shown_url
from cafe_otel import semconv as sc
from cafe_otel.content import CaptureMode, capture_mode

DEFAULT_SERVICE_NAME = "cafe"
GRPC, HTTP = "grpc", "http/protobuf"
DEFAULT_PROTOCOL = GRPC  # what the Python distro defaults to; the collector's 4317
DEFAULT_ENDPOINTS = {GRPC: "http://localhost:4317", HTTP: "http://localhost:4318"}
HTTP_TRACES_PATH = "/v1/traces"
DEFAULT_EXPORT_TIMEOUT = 5.0
MAX_SECONDS = 3600.0  # an hour: longer than any sane export, shutdown or batch delay
MAX_QUEUE_SIZE = 1_000_000
DEFAULT_MAX_QUEUE_SIZE = 2048
DEFAULT_MAX_EXPORT_BATCH_SIZE = 512
DEFAULT_SCHEDULE_DELAY = 1.0  # seconds; the specification's 5 s holds spans longer than a shift
TIMEOUT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
ENDPOINT_ARGUMENT = "endpoint argument (--otlp)"


class TelemetryConfigError(ConfigurationError):
    """A telemetry setting that cannot be used; the message names the variable."""


def _boolean(env: Mapping[str, str], variable: str) -> bool:
    # The specification would read any other value as false with a warning; a typo such as
    # OTEL_SDK_DISABLED=1 then leaves export on while its writer thinks it is off.
    text = env.get(variable, "").strip().lower()
    if text in ("", "false"):
        return False
    if text == "true":
        return True
    raise TelemetryConfigError(f"{variable}: {_shown(env.get(variable, ''))} is not true or false")


def _shown(raw: str, limit: int = 40) -> str:
    """A bad value as an error shows it: quoted, cut short (a value may be long or odd)."""
    return repr(raw[:limit] + ("…" if len(raw) > limit else ""))


def seconds_in_range(value: object, source: str, *, low_inclusive: bool = False) -> float:
    """A finite number of seconds in (0, 3600] (or [0, 3600] with `low_inclusive`)."""
    low = "[0" if low_inclusive else "(0"
    accepted = f"a number of seconds in {low}, {MAX_SECONDS:g}]"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TelemetryConfigError(f"{source}: {type(value).__name__} is not {accepted}")
    number = float(value)
    above_low = number >= 0 if low_inclusive else number > 0
    if not (math.isfinite(number) and above_low and number <= MAX_SECONDS):
        raise TelemetryConfigError(f"{source}: {number!r} is not {accepted}")
    return number


def millis_in_range(raw: str, variable: str) -> float:
    """A variable in milliseconds, as seconds: finite and in (0, 3600000]."""
    accepted = f"a number of milliseconds in (0, {MAX_SECONDS * 1000:.0f}]"
    try:
        number = float(raw)
    except ValueError:
        raise TelemetryConfigError(f"{variable}: {_shown(raw)} is not {accepted}") from None
    if not (math.isfinite(number) and 0 < number <= MAX_SECONDS * 1000):
        raise TelemetryConfigError(f"{variable}: {_shown(raw)} is not {accepted}")
    return number / 1000.0


def _whole_in_range(value: object, source: str, high: int, what: str) -> int:
    accepted = f"a whole number from 1 to {high}{what}"
    if isinstance(value, str):
        text = value
        try:
            value = int(text.strip())
        except ValueError:
            raise TelemetryConfigError(f"{source}: {_shown(text)} is not {accepted}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TelemetryConfigError(f"{source}: {type(value).__name__} is not {accepted}")
    if not 1 <= value <= high:
        raise TelemetryConfigError(f"{source}: {value} is not {accepted}")
    return value


def _first(environ: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return value
    return None


def parse_key_values(text: str | None, variable: str) -> dict[str, str]:
    """`k=v,k2=v2` with percent-encoded values (W3C baggage style, as the spec says)."""
    found: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise TelemetryConfigError(f"{variable}: an entry is not key=value (entry {len(found) + 1})")
        found[unquote(key.strip())] = unquote(value.strip())
    return found


def normalise_protocol(value: str, source: str) -> str:
    text = value.strip().lower()
    if text in ("grpc",):
        return GRPC
    if text in ("http/protobuf", "http"):
        return HTTP
    raise TelemetryConfigError(f"{source}: protocol {value!r} is not supported (use grpc or http/protobuf)")


@dataclass(frozen=True)
class Settings:
    """The resolved settings, each with where it came from kept out of the value."""

    service_name: str
    resource_attributes: dict[str, str]
    protocol: str
    endpoint: str
    headers: dict[str, str]
    export_timeout: float
    compression: str | None
    capture: CaptureMode
    disabled: bool

    def __repr__(self) -> str:
        # Headers carry credentials and an endpoint URL may too: neither is shown as is.
        return (
            f"Settings(service_name={self.service_name!r}, protocol={self.protocol!r}, "
            f"endpoint={display_endpoint(self.endpoint)!r}, headers={sorted(self.headers)!r}, "
            f"export_timeout={self.export_timeout}, compression={self.compression!r}, "
            f"capture={self.capture.name}, disabled={self.disabled})"
        )


def resolve_settings(
    *,
    service_name: str | None = None,
    endpoint: str | None = None,
    protocol: str | None = None,
    headers: Mapping[str, str] | None = None,
    export_timeout: float | None = None,
    capture_content: CaptureMode | str | bool | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Explicit arguments beat OTEL_* variables, which beat defaults."""
    env = os.environ if environ is None else environ
    resource = parse_key_values(env.get("OTEL_RESOURCE_ATTRIBUTES"), "OTEL_RESOURCE_ATTRIBUTES")
    name = service_name or _first(env, "OTEL_SERVICE_NAME") or resource.get(sc.SERVICE_NAME) \
        or DEFAULT_SERVICE_NAME

    if protocol is not None:
        proto = normalise_protocol(protocol, "protocol argument")
    else:
        raw = _first(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
        proto = normalise_protocol(raw, "OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL") if raw else DEFAULT_PROTOCOL

    url = _endpoint(endpoint, env, proto)

    if headers is not None:
        head = dict(headers)
    else:
        head = parse_key_values(
            _first(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"),
            "OTEL_EXPORTER_OTLP_(TRACES_)HEADERS",
        )

    if export_timeout is not None:
        timeout = seconds_in_range(export_timeout, "export_timeout argument")
    else:
        variable = next((name for name in TIMEOUT_VARIABLES if env.get(name, "").strip()), None)
        timeout = (millis_in_range(env[variable].strip(), variable) if variable
                   else DEFAULT_EXPORT_TIMEOUT)

    compression = _first(env, "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION")
    if compression and compression.lower() not in ("gzip", "none"):
        raise TelemetryConfigError(
            f"OTEL_EXPORTER_OTLP_(TRACES_)COMPRESSION: {compression!r} is not gzip or none")

    check_tls_files(env)
    check_unoffered_choices(env)
    return Settings(
        service_name=name,
        resource_attributes=resource,
        protocol=proto,
        endpoint=url,
        headers=head,
        export_timeout=timeout,
        compression=compression.lower() if compression else None,
        capture=capture_mode(capture_content, env),
        disabled=_boolean(env, "OTEL_SDK_DISABLED"),
    )


# Variables of the specification whose other choices cafe does not offer: spans leave over
# OTLP only. Any other value is refused, not ignored: it would not do what it says. (The
# sampler variables are read by cafe_otel.sampling.)
_OFFERED = {
    "OTEL_TRACES_EXPORTER": (("otlp", "console"),
                             "spans leave over OTLP, or on stdout with console; for none, leave --otlp and "
                             "OTEL_EXPORTER_OTLP_ENDPOINT unset or set OTEL_SDK_DISABLED=true"),
}


def check_unoffered_choices(env: Mapping[str, str]) -> None:
    for variable, (offered, why) in _OFFERED.items():
        raw = env.get(variable, "")
        if raw.strip() and raw.strip().lower() not in offered:
            raise TelemetryConfigError(f"{variable}: {_shown(raw, 30)} is not offered ({why})")


TLS_FILE_VARIABLES = tuple(
    f"OTEL_EXPORTER_OTLP_{signal}{kind}"
    for signal in ("", "TRACES_", "METRICS_")
    for kind in ("CERTIFICATE", "CLIENT_KEY", "CLIENT_CERTIFICATE")
)


def check_tls_files(env: Mapping[str, str]) -> None:
    """Each TLS file variable set names a readable regular file, checked before anything is
    built (`cafe_otel.tls` reads them for the exporters): a missing one printed the SDK's
    traceback on stderr, a directory was an internal error, and a FIFO would block the command."""
    for variable in TLS_FILE_VARIABLES:
        path = env.get(variable, "").strip()
        if not path:
            continue
        try:
            found = os.stat(path)
        except (OSError, ValueError):
            raise TelemetryConfigError(f"{variable}: no file can be read at that path") from None
        if not stat.S_ISREG(found.st_mode):
            raise TelemetryConfigError(f"{variable}: the path is not a regular file (a PEM file is expected)")
        if not os.access(path, os.R_OK):
            raise TelemetryConfigError(f"{variable}: the file cannot be read (permission denied)")


def _endpoint(explicit: str | None, env: Mapping[str, str], protocol: str) -> str:
    # The signal-specific variable is a full URL used as is; the generic one is a base to
    # which HTTP appends /v1/traces. An explicit argument is treated like the generic one
    # unless it already carries a path.
    signal = _first(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if explicit is None and signal:
        return check_endpoint(signal, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    generic = None if explicit else _first(env, "OTEL_EXPORTER_OTLP_ENDPOINT")
    source = ENDPOINT_ARGUMENT if explicit else "OTEL_EXPORTER_OTLP_ENDPOINT"
    url = explicit or generic or DEFAULT_ENDPOINTS[protocol]
    if "://" not in url:
        url = "http://" + url
    check_endpoint(url, source)
    if protocol == HTTP and urlsplit(url).path in ("", "/"):
        url = url.rstrip("/") + HTTP_TRACES_PATH
    return url


def check_endpoint(url: str, source: str) -> str:
    """An http(s) URL with a host and, if any, a port in 1-65535 (`cafe.urls`). The error
    names the problem, not the URL (it may carry a user:password part)."""
    problem = http_url_problem(url)
    if problem is not None:
        raise TelemetryConfigError(f"{source}: {problem}; use http(s)://HOST[:PORT] with a port from 1 to 65535")
    return url


@dataclass(frozen=True)
class BatchSettings:
    """The batch processor's settings, in seconds where they are times."""

    max_queue_size: int
    max_export_batch_size: int
    schedule_delay: float
    shutdown_timeout: float


def resolve_batch_settings(
    *,
    max_queue_size: int | None = None,
    max_export_batch_size: int | None = None,
    schedule_delay: float | None = None,
    shutdown_timeout: float,
    environ: Mapping[str, str] | None = None,
) -> BatchSettings:
    """Explicit arguments, else OTEL_BSP_* (the delay in milliseconds there), else defaults."""
    env = os.environ if environ is None else environ

    def whole(explicit: int | None, variable: str, default: int, high: int, what: str = "") -> int:
        if explicit is not None:
            return _whole_in_range(explicit, f"{variable.removeprefix('OTEL_BSP_').lower()} argument",
                                   high, what)
        raw = _first(env, variable)
        return default if raw is None else _whole_in_range(raw, variable, high, what)

    queue = whole(max_queue_size, "OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_MAX_QUEUE_SIZE, MAX_QUEUE_SIZE)
    batch = whole(max_export_batch_size, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
                  min(DEFAULT_MAX_EXPORT_BATCH_SIZE, queue), queue, " (at most the queue size)")
    if schedule_delay is not None:
        delay = seconds_in_range(schedule_delay, "schedule_delay argument")
    else:
        raw = _first(env, "OTEL_BSP_SCHEDULE_DELAY")
        delay = DEFAULT_SCHEDULE_DELAY if raw is None else millis_in_range(raw, "OTEL_BSP_SCHEDULE_DELAY")
    return BatchSettings(queue, batch, delay,
                         seconds_in_range(shutdown_timeout, "shutdown_timeout argument", low_inclusive=True))


def display_endpoint(url: str) -> str:
    """The endpoint as error texts show it: no user:password part, no query string."""
    return shown_url(url)
