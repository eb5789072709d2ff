"""Metric points that may leave: the same allowlist, shapes and secret checks as a span's.

Our own metrics are shaped where they are recorded (`MetricsListener`), but anyone else's
instruments on the handle's MeterProvider (an application's counter, a third-party
instrumentation's histograms) are aggregated by the SDK under whatever attributes they were
given. So every export's `MetricsData` passes `MetricsSanitiser` before it is encoded, on the
metrics reader's thread (never on the thread that recorded):

- the resource without a secret (`cafe_otel._privacy.resource`), the instrumentation scope
  shaped and checked as a span's;
- a metric whose name holds a secret is left out; a description or unit holding one is
  removed;
- each point's attributes as a span's (`SpanSanitiser.attributes`): keys on the metadata
  allowlist (content keys never), each value of its key's shape and holding no secret, or it
  is left off the point (an identifier that does not fit becomes its keyed hash, as on a
  span). Points of one metric whose attributes are then the same are merged (sums added, the
  latest gauge kept, histograms of the same bounds added): no two points of a metric may
  carry the same attributes. Exemplars are dropped (they tie a point to a trace and carry
  attributes of their own; the provider records none).

What is left off is counted in the account once per distinct attribute set (a cumulative
point is exported again every interval, with the same attributes), by key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from opentelemetry.sdk.metrics.export import (
    Gauge,
    HistogramDataPoint,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
)

from cafe.privacy import Scrubber
from cafe_otel._export.account import TelemetryAccount
from cafe_otel._privacy import shapes as sh
from cafe_otel._privacy.processor import SpanSanitiser
from cafe_otel.semconv import CONTENT_ATTRIBUTES, METADATA_ALLOWLIST, METRIC_ATTRIBUTES

_MEMO_SIZE = 4096  # distinct attribute sets remembered with their checked form
_Key = tuple[tuple[str, Any], ...]


def _hashable(attributes: Mapping[str, Any]) -> _Key:
    return tuple(sorted((key, tuple(value) if isinstance(value, list) else value)
                        for key, value in attributes.items()))


def _merge_two(kept: Any, other: Any, data: Any) -> Any | None:
    """One point for two of a metric with the same attributes, or None when they cannot be
    merged (histograms of other bounds, exponential histograms): both are then kept."""
    if isinstance(kept, NumberDataPoint) and isinstance(other, NumberDataPoint):
        if isinstance(data, Gauge):
            return other if other.time_unix_nano >= kept.time_unix_nano else kept
        return replace(kept, value=kept.value + other.value,
                       start_time_unix_nano=min(kept.start_time_unix_nano, other.start_time_unix_nano),
                       time_unix_nano=max(kept.time_unix_nano, other.time_unix_nano))
    if (isinstance(kept, HistogramDataPoint) and isinstance(other, HistogramDataPoint)
            and list(kept.explicit_bounds) == list(other.explicit_bounds)
            and len(kept.bucket_counts) == len(other.bucket_counts)):
        return replace(kept, count=kept.count + other.count, sum=kept.sum + other.sum,
                       bucket_counts=[a + b for a, b in zip(kept.bucket_counts, other.bucket_counts, strict=True)],
                       min=min(kept.min, other.min), max=max(kept.max, other.max),
                       start_time_unix_nano=min(kept.start_time_unix_nano, other.start_time_unix_nano),
                       time_unix_nano=max(kept.time_unix_nano, other.time_unix_nano))
    return None


def _merged(points: list[Any], data: Any) -> list[Any]:
    """`points` with those of the same attributes merged, in the order first seen."""
    by_key: dict[_Key, list[Any]] = {}
    for point in points:
        same = by_key.setdefault(_hashable(point.attributes or {}), [])
        for index, kept in enumerate(same):
            merged = _merge_two(kept, point, data)
            if merged is not None:
                same[index] = merged
                break
        else:
            same.append(point)
    return [point for same in by_key.values() for point in same]


class MetricsSanitiser:
    """`sanitiser(metrics_data)`: the data itself when nothing in it needs changing, else a
    copy that may leave. `allowed` and `shapes` are a span's and our metrics' keys (the
    caller's own among them); content keys are never allowed on a point."""

    def __init__(self, allowed: Iterable[str] = METADATA_ALLOWLIST | METRIC_ATTRIBUTES, *,
                 shapes: Mapping[str, sh.Shape] = sh.SHAPES, account: TelemetryAccount | None = None,
                 secrets: Iterable[str] = (), secret_patterns: Scrubber | None = None,
                 hash_key: bytes | None = None) -> None:
        self._account = account
        self._allowed = frozenset(allowed) - CONTENT_ATTRIBUTES
        # Counted here, once per metric and distinct attribute set: the guard counts nothing.
        self._guard = SpanSanitiser(self._allowed, shapes=shapes, secrets=secrets,
                                    secret_patterns=secret_patterns, hash_key=hash_key)
        self._checked: dict[tuple[str, _Key], tuple[dict[str, Any] | None, tuple[str, ...]]] = {}
        self._left_out = 0

    def add_secrets(self, secrets: Iterable[str]) -> None:
        """Values (a live client's key) no exported point, scope or resource may hold."""
        self._guard.add_secrets(secrets)
        self._checked = {}  # what was clean may hold one of them

    def _withhold(self, what: str) -> None:
        if self._account is not None:
            self._account.add_withheld(what)

    def attributes(self, metric: str, attributes: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The attributes of a point of `metric` that may leave, or None when that is all of them."""
        if not attributes:
            return None
        try:
            key = (metric, _hashable(attributes))
        except TypeError:  # an unhashable value: checked every time, counted every time
            kept = self._guard.attributes(attributes)
            for name in self._left_off(attributes, kept):
                self._withhold(name)
            return kept
        found = self._checked.get(key)
        if found is None:
            kept = self._guard.attributes(attributes)
            found = (kept, self._left_off(attributes, kept))
            if len(self._checked) >= _MEMO_SIZE:
                self._checked = {}
            self._checked[key] = found
            for name in found[1]:
                self._withhold(name)
        return found[0]

    def _left_off(self, raw: Mapping[str, Any], kept: Mapping[str, Any] | None) -> tuple[str, ...]:
        """The allowlisted keys whose value was withheld or replaced (a key off the allowlist
        is removed, as from a span, and not counted)."""
        if kept is None:
            return ()
        return tuple(key for key, value in raw.items()
                     if key in self._allowed and (key not in kept or kept[key] is not value))

    def _text(self, text: str | None) -> bool:
        """Whether an instrument's own text (its name, description or unit) holds a secret."""
        return bool(text) and self._guard.holds_secret(text)

    def _metric(self, metric: Metric) -> Metric | None:
        if self._text(metric.name):
            self._withhold("metric.name")
            self._left_out += len(metric.data.data_points)
            return None
        description, unit = metric.description, metric.unit
        if self._text(description):
            self._withhold("metric.description")
            description = ""
        if self._text(unit):
            self._withhold("metric.unit")
            unit = ""
        data: Any = metric.data  # Sum, Gauge, Histogram or ExponentialHistogram: all have data_points
        points: list[Any] = list(data.data_points)
        changed = False
        for index, point in enumerate(points):
            attributes = self.attributes(metric.name, point.attributes)
            if attributes is not None or point.exemplars:
                points[index] = replace(point, attributes=attributes if attributes is not None else point.attributes,
                                        exemplars=[])
                changed = True
        if changed:
            data = replace(data, data_points=_merged(points, data))
        if data is metric.data and (description, unit) == (metric.description, metric.unit):
            return metric
        return Metric(name=metric.name, description=description, unit=unit, data=data)

    def _scope_metrics(self, found: ScopeMetrics) -> ScopeMetrics:
        scope = self._guard.scope(found.scope) or found.scope
        if scope is not found.scope:
            self._withhold("scope")
        metrics: list[Metric] = []
        changed = scope is not found.scope
        for metric in found.metrics:
            clean = self._metric(metric)
            changed |= clean is not metric
            if clean is not None:
                metrics.append(clean)
        if not changed:
            return found
        # A scope whose schema URL was removed takes its scope metrics' with it.
        schema_url = found.schema_url if scope.schema_url == found.scope.schema_url else (scope.schema_url or "")
        return ScopeMetrics(scope=scope, metrics=metrics, schema_url=schema_url)

    def __call__(self, metrics_data: MetricsData) -> MetricsData:
        return self.check(metrics_data)[0]

    def check(self, metrics_data: MetricsData) -> tuple[MetricsData, int]:
        """(the data that may leave, how many of its points were left out with their metric).
        Points merged into one are not left out: their values leave in the one."""
        with self._guard.lock:
            self._left_out = 0
            return self._sanitise(metrics_data), self._left_out

    def _sanitise(self, metrics_data: MetricsData) -> MetricsData:
        resource_metrics: list[ResourceMetrics] = []
        changed = False
        for found in metrics_data.resource_metrics:
            resource = self._guard.resource(found.resource)
            if resource is not found.resource:
                self._withhold("resource")
            scopes = [self._scope_metrics(scope_metrics) for scope_metrics in found.scope_metrics]
            if resource is found.resource and all(
                    clean is old for clean, old in zip(scopes, found.scope_metrics, strict=True)):
                resource_metrics.append(found)
                continue
            changed = True
            resource_metrics.append(ResourceMetrics(resource=resource, scope_metrics=scopes,
                                                    schema_url=found.schema_url))
        return MetricsData(resource_metrics=resource_metrics) if changed else metrics_data

