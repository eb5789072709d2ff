"""The one fail-soft boundary: where a failure of something beside the shift (an exporter,
a trace listener) stops being an exception and becomes a report.

A report names the failure's class and where it happened, never the exception's message:
the message of a connection error or a listener's KeyError may quote customer text or a
secret-bearing URL, and a report is made to be logged. `cafe.trace.export_fail_soft`, the
tracer's listener isolation and `cafe_otel`'s exporter boundary all report through here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FailureReport:
    error_class: str  # e.g. "ConnectionRefusedError": low cardinality, no customer text
    where: str = ""

    def __str__(self) -> str:
        return f"{self.where} failed ({self.error_class})" if self.where else self.error_class


def report_failure(error: BaseException, where: str = "") -> FailureReport:
    return FailureReport(type(error).__name__, where)


def fail_soft(call: Callable[[], object], where: str = "") -> FailureReport | None:
    """Run `call`; None when it returned, a report when it raised an `Exception`.
    (KeyboardInterrupt and SystemExit still propagate: they are the user's, not a fault.)"""
    try:
        call()
    except Exception as error:  # the boundary: every failure is reported, not raised
        return report_failure(error, where)
    return None
