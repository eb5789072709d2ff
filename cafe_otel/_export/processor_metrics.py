"""The batch processor's own metrics, under the names the SDK's processors use (semconv
`otel.sdk.processor.span.*`), for whoever hands it a `MeterProvider`.

As the convention says: a span counts as processed when it is handed to the exporter
(whatever the export then does; `cafe_otel._export.account` keeps that outcome), and a span
lost before that counts with its `error.type` (`queue_full`, `already_shutdown`, or our
`shutdown_timeout` for a span still queued when shutdown's bound ran out). Recording a
metric never raises into the processor: a broken meter costs the metric, not a span.
Without a `MeterProvider` the processor holds `NO_PROCESSOR_METRICS`, which records nothing,
so it never asks whether it has metrics.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable
from typing import Any

from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from cafe_otel._export.account import PROCESSOR_SPAN_PROCESSED as PROCESSED
from cafe_otel.semconv import ERROR_TYPE

QUEUE_SIZE = "otel.sdk.processor.span.queue.size"
QUEUE_CAPACITY = "otel.sdk.processor.span.queue.capacity"
COMPONENT_TYPE_KEY = "otel.component.type"
COMPONENT_NAME_KEY = "otel.component.name"
# Not the SDK's batching_span_processor: the convention asks for the type's own name then.
COMPONENT_TYPE = "cafe_otel.BoundedBatchSpanProcessor"

_instances = itertools.count()


class NoProcessorMetrics:
    """What a processor without a `MeterProvider` records: nothing."""

    def submitted(self, count: int) -> None:
        return None

    def dropped(self, count: int, error_type: str) -> None:
        return None


NO_PROCESSOR_METRICS = NoProcessorMetrics()


def processor_metrics(meter_provider: MeterProvider | None, *, capacity: int,
                      queue_size: Callable[[], int]) -> ProcessorMetrics | NoProcessorMetrics:
    """The SDK's processor metrics on `meter_provider`; none without one."""
    if meter_provider is None:
        return NO_PROCESSOR_METRICS
    return ProcessorMetrics(meter_provider, capacity=capacity, queue_size=queue_size)


class ProcessorMetrics(NoProcessorMetrics):
    def __init__(self, meter_provider: MeterProvider, *, capacity: int, queue_size: Callable[[], int]) -> None:
        meter = meter_provider.get_meter("cafe_otel")
        self.attributes: dict[str, Any] = {COMPONENT_TYPE_KEY: COMPONENT_TYPE,
                                           COMPONENT_NAME_KEY: f"{COMPONENT_TYPE}/{next(_instances)}"}
        self._processed = meter.create_counter(
            PROCESSED, unit="{span}",
            description="The number of spans for which the processing has finished, either successful or failed.")
        meter.create_up_down_counter(
            QUEUE_CAPACITY, unit="{span}",
            description="The maximum number of spans the queue of the processor can hold.",
        ).add(capacity, self.attributes)

        def observe(_options: CallbackOptions) -> list[Observation]:
            return [Observation(queue_size(), self.attributes)]

        meter.create_observable_up_down_counter(
            QUEUE_SIZE, callbacks=[observe], unit="{span}",
            description="The number of spans in the queue of the processor.")

    def submitted(self, count: int) -> None:
        self._add(count, self.attributes)

    def dropped(self, count: int, error_type: str) -> None:
        self._add(count, {**self.attributes, ERROR_TYPE: error_type})

    def _add(self, count: int, attributes: dict[str, Any]) -> None:
        # A metric is not worth a span, nor an exception raised into span.end().
        with contextlib.suppress(Exception):
            self._processed.add(count, attributes)
