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

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from cafe_otel import semconv as sc
from cafe_otel._config import variables as v
from cafe_otel._config.capture import CaptureMode, capture_mode
from cafe_otel._config.environment import check_limits
from cafe_otel._config.parse import (
    GRPC,
    HTTP,
    MAX_SECONDS,
    TelemetryConfigError,
    boolean,
    check_endpoint,
    display_endpoint,
    first,
    millis_in_range,
    normalise_protocol,
    parse_key_values,
    seconds_in_range,
    shown,
    whole_in_range,
)
from cafe_otel._config.signal import (
    DEFAULT_ENDPOINTS,
    DEFAULT_EXPORT_TIMEOUT,
    DEFAULT_PROTOCOL,
    ENDPOINT_ARGUMENT,
    OTLPOptions,
    SignalConfig,
    resolve_signal,
)
from cafe_otel._config.tls import TlsSettings

DEFAULT_SERVICE_NAME = "cafe"
HTTP_TRACES_PATH = "/v1/traces"
MAX_QUEUE_SIZE = 1_000_000
DEFAULT_MAX_QUEUE_SIZE = 2048
DEFAULT_MAX_EXPORT_BATCH_SIZE = 512
DEFAULT_SCHEDULE_DELAY = 1.0  # seconds; the specification's 5 s holds spans longer than a shift
# How long a process waits for the collector when it exits. Short on purpose: buffering
# and retry belong to the Collector next to the service (collector-config/), not to the
# request path; a process handing spans to a local Collector needs milliseconds, and a
# dead one must not hold the exit (the stock SDK waits 7-30 s). What is left is counted.
DEFAULT_SHUTDOWN_TIMEOUT = 0.5

# Re-exported: the checks are shared by every reader of settings.
__all__ = [
    "DEFAULT_ENDPOINTS", "DEFAULT_EXPORT_TIMEOUT", "DEFAULT_PROTOCOL", "DEFAULT_SHUTDOWN_TIMEOUT",
    "ENDPOINT_ARGUMENT", "GRPC", "HTTP",
    "MAX_SECONDS", "BatchSettings", "Settings", "TelemetryConfigError", "check_endpoint", "display_endpoint",
    "millis_in_range", "normalise_protocol", "parse_key_values", "resolve_batch_settings", "resolve_settings",
    "seconds_in_range",
]


@dataclass(frozen=True)
class Settings:
    """The resolved settings of a telemetry handle: the service, and the traces' exporter
    (`traces`, whose fields are also readable here directly)."""

    service_name: str
    resource_attributes: dict[str, str]
    traces: SignalConfig
    capture: CaptureMode
    disabled: bool
    options: OTLPOptions = field(default_factory=OTLPOptions, repr=False)  # the explicit arguments
    # The content event's exporter (a log record): resolved only when capture sends content there.
    logs: SignalConfig | None = field(default=None, repr=False)

    @property
    def protocol(self) -> str:
        return self.traces.protocol

    @property
    def endpoint(self) -> str:
        return self.traces.endpoint

    @property
    def headers(self) -> dict[str, str]:
        return self.traces.headers

    @property
    def export_timeout(self) -> float:
        return self.traces.timeout

    @property
    def compression(self) -> str | None:
        return self.traces.compression

    @property
    def tls(self) -> TlsSettings:
        return self.traces.tls

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
    """Explicit arguments beat OTEL_* variables, which beat defaults. The traces' exporter
    settings are `cafe_otel._config.signal.resolve_signal("traces", ...)`; the metrics' are
    resolved by the same function (`cafe_otel._config.metrics`)."""
    env = os.environ if environ is None else environ
    resource = parse_key_values(env.get(v.OTEL_RESOURCE_ATTRIBUTES), v.OTEL_RESOURCE_ATTRIBUTES)
    named = first(env, v.OTEL_SERVICE_NAME)
    name = service_name or (named[1] if named else None) or resource.get(sc.SERVICE_NAME) or DEFAULT_SERVICE_NAME
    options = OTLPOptions(endpoint=endpoint, protocol=protocol, headers=headers, timeout=export_timeout)
    traces = resolve_signal("traces", env, options)
    capture = capture_mode(capture_content, env)
    logs = resolve_signal("logs", env, options) if capture.on_event else None
    check_unoffered_choices(env)
    check_limits(env)  # the SDK's span limits: refused here, before any provider is built
    return Settings(
        service_name=name,
        resource_attributes=resource,
        traces=traces,
        capture=capture,
        disabled=boolean(env, v.OTEL_SDK_DISABLED),
        options=options,
        logs=logs,
    )


# Variables of the specification whose other choices cafe does not offer: spans leave over
# OTLP only. Any other value is refused, not ignored: it would not do what it says. (The
# sampler variables are read by cafe_otel._config.sampling.)
_OFFERED = {
    v.OTEL_TRACES_EXPORTER: (("otlp", "console"),
                             "spans leave over OTLP, or on stdout with console; for none, leave --otlp and "
                             f"{v.otlp_variable(v.ENDPOINT)} unset or set {v.OTEL_SDK_DISABLED}=true"),
}


def check_unoffered_choices(env: Mapping[str, str]) -> None:
    for variable, (offered, why) in _OFFERED.items():
        raw = env.get(variable, "")
        if raw.strip() and raw.strip().lower() not in offered:
            raise TelemetryConfigError(f"{variable}: {shown(raw, 30)} is not offered ({why})")


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
    source: str = "{} argument",
) -> BatchSettings:
    """Explicit arguments, else OTEL_BSP_* (the delay in milliseconds there), else defaults.
    An explicit argument's error names it as `source` formats its name."""
    env = os.environ if environ is None else environ

    def whole(explicit: int | None, variable: str, default: int, high: int, what: str = "") -> int:
        if explicit is not None:
            return whole_in_range(explicit, source.format(variable.removeprefix(v.OTEL_BSP).lower()),
                                  high, what)
        found = first(env, variable)
        return default if found is None else whole_in_range(found[1], variable, high, what)

    queue = whole(max_queue_size, v.OTEL_BSP_MAX_QUEUE_SIZE, DEFAULT_MAX_QUEUE_SIZE, MAX_QUEUE_SIZE)
    batch = whole(max_export_batch_size, v.OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
                  min(DEFAULT_MAX_EXPORT_BATCH_SIZE, queue), queue, " (at most the queue size)")
    if schedule_delay is not None:
        delay = seconds_in_range(schedule_delay, source.format("schedule_delay"))
    else:
        found = first(env, v.OTEL_BSP_SCHEDULE_DELAY)
        delay = DEFAULT_SCHEDULE_DELAY if found is None else millis_in_range(found[1], v.OTEL_BSP_SCHEDULE_DELAY)
    return BatchSettings(queue, batch, delay,
                         seconds_in_range(shutdown_timeout, source.format("shutdown_timeout"), low_inclusive=True))

