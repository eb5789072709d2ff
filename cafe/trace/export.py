"""The lesson's way out of the tracer: `Tracer(exporter=)`, `Tracer.export()` and
`export_fail_soft(tracer)`.

`Tracer.export()` hands the finished tree, as plain data, to the `exporter` the tracer was
built with, and propagates whatever the exporter raises, on purpose: nobody should be able
to mistake a dead backend for a good one. `export_fail_soft` turns that failure into a
returned name, through the fail-soft boundary (`cafe.trace.failsoft`) that isolates
listeners and that `cafe_otel`'s exporters go through.

Listeners are the way out for anything new: a `TraceListener` (`Tracer(listeners=...)`,
`tracer.add_listener`) hears every typed event as it happens, isolated by the same boundary;
`cafe_otel.SpanListener` and `cafe_otel.MetricsListener` are two. The exporter hook stays for
the lesson's readers and sees only the tree, once, at the end.
"""

from __future__ import annotations

from cafe.trace.failsoft import fail_soft
from cafe.trace.tracer import Tracer


def export_fail_soft(tracer: Tracer) -> str | None:
    """Export the tracer's spans; None when they shipped, or the failure's class name (never
    its message, which may quote customer text) when the exporter raised. The shift's
    outcome is never touched. For anything new, a listener is the way out (see the module's
    text): it needs no export step and no call like this one."""
    report = fail_soft(tracer.export)
    return None if report is None else report.error_class
