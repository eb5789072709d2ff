"""`InProcessMetrics`: our own metric streams, aggregated where they are recorded.

The SDK's synchronous instruments clean and hash a measurement's attributes on every
record (about 20 µs here, opentelemetry-sdk 1.45), and a model call makes three (input
tokens, output tokens, duration): more than its span costs. Our streams have few, bounded
attribute sets, already shaped and known by the caller as a hashable key, so recording
one is a dictionary lookup, a bisection and a few additions under a lock. The metric
reader (`cafe_otel._metrics.reader`) turns them into the SDK's own data points at each
collection, beside whatever the MeterProvider collected, so an exporter sees one
`MetricsData`.

The semantics are the SDK's: explicit-bucket histograms (a value lands in the first
bucket whose upper bound it does not exceed), monotonic sums, cumulative or delta as the
exporter prefers (a delta collection leaves out the attribute sets that saw nothing since
the last one), and at most `CARDINALITY_LIMIT` attribute sets a stream, the rest counted
under `otel.metric.overflow=true`, as the SDK does.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Histogram,
    HistogramDataPoint,
    Metric,
    NumberDataPoint,
    Sum,
)
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

AttributeKey = tuple[tuple[str, Any], ...]  # (key, value) pairs, in the order they are exported
CARDINALITY_LIMIT = 2000  # the SDK's default per metric stream, the overflow set included
OVERFLOW: AttributeKey = (("otel.metric.overflow", True),)
HISTOGRAM, COUNTER = "histogram", "counter"
Temporality = Callable[[str], AggregationTemporality]  # by HISTOGRAM or COUNTER


class _Stream:
    kind = ""

    def __init__(self, name: str, unit: str, description: str, lock: threading.Lock | None = None) -> None:
        """`lock`: the one the stream's points are changed under (an `InProcessMetrics` gives
        all its streams one, so a model call's points in two streams take it once)."""
        self.name, self.unit, self.description = name, unit, description
        self._lock = lock if lock is not None else threading.Lock()
        self._start_ns: int | None = None  # the first record's time: a cumulative point's start
        self._last_ns: int | None = None  # the last collection's time: a delta point's start

    def _slot(self, points: dict[AttributeKey, Any], key: AttributeKey) -> AttributeKey:
        """`key`, or the overflow set once the stream holds its limit (under the lock)."""
        if self._start_ns is None:
            self._start_ns = time.time_ns()
        if key in points or len(points) < CARDINALITY_LIMIT - 1:
            return key
        return OVERFLOW

    def _window(self, temporality: AggregationTemporality, now_ns: int) -> int:
        start = self._start_ns if self._start_ns is not None else now_ns
        if temporality is AggregationTemporality.DELTA and self._last_ns is not None:
            start = self._last_ns
        self._last_ns = now_ns
        return start


class _Buckets:
    __slots__ = ("count", "counts", "high", "low", "total")

    def __init__(self, size: int) -> None:
        self.counts = [0] * size
        self.total: float = 0
        self.count = 0
        self.low = float("inf")
        self.high = float("-inf")


class HistogramStream(_Stream):
    kind = HISTOGRAM

    def __init__(self, name: str, unit: str, description: str, boundaries: Sequence[float],
                 lock: threading.Lock | None = None) -> None:
        super().__init__(name, unit, description, lock)
        self.boundaries = tuple(float(b) for b in boundaries)
        self._points: dict[AttributeKey, _Buckets] = {}
        self.epoch = 0  # counts the times the points were let go (a delta collection)

    def buckets(self, key: AttributeKey) -> _Buckets:
        """The buckets `key` records into in this epoch (under the lock): its own, or the
        overflow set's once the stream holds its limit."""
        points = self._points
        buckets = points.get(key)
        if buckets is None:
            key = self._slot(points, key)
            buckets = points.get(key)
            if buckets is None:
                buckets = points[key] = _Buckets(len(self.boundaries) + 1)
        return buckets

    def record(self, value: float, key: AttributeKey) -> None:
        index = bisect_left(self.boundaries, value)
        with self._lock:
            points = self._points
            buckets = points.get(key)
            if buckets is None:
                key = self._slot(points, key)
                buckets = points.get(key)
                if buckets is None:
                    buckets = points[key] = _Buckets(len(self.boundaries) + 1)
            buckets.counts[index] += 1
            buckets.total += value
            buckets.count += 1
            if value < buckets.low:
                buckets.low = value
            if value > buckets.high:
                buckets.high = value

    def collect(self, temporality: AggregationTemporality, now_ns: int) -> Histogram | None:
        with self._lock:
            start = self._window(temporality, now_ns)  # a delta window starts where the last ended
            if not self._points:
                return None
            points = [
                HistogramDataPoint(dict(key), start, now_ns, b.count, b.total, list(b.counts),
                                   self.boundaries, b.low, b.high)
                for key, b in self._points.items() if b.count
            ]
            if temporality is AggregationTemporality.DELTA:
                self._points = {}
                self.epoch += 1
        return Histogram(points, temporality) if points else None


class CallPoints:
    """A model call's histogram points for one set of attributes each: input and output
    tokens (one stream) and its duration (another), recorded in one call that takes the
    streams' one lock once and finds each point's buckets without a lookup (they are kept,
    and found again when a delta collection has let them go). A model call records three
    points, and each record on its own would be a call, a lock and a lookup."""

    __slots__ = ("_bounds", "_buckets", "_epochs", "_keys", "_lock", "_streams")

    def __init__(self, tokens: HistogramStream, duration: HistogramStream,
                 keys: tuple[AttributeKey, AttributeKey, AttributeKey]) -> None:
        if tokens._lock is not duration._lock:
            raise ValueError("a call's streams must share one lock (streams of one InProcessMetrics do)")
        self._lock = tokens._lock
        self._streams = (tokens, tokens, duration)
        self._bounds = (tokens.boundaries, tokens.boundaries, duration.boundaries)
        self._keys = keys
        self._buckets: list[_Buckets | None] = [None, None, None]
        self._epochs = (-1, -1)

    def record(self, input_tokens: int | None, output_tokens: int | None, duration: float | None) -> None:
        values = (input_tokens, output_tokens, duration)
        streams = self._streams
        with self._lock:
            epochs = (streams[0].epoch, streams[2].epoch)
            if epochs != self._epochs:
                self._buckets = [None, None, None]
                self._epochs = epochs
            kept = self._buckets
            for index in (0, 1, 2):
                value = values[index]
                if value is None:
                    continue
                buckets = kept[index]
                if buckets is None:
                    buckets = kept[index] = streams[index].buckets(self._keys[index])
                buckets.counts[bisect_left(self._bounds[index], value)] += 1
                buckets.total += value
                buckets.count += 1
                if value < buckets.low:
                    buckets.low = value
                if value > buckets.high:
                    buckets.high = value


class CounterStream(_Stream):
    kind = COUNTER

    def __init__(self, name: str, unit: str, description: str, lock: threading.Lock | None = None) -> None:
        super().__init__(name, unit, description, lock)
        self._values: dict[AttributeKey, int] = {}

    def add(self, amount: int, key: AttributeKey = ()) -> None:
        if amount < 0:  # a monotonic sum: the SDK drops a negative increment too
            return
        with self._lock:
            values = self._values
            if key not in values:
                key = self._slot(values, key)
            values[key] = values.get(key, 0) + amount

    def collect(self, temporality: AggregationTemporality, now_ns: int) -> Sum | None:
        with self._lock:
            start = self._window(temporality, now_ns)
            if not self._values:
                return None
            points = [NumberDataPoint(dict(key), start, now_ns, value) for key, value in self._values.items()]
            if temporality is AggregationTemporality.DELTA:
                self._values = {}
        return Sum(points, temporality, is_monotonic=True)


class InProcessMetrics:
    """The streams of one instrumentation scope, created by whoever records into them. Asked
    twice for a stream of one name and kind, it gives the same one (as a Meter does for an
    instrument), so two listeners on one `InProcessMetrics` add up rather than export twice."""

    def __init__(self, scope: InstrumentationScope) -> None:
        self.scope = scope
        self._streams: dict[str, HistogramStream | CounterStream] = {}
        self._lock = threading.Lock()  # the registry's
        self._points_lock = threading.Lock()  # every stream's points'
        # Run before each collection: what records into these streams on another thread
        # (the handle's call builder) records what it has first.
        self.before_collect: Callable[[], object] | None = None

    def _stream(self, name: str, kind: type[_Stream], make: Callable[[], _Stream]) -> Any:
        with self._lock:
            stream = self._streams.get(name)
            if stream is None:
                stream = self._streams[name] = make()  # type: ignore[assignment]
            elif type(stream) is not kind:
                raise ValueError(f"metric stream {name!r} exists as a {stream.kind}")
            return stream

    def histogram(self, name: str, *, unit: str, description: str, boundaries: Sequence[float]) -> HistogramStream:
        stream: HistogramStream = self._stream(
            name, HistogramStream, lambda: HistogramStream(name, unit, description, boundaries, self._points_lock))
        return stream

    def counter(self, name: str, *, unit: str, description: str) -> CounterStream:
        stream: CounterStream = self._stream(
            name, CounterStream, lambda: CounterStream(name, unit, description, self._points_lock))
        return stream

    def collect(self, temporality: Temporality, now_ns: int | None = None) -> list[Metric]:
        """Every stream with something to report, as the SDK's `Metric`s."""
        if self.before_collect is not None:
            self.before_collect()
        now = time.time_ns() if now_ns is None else now_ns
        found = []
        with self._lock:
            streams = list(self._streams.values())
        for stream in streams:
            data = stream.collect(temporality(stream.kind), now)
            if data is not None:
                found.append(Metric(stream.name, stream.description, stream.unit, data))
        return found
