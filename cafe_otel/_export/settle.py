"""The one settle step: what an export did, counted once in the account, for a batch of
spans and a metric export alike.

An export hands `count` items (spans, or metric data points) to an exporter behind the
fail-soft boundary (`cafe_otel._export.failsoft.ExportBoundary`), whose `Outcome` says what
it did. `Settler.settle` turns that outcome into counts under the signal's key:
- a success the receiver refused (a non-2xx answer the exporter called a success, e.g. a
  3xx redirect it does not follow): every item lost, under the status code;
- a success: delivered, less what the receiver reported rejected in its 2xx answer (OTLP
  partial success, `cafe_otel._export.partial_success`), which is lost as `rejected`;
- the exporter returned something other than SUCCESS: lost as `failure`;
- the exporter raised, hung past its bound or was still hung from the export before
  (`busy`): lost under that cause;
- but a failed export whose attempts at the transport leave its delivery unknown (a request
  that went out and was never answered: the exporter's own timeout, a connection dropped
  after it was sent) is unconfirmed, never lost: its receiver may have stored it whole.
`Settler.settle_in_flight` judges an export that has not returned when shutdown's bound
runs out by its attempts at the transport (`cafe_otel._export.attempts`): unconfirmed while
a receiver may yet store it, lost when every attempt delivered nothing or none started, and
settled as a success when its last attempt was answered success.

Each export is a `Pending`, settled exactly once: the worker (by the outcome) and shutdown
(by the attempts) may both reach it, and only the first counts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExportResult
from opentelemetry.sdk.trace.export import SpanExportResult

from cafe.trace import ALREADY_SHUTDOWN, BUSY, TIMEOUT, Outcome
from cafe_otel._config.variables import Signal
from cafe_otel._export.account import EXPORTED, FAILURE, INFLIGHT, REJECTED, SHUTDOWN_TIMEOUT, TelemetryAccount
from cafe_otel._export.attempts import AttemptLog, InFlight
from cafe_otel._export.partial_success import refusal_status, rejected_count


@dataclass(frozen=True)
class _Words:
    export: str  # how an error text names one export of the signal
    items: str  # what the signal's exports are counted in


_WORDS: dict[Signal, _Words] = {"traces": _Words("export", "spans"),
                                "metrics": _Words("metrics export", "data points"),
                                "logs": _Words("logs export", "log records")}
_SUCCESS: dict[Signal, object] = {"traces": SpanExportResult.SUCCESS, "metrics": MetricExportResult.SUCCESS,
                                  "logs": LogRecordExportResult.SUCCESS}


def export_succeeded(signal: Signal, outcome: Outcome) -> bool:
    """An export counts as delivered only when the exporter returned SUCCESS itself."""
    return outcome.ok and outcome.value is _SUCCESS[signal]


class Pending:
    """The items handed to one export; settled once, by its outcome or by shutdown's bound."""

    __slots__ = ("_lock", "_settled", "count")

    def __init__(self, count: int, lock: threading.Lock) -> None:
        self.count = count
        self._lock = lock
        self._settled = False

    def settle(self) -> bool:
        """True the first time: the caller counts it; False when it was already counted."""
        with self._lock:
            if self._settled:
                return False
            self._settled = True
            return True

    def shrink(self, lost: int) -> bool:
        """Take `lost` items out of the export (they are counted elsewhere), unless it has
        already been counted whole."""
        with self._lock:
            if self._settled:
                return False
            self.count -= lost
            return True


class Settler:
    """One exporter's outcomes into the account, under its signal.

    `target` names where the items go in error texts (e.g. "grpc http://host:4317").
    `rejected`, when given, says after an export the exporter called a success how many of
    its items the receiver rejected; `refused`, the status of an answer that was not 2xx
    (then the whole export is lost); `attempts` counts the exporter's attempts at the
    transport, for the judgement at shutdown's bound."""

    def __init__(self, signal: Signal, account: TelemetryAccount, target: str, *,
                 rejected: Callable[[], int] | None = None, refused: Callable[[], int | None] | None = None,
                 attempts: AttemptLog | None = None) -> None:
        self.signal = signal
        self.account = account
        self.attempts = attempts
        self._words = _WORDS[signal]
        self._where = f"{self._words.export} to {target}"
        self._rejected = rejected
        self._refused = refused
        self._lock = threading.Lock()

    def pending(self, count: int) -> Pending:
        return Pending(count, self._lock)

    def forget_stale(self) -> None:
        """Before an export: what an earlier export's late answer reported belongs to none now."""
        self._rejected_count(0)
        self._refusal()

    def settle(self, pending: Pending, outcome: Outcome, *, waited: float) -> bool:
        """Count `pending` by `outcome`, once; True when its items count as delivered (a
        partial success too). `waited`: the export's bound, for the text of a timeout."""
        if not pending.settle():
            return False  # shutdown already counted it
        return self._count(pending.count, outcome, waited)

    def _count(self, count: int, outcome: Outcome, waited: float) -> bool:
        succeeded = export_succeeded(self.signal, outcome)
        refusal = self._refusal() if succeeded else None
        if refusal is not None:
            self._lost(count, f"the receiver answered {refusal}, not 2xx; nothing was delivered", str(refusal))
            return False
        if succeeded:
            rejected = self._rejected_count(count)
            self.account.add(self.signal, EXPORTED, count - rejected)
            if rejected:
                self._lost(rejected, f"the receiver took the request but rejected {rejected} of its {count} "
                                     f"{self._words.items} (OTLP partial success)", REJECTED)
            return True
        unknown = self._delivery_unknown(outcome, waited)
        if unknown is not None:
            self.account.add(self.signal, INFLIGHT, count, why=f"{self._where}: {unknown}")
            return False
        if outcome.ok:  # returned, but not SUCCESS
            self._lost(count, "exporter returned FAILURE", FAILURE)
        elif outcome.error_type == TIMEOUT:
            self._lost(count, f"no answer within {waited:g}s", TIMEOUT)
        elif outcome.error_type == BUSY:
            self._lost(count, f"the previous export is still hung; these {self._words.items} were not sent", BUSY)
        else:
            self._lost(count, f"exporter {outcome.why}", outcome.error_type or FAILURE)
        return False

    def _delivery_unknown(self, outcome: Outcome, waited: float) -> str | None:
        """Why a failed export may still have been stored, by its attempts (None: it was not).
        A `busy` or refused-after-shutdown export made no attempt: the log holds another's."""
        if outcome.error_type in (BUSY, ALREADY_SHUTDOWN) or self.attempts is None or not self.attempts.attached:
            return None
        attempts = self.attempts.snapshot()
        if attempts.in_flight() is not InFlight.UNCONFIRMED:
            return None
        if outcome.ok:
            failed = "exporter returned FAILURE"
        elif outcome.error_type == TIMEOUT:
            failed = f"no answer within {waited:g}s"
        else:
            failed = f"exporter {outcome.why}"
        return f"{failed}, but {attempts.why_unconfirmed()}"

    def settle_in_flight(self, pending: Pending, why: str) -> InFlight | None:
        """Count an export that has not returned by shutdown's bound, once, by what its
        attempts say (None: it was already counted). `why` says which bound ran out."""
        if not pending.settle():
            return None
        count, attempts_log = pending.count, self.attempts
        if attempts_log is None or not attempts_log.attached:  # nothing seen: no answer is not a loss
            self.account.add(self.signal, INFLIGHT, count, why=f"{self._where}: still in flight when {why}")
            return InFlight.UNCONFIRMED
        attempts = attempts_log.withdraw()  # no attempt of it leaves after this verdict
        verdict = attempts.in_flight()
        if verdict is InFlight.DELIVERED:
            # Answered 2xx (or gRPC OK) and the exporter not yet returned: its verdict is SUCCESS.
            self._count(count, Outcome(value=_SUCCESS[self.signal]), 0.0)
        elif verdict is InFlight.DROPPED and attempts.last is not None:
            self._lost(count, f"not delivered before exit; every attempt failed before reaching a receiver "
                              f"(last: {attempts.last.kind}) and the exporter was waiting to retry when {why}",
                       attempts.last.kind)
        elif verdict is InFlight.UNSENT:  # handed to the exporter, never to the transport
            self._lost(count, f"not sent before exit; no attempt had started when {why}", SHUTDOWN_TIMEOUT)
        else:  # a receiver may still store every item of it
            verdict = InFlight.UNCONFIRMED
            self.account.add(self.signal, INFLIGHT, count,
                             why=f"{self._where}: still in flight when {why}: {attempts.why_unconfirmed()}")
        return verdict

    def _lost(self, count: int, what: str, error_type: str) -> None:
        self.account.add(self.signal, EXPORTED, count, error_type, f"{self._where}: {what}")

    def _rejected_count(self, sent: int) -> int:
        return rejected_count(self._rejected, sent, self.account.note_error, self._where)

    def _refusal(self) -> int | None:
        return refusal_status(self._refused, self.account.note_error, self._where)
