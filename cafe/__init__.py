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

if TYPE_CHECKING:  # for type checkers; `X as X` re-exports each name (tests check it matches _EXPORTS)
    from cafe.clients import (
        CannedClient as CannedClient,
    )
    from cafe.clients import (
        ChatClient as ChatClient,
    )
    from cafe.clients import (
        LiveClient as LiveClient,
    )
    from cafe.clients import (
        LiveSettings as LiveSettings,
    )
    from cafe.clients import (
        ScriptedClient as ScriptedClient,
    )
    from cafe.clients import (
        get_client as get_client,
    )
    from cafe.clients.story import (
        StoryClient as StoryClient,
    )
    from cafe.consent import ConsentGate as ConsentGate
    from cafe.consent import make_responder as make_responder
    from cafe.demo import DEFAULT_DECISIONS as DEFAULT_DECISIONS
    from cafe.demo import DEFAULT_SCRIPT as DEFAULT_SCRIPT
    from cafe.demo import (
        STORY_DECISIONS as STORY_DECISIONS,
    )
    from cafe.demo import (
        STORY_SCRIPT as STORY_SCRIPT,
    )
    from cafe.errors import (
        CafeError as CafeError,
    )
    from cafe.errors import (
        ConfigurationError as ConfigurationError,
    )
    from cafe.errors import (
        MissingSettings as MissingSettings,
    )
    from cafe.errors import (
        ModelCallError as ModelCallError,
    )
    from cafe.errors import (
        UnknownToolCallId as UnknownToolCallId,
    )
    from cafe.executor import ProtectedExecutor as ProtectedExecutor
    from cafe.handover import handover_note as handover_note
    from cafe.loop import (
        AGENT_NAME as AGENT_NAME,
    )
    from cafe.loop import STOP_REASONS as STOP_REASONS
    from cafe.loop import ShiftRun as ShiftRun
    from cafe.loop import run_shift as run_shift
    from cafe.menu import EIGHTY_SIXED as EIGHTY_SIXED
    from cafe.menu import MENU as MENU
    from cafe.outcomes import (
        ConsentDecision as ConsentDecision,
    )
    from cafe.outcomes import (
        ConsentOutcome as ConsentOutcome,
    )
    from cafe.outcomes import (
        StopReason as StopReason,
    )
    from cafe.outcomes import (
        ToolStatus as ToolStatus,
    )
    from cafe.prompt import SYSTEM_PROMPT as SYSTEM_PROMPT
    from cafe.recording import (
        RecordingClient as RecordingClient,
    )
    from cafe.recording import (
        RecordingError as RecordingError,
    )
    from cafe.recording import (
        RecordingExhausted as RecordingExhausted,
    )
    from cafe.recording import (
        RecordMode as RecordMode,
    )
    from cafe.recording import (
        ReplayClient as ReplayClient,
    )
    from cafe.recording import (
        ReplayMismatch as ReplayMismatch,
    )
    from cafe.recording import (
        UnusedCalls as UnusedCalls,
    )
    from cafe.recording import (
        load_recording as load_recording,
    )
    from cafe.recording import (
        load_records as load_records,
    )
    from cafe.recording import (
        record_shift as record_shift,
    )
    from cafe.recording import (
        replay_shift as replay_shift,
    )
    from cafe.tools import (
        TOOL_NAMES as TOOL_NAMES,
    )
    from cafe.tools import TOOL_SCHEMAS as TOOL_SCHEMAS
    from cafe.trace import (
        NullTracer as NullTracer,
    )
    from cafe.trace import (
        SpanNode as SpanNode,
    )
    from cafe.trace import (
        TickClock as TickClock,
    )
    from cafe.trace import (
        Tracer as Tracer,
    )
    from cafe.trace import (
        TracingClient as TracingClient,
    )
    from cafe.trace import (
        Usage as Usage,
    )
    from cafe.trace import (
        export_fail_soft as export_fail_soft,
    )
    from cafe.trace import (
        usage_of as usage_of,
    )

# Each public name and the module that defines it.
_EXPORTS = {
    "AGENT_NAME": "cafe.loop",
    "STORY_DECISIONS": "cafe.demo",
    "STORY_SCRIPT": "cafe.demo",
    "StoryClient": "cafe.clients.story",
    "TOOL_NAMES": "cafe.tools",
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

# The face: every name `_EXPORTS` loads, and `transcript` (bound above); tests/test_exported_members.py
# pins it.
__all__ = ["transcript", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cafe' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found once; later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
