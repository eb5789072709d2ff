"""The content event's pipeline: `build_logger_provider` makes the LoggerProvider that carries
1.41.1's `gen_ai.client.inference.operation.details` log record, behind the same boundary,
account and metadata-only rules as the spans.

Each batch is checked on the export worker before the exporter encodes anything
(`ContentEventExporter`): a record whose event name is not one of the conventions' is
dropped, its body is removed, its metadata attributes pass the spans' allowlist and shapes,
and its content (`gen_ai.input.messages` and the other content keys, structured as the
event carries them) leaves only when content capture sends it to the event, every string
in it scrubbed of the secret patterns and the live client's keys. The export itself runs
behind the fail-soft boundary (`ExportBoundary`: never raises, never hangs) and is counted
in the account under `logs` (`Settler`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk._logs import LoggerProvider, LogRecordLimits, ReadableLogRecord
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.resources import Resource

from cafe_otel import semconv as sc
from cafe_otel._export.account import PROCESSED, TelemetryAccount
from cafe_otel._export.attempts import AttemptLog
from cafe_otel._export.failsoft import ExportBoundary
from cafe_otel._export.settle import Settler
from cafe_otel._privacy.processor import SpanSanitiser

MAX_QUEUED_RECORDS = 2048
MAX_EXPORT_BATCH = 512


class ContentEventExporter(LogRecordExporter):
    """A `LogRecordExporter` that checks each record (see the module's docstring), then
    exports through `inner` behind the fail-soft boundary, and counts what happened.
    `sanitiser` is None when the pipeline lets every attribute out unchecked
    (`AdvancedOptions(metadata_only=False)`)."""

    def __init__(self, inner: LogRecordExporter, *, account: TelemetryAccount, target: str, export_timeout: float,
                 sanitiser: SpanSanitiser | None, rejected: Callable[[], int] | None = None,
                 refused: Callable[[], int | None] | None = None, attempts: AttemptLog | None = None) -> None:
        self.inner = inner
        self.export_timeout = export_timeout
        self._account = account
        self._sanitiser = sanitiser
        self._boundary = ExportBoundary(export_timeout)
        self._settler = Settler("logs", account, target, rejected=rejected, refused=refused, attempts=attempts)

    def add_secrets(self, secrets: Iterable[str]) -> None:
        if self._sanitiser is not None:
            self._sanitiser.add_secrets(secrets)

    def _checked(self, batch: Sequence[ReadableLogRecord]) -> list[ReadableLogRecord]:
        sanitiser = self._sanitiser
        if sanitiser is None:
            return list(batch)
        kept: list[ReadableLogRecord] = []
        with sanitiser.lock:
            for readable in batch:
                try:
                    if self._check(sanitiser, readable):
                        kept.append(readable)
                        continue
                    self._account.add_withheld("log record")
                except Exception as error:  # this record only, dropped and counted: fail closed
                    self._account.add("logs", PROCESSED, 1, type(error).__name__,
                                      f"log record check raised {type(error).__name__}")
        return kept

    @staticmethod
    def _check(sanitiser: SpanSanitiser, readable: ReadableLogRecord) -> bool:
        """Makes `readable` fit to leave, in place; False when it may not leave at all."""
        record = readable.log_record
        if record.event_name not in sc.KNOWN_EVENT_NAMES:
            return False
        record.body = None
        found = dict(record.attributes or {})
        content = {key: found.pop(key) for key in sc.CONTENT_ATTRIBUTES if key in found}
        checked = sanitiser.attributes(found)
        attributes: dict[str, Any] = dict(found if checked is None else checked)
        for key, value in content.items():
            scrubbed = sanitiser.content(value)
            if scrubbed is not None:
                attributes[key] = scrubbed
        record.attributes = attributes
        return True

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        records = self._checked(batch)
        if not records:
            return LogRecordExportResult.SUCCESS
        settler = self._settler
        pending = settler.pending(len(records))
        settler.forget_stale()
        outcome = self._boundary.export(self.inner.export, records)
        delivered = settler.settle(pending, outcome, waited=self.export_timeout)
        return LogRecordExportResult.SUCCESS if delivered else LogRecordExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        outcome = self._boundary.control(self.inner.force_flush, timeout_millis,
                                         timeout=min(timeout_millis / 1000, self.export_timeout))
        return outcome.ok and outcome.value is not False

    def shutdown(self) -> None:
        if self._boundary.close():
            self._boundary.control(self.inner.shutdown, timeout=self.export_timeout)


def build_logger_provider(exporter: ContentEventExporter, *, resource: Resource,
                          schedule_delay: float) -> LoggerProvider:
    """Our LoggerProvider: one batch processor into `exporter`, every setting explicit (the
    SDK reads none from the process's environ itself)."""
    provider = LoggerProvider(resource=resource, shutdown_on_exit=False, meter_provider=NoOpMeterProvider(),
                              log_record_limits=LogRecordLimits(max_attributes=128,
                                                                max_attribute_length=None))
    provider.add_log_record_processor(BatchLogRecordProcessor(
        exporter, schedule_delay_millis=schedule_delay * 1000, max_queue_size=MAX_QUEUED_RECORDS,
        max_export_batch_size=MAX_EXPORT_BATCH, export_timeout_millis=exporter.export_timeout * 1000,
        meter_provider=NoOpMeterProvider()))
    return provider
