"""`configure()`'s less everyday arguments, in groups (as Logfire groups its own): the batch
processor's bounds, the metrics signal's exporter and interval, and the advanced knobs that
replace a part of the pipeline. Each group is frozen and checks its fields when it is made:
a value of the wrong type or out of range is a `TelemetryConfigError` naming the field.

A field left `None` (or at its default) is not given: the `OTEL_*` variables, then the
defaults, decide it. Importing this module imports no SDK: the SDK's classes are looked up
when a group that holds one is checked.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cafe_otel._config.parse import TelemetryConfigError, seconds_in_range, whole_in_range

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.sdk.trace.sampling import Sampler

MAX_QUEUE_SIZE = 1_000_000


def _sdk_class(module: str, name: str) -> type:
    found: type = getattr(importlib.import_module(module), name)
    return found


def _instance_of(value: object, field: str, module: str, name: str) -> None:
    if value is not None and not isinstance(value, _sdk_class(module, name)):
        raise TelemetryConfigError(f"{field}: {type(value).__name__} is not a {module}.{name}")


def _whole(value: object, field: str, high: int, what: str = "") -> None:
    if isinstance(value, str):  # ASCII digits are a variable's spelling, not an argument's
        raise TelemetryConfigError(f"{field}: str is not a whole number from 1 to {high}{what}")
    whole_in_range(value, field, high, what)


def _flag(value: object, field: str) -> None:
    if not isinstance(value, bool):
        raise TelemetryConfigError(f"{field}: {type(value).__name__} is not True or False")


@dataclass(frozen=True)
class BatchOptions:
    """The span batch processor's bounds (`OTEL_BSP_*` and the OTLP timeout decide any left None).

    `export_timeout` (seconds, (0, 3600]) bounds one export, and is the OTLP exporters' timeout
    for both signals; `schedule_delay` (seconds, (0, 3600]) is how long a span may wait for its
    batch; `shutdown_timeout` (seconds, [0, 3600]) bounds the handle's shutdown, flush and
    final exports together."""

    max_queue_size: int | None = None
    max_export_batch_size: int | None = None
    schedule_delay: float | None = None
    export_timeout: float | None = None
    shutdown_timeout: float | None = None

    def __post_init__(self) -> None:
        if self.max_queue_size is not None:
            _whole(self.max_queue_size, "BatchOptions.max_queue_size", MAX_QUEUE_SIZE)
        if self.max_export_batch_size is not None:
            high = self.max_queue_size if self.max_queue_size is not None else MAX_QUEUE_SIZE
            _whole(self.max_export_batch_size, "BatchOptions.max_export_batch_size", high, " (at most the queue size)")
        if self.schedule_delay is not None:
            seconds_in_range(self.schedule_delay, "BatchOptions.schedule_delay")
        if self.export_timeout is not None:
            seconds_in_range(self.export_timeout, "BatchOptions.export_timeout")
        if self.shutdown_timeout is not None:
            seconds_in_range(self.shutdown_timeout, "BatchOptions.shutdown_timeout", low_inclusive=True)


@dataclass(frozen=True)
class MetricsOptions:
    """The metrics signal's own parts. `exporter` replaces its OTLP exporter (as `configure`'s
    `exporter` replaces the spans'); `export_interval` (seconds, (0, 3600]) is how often the
    periodic reader exports (`OTEL_METRIC_EXPORT_INTERVAL` otherwise); `enabled` says whether
    there are metrics at all (None: `OTEL_METRICS_EXPORTER` decides; `configure(metrics=True)`
    is `MetricsOptions(enabled=True)`)."""

    exporter: MetricExporter | None = None
    export_interval: float | None = None
    enabled: bool | None = None

    def __post_init__(self) -> None:
        if self.enabled is not None:
            _flag(self.enabled, "MetricsOptions.enabled")
        _instance_of(self.exporter, "MetricsOptions.exporter", "opentelemetry.sdk.metrics.export", "MetricExporter")
        if self.export_interval is not None:
            seconds_in_range(self.export_interval, "MetricsOptions.export_interval")


@dataclass(frozen=True)
class AdvancedOptions:
    """Parts of the pipeline a caller replaces. `id_generator`, `sampler` (wins over
    `OTEL_TRACES_SAMPLER`) and `resource` go to the TracerProvider; `extra_processors` run before
    the metadata-only chain and see each span as it ended, unchecked; `metadata_only=False` lets
    every attribute out unchecked (for tests of the pipeline itself); `replay=True` makes the
    output deterministic: no random instance id, a fixed key for hashed identifiers;
    `log_exporter` receives the content event's log records instead of the OTLP logs exporter."""

    id_generator: IdGenerator | None = None
    sampler: Sampler | None = None
    resource: Resource | None = None
    extra_processors: tuple[SpanProcessor, ...] = ()
    metadata_only: bool = True
    replay: bool = False
    log_exporter: Any = None  # a LogRecordExporter for the content event, instead of OTLP's

    def __post_init__(self) -> None:
        _instance_of(self.id_generator, "AdvancedOptions.id_generator", "opentelemetry.sdk.trace.id_generator",
                     "IdGenerator")
        _instance_of(self.sampler, "AdvancedOptions.sampler", "opentelemetry.sdk.trace.sampling", "Sampler")
        _instance_of(self.resource, "AdvancedOptions.resource", "opentelemetry.sdk.resources", "Resource")
        processors: Any = self.extra_processors
        if not isinstance(processors, (tuple, list)):
            raise TelemetryConfigError(
                f"AdvancedOptions.extra_processors: {type(processors).__name__} is not a tuple of SpanProcessor")
        for processor in processors:
            _instance_of(processor, "AdvancedOptions.extra_processors", "opentelemetry.sdk.trace", "SpanProcessor")
        object.__setattr__(self, "extra_processors", tuple(processors))
        _instance_of(self.log_exporter, "AdvancedOptions.log_exporter", "opentelemetry.sdk._logs.export",
                     "LogRecordExporter")
        _flag(self.metadata_only, "AdvancedOptions.metadata_only")
        _flag(self.replay, "AdvancedOptions.replay")
