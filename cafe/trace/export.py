"""The fail-soft boundary: the one place where an export failure stops being an exception."""

from __future__ import annotations

from cafe.trace.tracer import Tracer


def export_fail_soft(tracer: Tracer) -> str | None:
    """Export the tracer's spans; return None when they shipped, or the error text when the
    exporter raised. The shift's outcome is never touched."""
    try:
        tracer.export()
    except Exception as error:  # the boundary: every exporter failure is reported, not raised
        return f"{type(error).__name__}: {error}"
    return None
