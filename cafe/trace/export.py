"""The lesson's export boundary: `export_fail_soft(tracer)`.

`Tracer.export()` propagates whatever the exporter raises, on purpose: nobody should be able
to mistake a dead backend for a good one. Here that failure is turned into a returned name,
through the same boundary (`cafe.trace.failsoft`) that isolates listeners and that
`cafe_otel`'s exporter uses.
"""

from __future__ import annotations

from cafe.trace.failsoft import fail_soft
from cafe.trace.tracer import Tracer


def export_fail_soft(tracer: Tracer) -> str | None:
    """Export the tracer's spans; None when they shipped, or the failure's class name (never
    its message, which may quote customer text) when the exporter raised. The shift's
    outcome is never touched."""
    report = fail_soft(tracer.export)
    return None if report is None else report.error_class
