"""The shift's trace: typed events from a tracer to its listeners (the in-memory tree first),
clocks, usage and the fail-soft boundary. (The café's `TracingClient` is `cafe.counter`'s.)"""

from cafe._moved import forwarding
from cafe.trace.clock import Clock, TickClock, Timeline
from cafe.trace.events import (
    ENDED,
    STARTED,
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
from cafe.trace.failsoft import (
    ALREADY_SHUTDOWN,
    BUSY,
    TIMEOUT,
    FailSoft,
    FailureReport,
    Outcome,
    fail_soft,
    report_failure,
)
from cafe.trace.log import EventLog
from cafe.trace.outcomes import ConsentDecision, ConsentOutcome, StopReason, ToolStatus
from cafe.trace.span import GENERATION, PHASE, SHIFT, TOOL, Generation, SpanNode
from cafe.trace.tracer import Exporter, NullTracer, Tracer
from cafe.trace.tree import ShiftTree
from cafe.trace.usage import Usage, usage_of

__all__ = [
    "ALREADY_SHUTDOWN",
    "BUSY",
    "ENDED",
    "GENERATION",
    "PHASE",
    "SHIFT",
    "STARTED",
    "TIMEOUT",
    "TOOL",
    "Clock",
    "ConsentDecided",
    "ConsentDecision",
    "ConsentOutcome",
    "EventLog",
    "Exporter",
    "FailSoft",
    "FailureReport",
    "Generation",
    "GenerationEnded",
    "GenerationRequest",
    "GenerationResult",
    "GenerationStarted",
    "NodeKind",
    "NullTracer",
    "Outcome",
    "Phase",
    "PhaseEnded",
    "PhaseStarted",
    "ShiftEnded",
    "ShiftStarted",
    "ShiftTree",
    "SpanEnded",
    "SpanNode",
    "SpanStarted",
    "StopReason",
    "TickClock",
    "TicketFired",
    "Timeline",
    "ToolEnded",
    "ToolStarted",
    "ToolStatus",
    "TraceEvent",
    "TraceListener",
    "Tracer",
    "Usage",
    "export_fail_soft",
    "fail_soft",
    "report_failure",
    "usage_of",
]

__getattr__ = forwarding("cafe.trace", {"TracingClient": "cafe.counter"})
