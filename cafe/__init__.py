"""cafe: a café counter agent harness you can trace, record and replay.

Nothing here imports OpenTelemetry; `cafe_otel` builds on this package.

The names below are loaded on first use, not with the package: `import cafe.pytest_plugin`
runs this file in every pytest session on a machine where cafe is installed, and the full
harness (jsonschema, and the `openai` SDK for a live client) is not needed there.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Bound now, not on first use: importing the submodule `cafe.transcript` (cafe.cli does)
# would otherwise leave the module where this function's name should be. It needs only
# the standard library.
from cafe.transcript import transcript

if TYPE_CHECKING:
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

# Each public name and the module that defines it.
_EXPORTS = {
    "CannedClient": "cafe.clients",
    "ChatClient": "cafe.clients",
    "LiveClient": "cafe.clients",
    "LiveSettings": "cafe.clients",
    "ScriptedClient": "cafe.clients",
    "get_client": "cafe.clients",
    "ConsentGate": "cafe.consent",
    "make_responder": "cafe.consent",
    "DEFAULT_DECISIONS": "cafe.demo",
    "DEFAULT_SCRIPT": "cafe.demo",
    "CafeError": "cafe.errors",
    "ConfigurationError": "cafe.errors",
    "MissingSettings": "cafe.errors",
    "ModelCallError": "cafe.errors",
    "UnknownToolCallId": "cafe.errors",
    "ProtectedExecutor": "cafe.executor",
    "handover_note": "cafe.handover",
    "STOP_REASONS": "cafe.loop",
    "ShiftRun": "cafe.loop",
    "run_shift": "cafe.loop",
    "EIGHTY_SIXED": "cafe.menu",
    "MENU": "cafe.menu",
    "ConsentDecision": "cafe.outcomes",
    "ConsentOutcome": "cafe.outcomes",
    "StopReason": "cafe.outcomes",
    "ToolStatus": "cafe.outcomes",
    "SYSTEM_PROMPT": "cafe.prompt",
    "RecordMode": "cafe.recording",
    "RecordingClient": "cafe.recording",
    "RecordingError": "cafe.recording",
    "RecordingExhausted": "cafe.recording",
    "ReplayClient": "cafe.recording",
    "ReplayMismatch": "cafe.recording",
    "UnusedCalls": "cafe.recording",
    "load_recording": "cafe.recording",
    "load_records": "cafe.recording",
    "record_shift": "cafe.recording",
    "replay_shift": "cafe.recording",
    "TOOL_SCHEMAS": "cafe.tools",
    "NullTracer": "cafe.trace",
    "SpanNode": "cafe.trace",
    "TickClock": "cafe.trace",
    "Tracer": "cafe.trace",
    "TracingClient": "cafe.trace",
    "Usage": "cafe.trace",
    "export_fail_soft": "cafe.trace",
    "usage_of": "cafe.trace",
}

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cafe' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found once; later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
