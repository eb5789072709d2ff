"""`build_exporter(signal, config)`: the SDK's OTLP exporter for one signal, over gRPC or
HTTP, built from that signal's resolved settings (`cafe_otel._config.signal.SignalConfig`).

Every argument is passed explicitly: the SDK's exporters read `os.environ` for any left
None, and the settings were resolved from the environ `configure()` was handed. The headers
are set again once the exporter is built: the OTLP/HTTP exporter adds the process's
`OTEL_EXPORTER_OTLP_(SIGNAL_)HEADERS` to the ones it is handed, and the gRPC one reads them
when it is handed none, so a credential the resolved settings leave out (another signal's,
one outside the environ handed in, one an explicit `headers` replaces) would be sent. Over
OTLP/HTTP the exporter is handed a `requests.Session` of ours, so that `rejections` can read
each answer for items rejected in a 2xx (`cafe_otel._export.partial_success`; over gRPC
through the exporter's stub) and `attempts` can count its attempts at the transport
(`cafe_otel._export.attempts`; over gRPC through the exporter's stub too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, overload

from opentelemetry.sdk.metrics.export import AggregationTemporality, MetricExporter
from opentelemetry.sdk.metrics.view import Aggregation
from opentelemetry.sdk.trace.export import SpanExporter

from cafe_otel._config.parse import GRPC, display_endpoint
from cafe_otel._config.signal import SignalConfig
from cafe_otel._config.variables import Signal
from cafe_otel._export.attempts import AttemptLog, watch_grpc_exporter, watch_http_session
from cafe_otel._export.grpc_extra import grpc_exporter
from cafe_otel._export.partial_success import RejectionCounter, watch_grpc_answers

if TYPE_CHECKING:
    from opentelemetry.sdk._logs.export import LogRecordExporter

# The SDK's module and class names of each signal's exporter.
_MODULES: dict[Signal, str] = {"traces": "trace", "metrics": "metric", "logs": "_log"}
_CLASSES: dict[Signal, str] = {"traces": "OTLPSpanExporter", "metrics": "OTLPMetricExporter",
                               "logs": "OTLPLogExporter"}


def export_target(config: SignalConfig) -> str:
    """How error texts name where a signal's exporter sends: "grpc http://host:4317"."""
    return f"{config.protocol} {display_endpoint(config.endpoint)}"


@overload
def build_exporter(signal: Literal["traces"], config: SignalConfig, *, timeout: float | None = None,
                   rejections: RejectionCounter | None = None,
                   attempts: AttemptLog | None = None) -> SpanExporter: ...


@overload
def build_exporter(signal: Literal["logs"], config: SignalConfig, *, timeout: float | None = None,
                   rejections: RejectionCounter | None = None,
                   attempts: AttemptLog | None = None) -> LogRecordExporter: ...


@overload
def build_exporter(signal: Literal["metrics"], config: SignalConfig, *, timeout: float | None = None,
                   preferred_temporality: dict[type, AggregationTemporality],
                   preferred_aggregation: dict[type, Aggregation],
                   rejections: RejectionCounter | None = None,
                   attempts: AttemptLog | None = None) -> MetricExporter: ...


def build_exporter(signal: Signal, config: SignalConfig, *, timeout: float | None = None,
                   preferred_temporality: dict[type, AggregationTemporality] | None = None,
                   preferred_aggregation: dict[type, Aggregation] | None = None,
                   rejections: RejectionCounter | None = None,
                   attempts: AttemptLog | None = None) -> SpanExporter | MetricExporter | LogRecordExporter:
    """`signal`'s OTLP exporter, sending as `config` says. `timeout` (seconds) replaces the
    config's (a metric export has a bound of its own, `OTEL_METRIC_EXPORT_TIMEOUT`); a metric
    exporter is given its preferred temporality and aggregation too (left None, the SDK would
    read them from `os.environ`)."""
    if config.signal != signal:
        raise ValueError(f"{signal} exporter built from the {config.signal} settings")
    extra: dict[str, Any] = {}
    if signal == "metrics":
        if preferred_temporality is None or preferred_aggregation is None:
            raise ValueError("a metric exporter needs its preferred temporality and aggregation")
        extra = {"preferred_temporality": preferred_temporality, "preferred_aggregation": preferred_aggregation}
    seconds = config.timeout if timeout is None else timeout
    tls = config.tls
    if config.protocol == GRPC:
        grpc, module = grpc_exporter(_MODULES[signal])
        insecure = tls.grpc_insecure(config.endpoint)
        exporter = getattr(module, _CLASSES[signal])(
            endpoint=config.endpoint,
            insecure=insecure,
            credentials=None if insecure else tls.grpc_credentials(),
            headers=config.headers or None,
            timeout=seconds,
            compression=grpc.Compression.Gzip if config.compression == "gzip" else grpc.Compression.NoCompression,
            **extra,
        )
        exporter._headers = tuple(config.headers.items())  # what it sends as metadata, nothing else
        if rejections is not None:
            watch_grpc_answers(exporter, rejections)
        if attempts is not None:
            watch_grpc_exporter(exporter, attempts)
        return exporter  # type: ignore[no-any-return]
    import importlib

    import requests
    from opentelemetry.exporter.otlp.proto.http import _OTLP_HTTP_HEADERS, Compression

    module = importlib.import_module(f"opentelemetry.exporter.otlp.proto.http.{_MODULES[signal]}_exporter")
    session = requests.Session()
    certificate_file, client_key_file, client_certificate_file = tls.file_arguments()
    exporter = getattr(module, _CLASSES[signal])(
        endpoint=config.endpoint,
        certificate_file=certificate_file,
        client_key_file=client_key_file,
        client_certificate_file=client_certificate_file,
        headers=config.headers,
        timeout=seconds,
        compression=Compression.Gzip if config.compression == "gzip" else Compression.NoCompression,
        session=session,
        **extra,
    )
    tls.set_on(session)
    client = exporter._client
    # The exporter's own headers, the resolved ones, and the encoding its compression writes.
    sent = {**{name.lower(): value for name, value in _OTLP_HTTP_HEADERS.items()}, **config.headers}
    if config.compression == "gzip":
        sent["Content-Encoding"] = client._compression.value
    client._headers = sent
    if rejections is not None:
        rejections.attach(session)
    if attempts is not None:
        watch_http_session(session, attempts)
    return exporter  # type: ignore[no-any-return]
