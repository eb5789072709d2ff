"""Settings of the metrics signal: explicit arguments beat `OTEL_*` variables, which beat defaults.

- `OTEL_METRICS_EXPORTER`: `otlp` (default) or `none` (no MeterProvider at all). The
  specification's other values (`console`, `prometheus`) are not offered here: an unknown
  value is a configuration error, never a silent no-op.
- `OTEL_METRIC_EXPORT_INTERVAL` (ms, default 60000): how often the periodic reader
  exports; a shift shorter than that exports its metrics once, at shutdown.
- `OTEL_METRIC_EXPORT_TIMEOUT` (ms): one metric export's bound; default the traces' timeout.
- Endpoint: `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` (a full URL, used as is), else the base the
  traces use (an explicit endpoint argument or `OTEL_EXPORTER_OTLP_ENDPOINT`), to which OTLP/HTTP
  appends `/v1/metrics`. Protocol, headers and compression are the traces' unless
  `OTEL_EXPORTER_OTLP_METRICS_HEADERS` is set.
- `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE` (`cumulative`, `delta`, `lowmemory`) and
  `OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION` (`explicit_bucket_histogram`,
  `base2_exponential_bucket_histogram`) are read here, from the same environment as the rest,
  and handed to the OTLP exporter in full (left to it, it would read `os.environ`); any other
  value is a configuration error (the SDK would print its own warning and use the default).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from opentelemetry.sdk.metrics import (
    Counter,
    Histogram,
    ObservableCounter,
    ObservableGauge,
    ObservableUpDownCounter,
    UpDownCounter,
)
from opentelemetry.sdk.metrics.export import AggregationTemporality
from opentelemetry.sdk.metrics.view import (
    Aggregation,
    ExplicitBucketHistogramAggregation,
    ExponentialBucketHistogramAggregation,
)

from cafe_otel.settings import (
    HTTP,
    HTTP_TRACES_PATH,
    Settings,
    TelemetryConfigError,
    check_endpoint,
    display_endpoint,
    millis_in_range,
    parse_key_values,
    seconds_in_range,
)

OTLP, NONE = "otlp", "none"
HTTP_METRICS_PATH = "/v1/metrics"
DEFAULT_EXPORT_INTERVAL = 60.0  # seconds: the specification's 60000 ms


@dataclass(frozen=True)
class MetricSettings:
    endpoint: str
    headers: dict[str, str]
    export_interval: float  # seconds
    export_timeout: float  # seconds
    temporality: str = "cumulative"  # one of TEMPORALITIES
    histogram_aggregation: str = "explicit_bucket_histogram"  # one of HISTOGRAM_AGGREGATIONS

    def __repr__(self) -> str:
        return (f"MetricSettings(endpoint={display_endpoint(self.endpoint)!r}, headers={sorted(self.headers)!r}, "
                f"export_interval={self.export_interval}, export_timeout={self.export_timeout}, "
                f"temporality={self.temporality!r}, histogram_aggregation={self.histogram_aggregation!r})")

    def preferred_temporality(self) -> dict[type, AggregationTemporality]:
        """Every instrument's temporality, as the specification's preference names them."""
        delta, cumulative = AggregationTemporality.DELTA, AggregationTemporality.CUMULATIVE
        summed = delta if self.temporality in ("delta", "lowmemory") else cumulative
        return {Counter: summed, Histogram: summed, UpDownCounter: cumulative,
                ObservableCounter: delta if self.temporality == "delta" else cumulative,
                ObservableUpDownCounter: cumulative, ObservableGauge: cumulative}

    def preferred_aggregation(self) -> dict[type, Aggregation]:
        exponential = self.histogram_aggregation == "base2_exponential_bucket_histogram"
        return {Histogram: ExponentialBucketHistogramAggregation() if exponential
                else ExplicitBucketHistogramAggregation()}


def metrics_wanted(explicit: bool | None, environ: Mapping[str, str] | None = None) -> bool:
    """`explicit` wins; else `OTEL_METRICS_EXPORTER` (`otlp` by default, or `none`)."""
    if explicit is not None:
        return explicit
    env = os.environ if environ is None else environ
    raw = env.get("OTEL_METRICS_EXPORTER", "").strip().lower()
    if raw in ("", OTLP):
        return True
    if raw == NONE:
        return False
    raise TelemetryConfigError(f"OTEL_METRICS_EXPORTER: {raw[:20]!r} is not otlp or none")


def _millis(env: Mapping[str, str], variable: str) -> float | None:
    raw = env.get(variable, "").strip()
    if not raw:
        return None
    return millis_in_range(raw, variable)


def _metrics_endpoint(traces: Settings, explicit_endpoint: str | None, env: Mapping[str, str]) -> str:
    signal = env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "").strip()
    if explicit_endpoint is None and signal:
        return check_endpoint(signal, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
    url = traces.endpoint
    if traces.protocol != HTTP:
        return url
    path = urlsplit(url).path
    if path.endswith(HTTP_TRACES_PATH):  # the traces' base with their path appended
        return url[: len(url) - len(HTTP_TRACES_PATH)] + HTTP_METRICS_PATH
    if path in ("", "/"):
        return url.rstrip("/") + HTTP_METRICS_PATH
    return url  # an explicit path of the user's own: both signals go there


TEMPORALITY_VARIABLE = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"
TEMPORALITIES = ("cumulative", "delta", "lowmemory")
HISTOGRAM_VARIABLE = "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"
HISTOGRAM_AGGREGATIONS = ("explicit_bucket_histogram", "base2_exponential_bucket_histogram")


def _check_sdk_choices(env: Mapping[str, str]) -> None:
    # As the SDK compares them: the temporality stripped and in any case, the aggregation exactly.
    temporality = env.get(TEMPORALITY_VARIABLE)
    if temporality is not None and temporality.strip().lower() not in TEMPORALITIES:
        raise TelemetryConfigError(f"{TEMPORALITY_VARIABLE}: {temporality[:20]!r} is not "
                                   + ", ".join(TEMPORALITIES[:-1]) + f" or {TEMPORALITIES[-1]}")
    aggregation = env.get(HISTOGRAM_VARIABLE)
    if aggregation is not None and aggregation not in HISTOGRAM_AGGREGATIONS:
        raise TelemetryConfigError(f"{HISTOGRAM_VARIABLE}: {aggregation[:40]!r} is not "
                                   + " or ".join(HISTOGRAM_AGGREGATIONS))


def resolve_metric_settings(
    traces: Settings,
    *,
    endpoint: str | None = None,
    export_interval: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> MetricSettings:
    """`traces` is the resolved span settings (protocol, headers and base endpoint are shared);
    `endpoint` the explicit endpoint argument `configure` was given, if any."""
    env = os.environ if environ is None else environ
    _check_sdk_choices(env)
    if export_interval is not None:
        interval = seconds_in_range(export_interval, "metric export_interval argument")
    else:
        interval = _millis(env, "OTEL_METRIC_EXPORT_INTERVAL") or DEFAULT_EXPORT_INTERVAL
    timeout = _millis(env, "OTEL_METRIC_EXPORT_TIMEOUT") or traces.export_timeout
    raw_headers = env.get("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "").strip()
    headers = (parse_key_values(raw_headers, "OTEL_EXPORTER_OTLP_METRICS_HEADERS") if raw_headers
               else dict(traces.headers))
    return MetricSettings(
        endpoint=_metrics_endpoint(traces, endpoint, env),
        headers=headers,
        export_interval=interval,
        export_timeout=timeout,
        temporality=(env.get(TEMPORALITY_VARIABLE) or "cumulative").strip().lower(),
        histogram_aggregation=env.get(HISTOGRAM_VARIABLE) or "explicit_bucket_histogram",
    )
