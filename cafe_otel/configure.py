"""`configure(...)`: one call from settings to a provider, a processor chain and a handle.

Chain: MetadataOnlySpanProcessor -> BoundedBatchSpanProcessor -> FailSoftSpanExporter ->
OTLP exporter (gRPC or HTTP) or the explicit `exporter`. Settings come from explicit
arguments first, then the `OTEL_*` variables of `environ` (os.environ at call time), then
defaults. Nothing global is touched: no `set_tracer_provider`, the provider is on the handle.

OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT is read in MILLISECONDS, as the specification says
(the Python OTLP exporters read it in seconds; we pass them an explicit timeout, so their
reading never applies). The explicit `export_timeout` argument is in seconds.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased
from opentelemetry.sdk.version import __version__ as SDK_VERSION

from cafe.errors import ConfigurationError
from cafe.trace.clock import Clock
from cafe.trace.tracer import Tracer
from cafe_otel import semconv as sc
from cafe_otel.account import TelemetryAccount
from cafe_otel.batch import BoundedBatchSpanProcessor
from cafe_otel.content import CaptureMode, capture_mode
from cafe_otel.failsoft import FailSoftSpanExporter
from cafe_otel.metadata_processor import MetadataOnlySpanProcessor
from cafe_otel.tracer import OTelTracer

DEFAULT_SERVICE_NAME = "cafe"
GRPC, HTTP = "grpc", "http/protobuf"
DEFAULT_PROTOCOL = GRPC  # what the Python distro defaults to; the collector's 4317
DEFAULT_ENDPOINTS = {GRPC: "http://localhost:4317", HTTP: "http://localhost:4318"}
HTTP_TRACES_PATH = "/v1/traces"
DEFAULT_EXPORT_TIMEOUT = 5.0
# How long a process waits for the collector when it exits. Short on purpose: buffering
# and retry belong to the Collector next to the service (collector-config/), not to the
# request path; a process handing spans to a local Collector needs milliseconds, and a
# dead one must not hold the exit (the stock SDK waits 7-30 s). What is left is counted.
DEFAULT_SHUTDOWN_TIMEOUT = 0.5


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


def _batch_setting(explicit: int | None, env: Mapping[str, str], variable: str, default: int) -> int:
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


def build_resource(settings: Settings, *, replay: bool) -> Resource:
    """Built directly with `Resource(...)`: `Resource.create()` reads os.environ and adds a
    random service.instance.id. A replay gets no random part; a live run gets an instance id."""
    attributes: dict[str, Any] = {
        "telemetry.sdk.language": "python",
        "telemetry.sdk.name": "opentelemetry",
        "telemetry.sdk.version": SDK_VERSION,
        **settings.resource_attributes,
        sc.SERVICE_NAME: settings.service_name,
    }
    if not replay:
        attributes.setdefault(sc.SERVICE_INSTANCE_ID, str(uuid.uuid4()))
    return Resource(attributes)


def build_otlp_exporter(settings: Settings) -> SpanExporter:
    # Every argument is passed explicitly: the exporters read os.environ for any left None.
    if settings.protocol == GRPC:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            Compression as GrpcCompression,
        )
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        parts = urlsplit(settings.endpoint)
        return OTLPSpanExporter(
            endpoint=settings.endpoint,
            insecure=parts.scheme != "https",
            headers=settings.headers or None,
            timeout=settings.export_timeout,
            compression=GrpcCompression.Gzip if settings.compression == "gzip" else GrpcCompression.NoCompression,
        )
    from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    return HttpExporter(
        endpoint=settings.endpoint,
        headers=settings.headers,
        timeout=settings.export_timeout,
        compression=HttpCompression.Gzip if settings.compression == "gzip" else HttpCompression.NoCompression,
    )


@dataclass
class TelemetryHandle:
    """What `configure` returns: make tracers, read the account, flush and shut down."""

    provider: TracerProvider | None
    account: TelemetryAccount
    settings: Settings | None = None
    replay: bool = False
    _batch: BoundedBatchSpanProcessor | None = field(default=None, repr=False)
    _closed: bool = field(default=False, repr=False)

    @property
    def enabled(self) -> bool:
        return self.provider is not None

    def tracer(self, clock: Clock | None = None, *, origin_unix_nano: int | None = None) -> Tracer:
        """A fresh tracer for one shift (a tracer holds one shift's tree)."""
        if self.provider is None:
            return Tracer(clock=clock)
        return OTelTracer(self.provider, clock=clock, origin_unix_nano=origin_unix_nano,
                          capture_content=self.settings.capture if self.settings else None,
                          account=self.account)

    def force_flush(self, timeout: float = DEFAULT_SHUTDOWN_TIMEOUT) -> bool:
        if self.provider is None:
            return True
        return self.provider.force_flush(int(timeout * 1000))

    def shutdown(self, timeout: float | None = None) -> float:
        """Flush and shut down within `timeout` seconds (default: configure's
        `shutdown_timeout`); returns the seconds it took. A dead collector costs at most
        the bound (the stock SDK waits 7-30 s)."""
        started = time.monotonic()
        if self.provider is None or self._closed:
            return 0.0
        self._closed = True
        if self._batch is not None:
            self._batch.shutdown(timeout=timeout)
        # Everything below is already shut down; this only marks the provider closed.
        self.provider.shutdown()
        return time.monotonic() - started


def configure(
    service_name: str | None = None,
    *,
    endpoint: str | None = None,
    protocol: str | None = None,
    headers: Mapping[str, str] | None = None,
    export_timeout: float | None = None,
    capture_content: CaptureMode | str | bool | None = None,
    replay: bool = False,
    id_generator: IdGenerator | None = None,
    exporter: SpanExporter | None = None,
    metadata_only: bool = True,
    resource: Resource | None = None,
    max_queue_size: int | None = None,
    max_export_batch_size: int | None = None,
    schedule_delay: float | None = None,
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
    extra_processors: tuple[SpanProcessor, ...] = (),
    environ: Mapping[str, str] | None = None,
) -> TelemetryHandle:
    """Build the provider and chain. `OTEL_SDK_DISABLED=true` gives a no-op handle whose
    tracer is a plain cafe `Tracer` and whose shutdown returns at once."""
    settings = resolve_settings(
        service_name=service_name, endpoint=endpoint, protocol=protocol, headers=headers,
        export_timeout=export_timeout, capture_content=capture_content, environ=environ,
    )
    account = TelemetryAccount()
    if settings.disabled:
        return TelemetryHandle(provider=None, account=account, settings=settings, replay=replay)
    inner = exporter if exporter is not None else build_otlp_exporter(settings)
    target = (f"{settings.protocol} {display_endpoint(settings.endpoint)}" if exporter is None
              else type(exporter).__name__)
    fail_soft = FailSoftSpanExporter(inner, export_timeout=settings.export_timeout,
                                     account=account, target=target)
    env = os.environ if environ is None else environ
    batch = BoundedBatchSpanProcessor(
        fail_soft, account=account,
        max_queue_size=_batch_setting(max_queue_size, env, "OTEL_BSP_MAX_QUEUE_SIZE", 2048),
        max_export_batch_size=_batch_setting(max_export_batch_size, env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512),
        schedule_delay=(schedule_delay if schedule_delay is not None
                        else _batch_setting(None, env, "OTEL_BSP_SCHEDULE_DELAY", 1000) / 1000),
        shutdown_timeout=shutdown_timeout,
    )
    # Content capture is an explicit opt-in, so its keys may pass; nothing else unlisted does.
    allowlist = sc.METADATA_ALLOWLIST | (sc.CONTENT_ATTRIBUTES if settings.capture.enabled else frozenset())
    first: SpanProcessor = (MetadataOnlySpanProcessor(batch, allowlist=allowlist, account=account)
                            if metadata_only else batch)
    provider = TracerProvider(
        resource=resource if resource is not None else build_resource(settings, replay=replay),
        id_generator=id_generator,
        sampler=ParentBased(ALWAYS_ON),  # explicit: the default reads os.environ
        # Our handle's shutdown is the bounded one; at exit the provider's hook finds
        # everything already closed, or closes it within the batch processor's bound.
        shutdown_on_exit=True,
    )
    for processor in extra_processors:
        provider.add_span_processor(processor)
    provider.add_span_processor(first)
    return TelemetryHandle(provider=provider, account=account, settings=settings, replay=replay,
                           _batch=batch)
