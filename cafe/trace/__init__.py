"""The shift's span tree: tracer, clocks, the tracing client, usage and the export boundary."""

from cafe.trace.clock import Clock, TickClock
from cafe.trace.export import export_fail_soft
from cafe.trace.span import GENERATION, PHASE, SHIFT, TOOL, Generation, SpanNode
from cafe.trace.tracer import Exporter, NullTracer, Tracer
from cafe.trace.tracing_client import TracingClient
from cafe.trace.usage import Usage, usage_of

__all__ = [
    "GENERATION",
    "PHASE",
    "SHIFT",
    "TOOL",
    "Clock",
    "Exporter",
    "Generation",
    "NullTracer",
    "SpanNode",
    "TickClock",
    "Tracer",
    "TracingClient",
    "Usage",
    "export_fail_soft",
    "usage_of",
]
