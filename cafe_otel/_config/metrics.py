"""Settings of the metrics signal: explicit arguments beat `OTEL_*` variables, which beat defaults.

- `OTEL_METRICS_EXPORTER`: `otlp` (default) or `none` (no MeterProvider at all). The
  specification's other values (`console`, `prometheus`) are not offered here: an unknown
  value is a configuration error, never a silent no-op.
- `OTEL_METRIC_EXPORT_INTERVAL` (ms, default 60000): how often the periodic reader
  exports; a shift shorter than that exports its metrics once, at shutdown.
- `OTEL_METRIC_EXPORT_TIMEOUT` (ms): one metric export's bound; default the metrics exporter's
  timeout (`OTEL_EXPORTER_OTLP_(METRICS_)TIMEOUT`).
- The exporter's endpoint, protocol, headers, timeout, compression and TLS are resolved as the
  traces' are, by the same function (`cafe_otel._config.signal.resolve_signal("metrics", ...)`):
  an explicit argument, else the `OTEL_EXPORTER_OTLP_METRICS_*` variable, else the general
  `OTEL_EXPORTER_OTLP_*` one. A `TRACES_` variable never applies to metrics.
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

from cafe_otel._config import variables as v
from cafe_otel._config.parse import TelemetryConfigError, display_endpoint, millis_in_range, seconds_in_range
from cafe_otel._config.signal import NO_OPTIONS, OTLPOptions, SignalConfig, resolve_signal
from cafe_otel._config.tls import TlsSettings

OTLP, NONE = "otlp", "none"
DEFAULT_EXPORT_INTERVAL = 60.0  # seconds: the specification's 60000 ms


@dataclass(frozen=True)
class MetricSettings:
    exporter: SignalConfig  # the metrics' own OTLP exporter settings
    export_interval: float  # seconds
    export_timeout: float  # seconds: one export's bound (OTEL_METRIC_EXPORT_TIMEOUT, else the exporter's)
    temporality: str = "cumulative"  # one of TEMPORALITIES
    histogram_aggregation: str = "explicit_bucket_histogram"  # one of HISTOGRAM_AGGREGATIONS

    @property
    def endpoint(self) -> str:
        return self.exporter.endpoint

    @property
    def headers(self) -> dict[str, str]:
        return self.exporter.headers

    @property
    def protocol(self) -> str:
        return self.exporter.protocol

    @property
    def compression(self) -> str | None:
        return self.exporter.compression

    @property
    def tls(self) -> TlsSettings:
        return self.exporter.tls

    def __repr__(self) -> str:
        return (f"MetricSettings(protocol={self.protocol!r}, endpoint={display_endpoint(self.endpoint)!r}, "
                f"headers={sorted(self.headers)!r}, "
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
    raw = env.get(v.OTEL_METRICS_EXPORTER, "").strip().lower()
    if raw in ("", OTLP):
        return True
    if raw == NONE:
        return False
    raise TelemetryConfigError(f"{v.OTEL_METRICS_EXPORTER}: {raw[:20]!r} is not otlp or none")


def _millis(env: Mapping[str, str], variable: str) -> float | None:
    raw = env.get(variable, "").strip()
    if not raw:
        return None
    return millis_in_range(raw, variable)


TEMPORALITY_VARIABLE = v.OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE
TEMPORALITIES = ("cumulative", "delta", "lowmemory")
HISTOGRAM_VARIABLE = v.OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION
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
    options: OTLPOptions = NO_OPTIONS,
    *,
    export_interval: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> MetricSettings:
    """`options`: the explicit exporter arguments `configure` was given (they apply to both
    signals, as `Settings.options` keeps them); the rest is the metrics' own variables, else
    the general ones."""
    env = os.environ if environ is None else environ
    _check_sdk_choices(env)
    exporter = resolve_signal("metrics", env, options)
    if export_interval is not None:
        interval = seconds_in_range(export_interval, "metric export_interval argument")
    else:
        interval = _millis(env, v.OTEL_METRIC_EXPORT_INTERVAL) or DEFAULT_EXPORT_INTERVAL
    return MetricSettings(
        exporter=exporter,
        export_interval=interval,
        export_timeout=_millis(env, v.OTEL_METRIC_EXPORT_TIMEOUT) or exporter.timeout,
        temporality=(env.get(TEMPORALITY_VARIABLE) or "cumulative").strip().lower(),
        histogram_aggregation=env.get(HISTOGRAM_VARIABLE) or "explicit_bucket_histogram",
    )
