"""cafe: see, record and replay what an LLM agent did, on the HTTP wire.

The product: `cafe.wire` (record and replay any agent's HTTP calls), `cafe.apis` (every
model API read once), `cafe.recording` (the private, versioned recording), `cafe.view`
(pages), `cafe.trace` (a typed trace of events), the pytest plugin and the `cafe` command.
Nothing here imports OpenTelemetry; `cafe_otel` builds on this package. The worked example,
a café counter agent, is `cafe.counter`: the product never imports it.

The names below are loaded on first use, not with the package: `import cafe.pytest_plugin`
runs this file in every pytest session on a machine where cafe is installed.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers; `X as X` re-exports each name (tests check it matches _EXPORTS)
    from cafe.errors import CafeError as CafeError
    from cafe.errors import ConfigurationError as ConfigurationError
    from cafe.errors import MissingSettings as MissingSettings
    from cafe.errors import ModelCallError as ModelCallError
    from cafe.errors import UnknownToolCallId as UnknownToolCallId
    from cafe.recording import RecordingError as RecordingError
    from cafe.recording import RecordingExhausted as RecordingExhausted
    from cafe.recording import RecordMode as RecordMode
    from cafe.recording import ReplayMismatch as ReplayMismatch
    from cafe.recording import UnusedCalls as UnusedCalls
    from cafe.recording import load_recording as load_recording
    from cafe.recording import load_records as load_records
    from cafe.trace import NullTracer as NullTracer
    from cafe.trace import SpanNode as SpanNode
    from cafe.trace import TickClock as TickClock
    from cafe.trace import Tracer as Tracer
    from cafe.trace import Usage as Usage
    from cafe.trace import export_fail_soft as export_fail_soft
    from cafe.trace import usage_of as usage_of
    from cafe.trace.outcomes import ConsentDecision as ConsentDecision
    from cafe.trace.outcomes import ConsentOutcome as ConsentOutcome
    from cafe.trace.outcomes import StopReason as StopReason
    from cafe.trace.outcomes import ToolStatus as ToolStatus

# Each public name and the module that defines it.
_EXPORTS = {
    "CafeError": "cafe.errors",
    "ConfigurationError": "cafe.errors",
    "MissingSettings": "cafe.errors",
    "ModelCallError": "cafe.errors",
    "UnknownToolCallId": "cafe.errors",
    "ConsentDecision": "cafe.trace.outcomes",
    "ConsentOutcome": "cafe.trace.outcomes",
    "StopReason": "cafe.trace.outcomes",
    "ToolStatus": "cafe.trace.outcomes",
    "RecordMode": "cafe.recording",
    "RecordingError": "cafe.recording",
    "RecordingExhausted": "cafe.recording",
    "ReplayMismatch": "cafe.recording",
    "UnusedCalls": "cafe.recording",
    "load_recording": "cafe.recording",
    "load_records": "cafe.recording",
    "NullTracer": "cafe.trace",
    "SpanNode": "cafe.trace",
    "TickClock": "cafe.trace",
    "Tracer": "cafe.trace",
    "Usage": "cafe.trace",
    "export_fail_soft": "cafe.trace",
    "usage_of": "cafe.trace",
}

# The café example's names, which this face held until they moved to `cafe.counter`: still
# found here, with a DeprecationWarning naming where they are now.
MOVED_TO_COUNTER = frozenset({
    "AGENT_NAME", "CannedClient", "ChatClient", "ConsentGate", "DEFAULT_DECISIONS", "DEFAULT_SCRIPT",
    "EIGHTY_SIXED", "LiveClient", "LiveSettings", "MENU", "ProtectedExecutor", "RecordingClient",
    "ReplayClient", "STOP_REASONS", "STORY_DECISIONS", "STORY_SCRIPT", "SYSTEM_PROMPT", "ScriptedClient",
    "ShiftRun", "StoryClient", "TOOL_NAMES", "TOOL_SCHEMAS", "TracingClient", "get_client", "handover_note",
    "make_responder", "record_shift", "replay_shift", "run_shift", "transcript",
})

# The face; tests/test_exported_members.py pins it.
__all__ = [*_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        if name in MOVED_TO_COUNTER:
            warnings.warn(f"cafe.{name} moved to cafe.counter.{name} (the café example): import it from "
                          "cafe.counter", DeprecationWarning, stacklevel=2)
            return getattr(importlib.import_module("cafe.counter"), name)
        raise AttributeError(f"module 'cafe' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found once; later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
