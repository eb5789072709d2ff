"""cafe: a café counter agent harness you can trace, record and replay.

Nothing here imports OpenTelemetry; `cafe_otel` builds on this package.
"""

from cafe.clients import (
    CannedClient,
    ChatClient,
    LiveClient,
    LiveSettings,
    ScriptedClient,
    get_client,
)
from cafe.consent import ConsentGate, make_responder
from cafe.demo import DEFAULT_DECISIONS, DEFAULT_SCRIPT
from cafe.errors import (
    CafeError,
    ConfigurationError,
    MissingSettings,
    ModelCallError,
    UnknownToolCallId,
)
from cafe.executor import ProtectedExecutor
from cafe.handover import handover_note
from cafe.loop import STOP_REASONS, ShiftRun, run_shift
from cafe.menu import EIGHTY_SIXED, MENU
from cafe.outcomes import ConsentDecision, ConsentOutcome, StopReason, ToolStatus
from cafe.prompt import SYSTEM_PROMPT
from cafe.recording import (
    RecordingClient,
    RecordingError,
    RecordingExhausted,
    RecordMode,
    ReplayClient,
    ReplayMismatch,
    UnusedCalls,
    load_recording,
    load_records,
    record_shift,
    replay_shift,
)
from cafe.tools import TOOL_SCHEMAS
from cafe.trace import (
    NullTracer,
    SpanNode,
    TickClock,
    Tracer,
    TracingClient,
    Usage,
    export_fail_soft,
    usage_of,
)
from cafe.transcript import transcript

__all__ = [
    "DEFAULT_DECISIONS",
    "DEFAULT_SCRIPT",
    "EIGHTY_SIXED",
    "MENU",
    "STOP_REASONS",
    "SYSTEM_PROMPT",
    "TOOL_SCHEMAS",
    "CafeError",
    "CannedClient",
    "ChatClient",
    "ConfigurationError",
    "ConsentDecision",
    "ConsentGate",
    "ConsentOutcome",
    "LiveClient",
    "LiveSettings",
    "MissingSettings",
    "ModelCallError",
    "NullTracer",
    "ProtectedExecutor",
    "RecordMode",
    "RecordingClient",
    "RecordingError",
    "RecordingExhausted",
    "ReplayClient",
    "ReplayMismatch",
    "ScriptedClient",
    "ShiftRun",
    "SpanNode",
    "StopReason",
    "TickClock",
    "ToolStatus",
    "Tracer",
    "TracingClient",
    "UnknownToolCallId",
    "UnusedCalls",
    "Usage",
    "export_fail_soft",
    "get_client",
    "handover_note",
    "load_recording",
    "load_records",
    "make_responder",
    "record_shift",
    "replay_shift",
    "run_shift",
    "transcript",
    "usage_of",
]
