"""The shift's trace: typed events from a tracer to its listeners (the in-memory tree first),
clocks, the tracing client, usage and the fail-soft boundary."""

from cafe.trace.clock import Clock, TickClock, Timeline
from cafe.trace.events import (
    ConsentDecided,
    GenerationEnded,
    GenerationRequest,
    GenerationResult,
    GenerationStarted,
    NodeKind,
    Phase,
    PhaseEnded,
    PhaseStarted,
    ShiftEnded,
    ShiftStarted,
    SpanEnded,
    SpanStarted,
    TicketFired,
    ToolEnded,
    ToolStarted,
    TraceEvent,
    TraceListener,
)
from cafe.trace.export import export_fail_soft
from cafe.trace.failsoft import FailureReport, fail_soft, report_failure
from cafe.trace.log import EventLog
from cafe.trace.span import GENERATION, PHASE, SHIFT, TOOL, Generation, SpanNode
from cafe.trace.tracer import Exporter, NullTracer, Tracer
from cafe.trace.tracing_client import TracingClient
from cafe.trace.tree import ShiftTree
from cafe.trace.usage import Usage, usage_of

__all__ = [
    "GENERATION",
    "PHASE",
    "SHIFT",
    "TOOL",
    "Clock",
    "ConsentDecided",
    "EventLog",
    "Exporter",
    "FailureReport",
    "Generation",
    "GenerationEnded",
    "GenerationRequest",
    "GenerationResult",
    "GenerationStarted",
    "NodeKind",
    "NullTracer",
    "Phase",
    "PhaseEnded",
    "PhaseStarted",
    "ShiftEnded",
    "ShiftStarted",
    "ShiftTree",
    "SpanEnded",
    "SpanNode",
    "SpanStarted",
    "TickClock",
    "TicketFired",
    "Timeline",
    "ToolEnded",
    "ToolStarted",
    "TraceEvent",
    "TraceListener",
    "Tracer",
    "TracingClient",
    "Usage",
    "export_fail_soft",
    "fail_soft",
    "report_failure",
    "usage_of",
]
