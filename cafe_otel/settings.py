"""Telemetry settings: explicit arguments first, then the `OTEL_*` variables of the
`environ` handed in (os.environ at call time when none is), then the defaults.

OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT is read in MILLISECONDS, as the specification says
(the Python OTLP exporters read it in seconds; `configure` passes them an explicit
timeout, so their reading never applies). The explicit `export_timeout` is in seconds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from cafe.errors import ConfigurationError
from cafe_otel import semconv as sc
from cafe_otel.content import CaptureMode, capture_mode

DEFAULT_SERVICE_NAME = "cafe"
GRPC, HTTP = "grpc", "http/protobuf"
DEFAULT_PROTOCOL = GRPC  # what the Python distro defaults to; the collector's 4317
DEFAULT_ENDPOINTS = {GRPC: "http://localhost:4317", HTTP: "http://localhost:4318"}
HTTP_TRACES_PATH = "/v1/traces"
DEFAULT_EXPORT_TIMEOUT = 5.0


class TelemetryConfigError(ConfigurationError):
    """A telemetry setting that cannot be used; the message names the variable."""


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


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
        timeout = float(export_timeout)
    else:
        raw = _first(env, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
        timeout = _millis(raw) if raw else DEFAULT_EXPORT_TIMEOUT
    if timeout <= 0:
        raise TelemetryConfigError("export timeout must be positive")

    compression = _first(env, "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION")
    if compression and compression.lower() not in ("gzip", "none"):
        raise TelemetryConfigError(
            f"OTEL_EXPORTER_OTLP_(TRACES_)COMPRESSION: {compression!r} is not gzip or none")

    return Settings(
        service_name=name,
        resource_attributes=resource,
        protocol=proto,
        endpoint=url,
        headers=head,
        export_timeout=timeout,
        compression=compression.lower() if compression else None,
        capture=capture_mode(capture_content, env),
        disabled=_truthy(env.get("OTEL_SDK_DISABLED")),
    )


def _millis(raw: str) -> float:
    try:
        return float(raw) / 1000.0
    except ValueError:
        raise TelemetryConfigError(
            f"OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT: {raw!r} is not a number of milliseconds") from None


def _endpoint(explicit: str | None, env: Mapping[str, str], protocol: str) -> str:
    # The signal-specific variable is a full URL used as is; the generic one is a base to
    # which HTTP appends /v1/traces. An explicit argument is treated like the generic one
    # unless it already carries a path.
    signal = _first(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    base = explicit or (None if signal else _first(env, "OTEL_EXPORTER_OTLP_ENDPOINT"))
    if explicit is None and signal:
        return signal
    url = base or DEFAULT_ENDPOINTS[protocol]
    if "://" not in url:
        url = "http://" + url
    if protocol == HTTP and urlsplit(url).path in ("", "/"):
        url = url.rstrip("/") + HTTP_TRACES_PATH
    return url


def batch_setting(explicit: int | None, env: Mapping[str, str], variable: str, default: int) -> int:
    """An OTEL_BSP_* batch setting: the explicit argument, else the variable, else the
    specification's default (the delay is in milliseconds there)."""
    if explicit is not None:
        return explicit
    raw = _first(env, variable)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise TelemetryConfigError(f"{variable}: {raw!r} is not a whole number") from None
    if value < 1:
        raise TelemetryConfigError(f"{variable}: must be at least 1, not {value}")
    return value


def display_endpoint(url: str) -> str:
    """The endpoint as error texts show it: no user:password part, no query string."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    return f"{parts.scheme}://{netloc}{parts.path}"
