"""cafe.counter: the worked example, a café counter agent built on the product.

It takes orders, checks allergens and fires kitchen tickets only with the customer's consent:
a loop (`run_shift`), its tools and menu, a consent gate, a scripted model for offline runs
and a live client for any OpenAI-compatible endpoint, and the shift's own recording and
replay (`record_shift`, `replay_shift`). It uses the product (`cafe.wire`, `cafe.recording`,
`cafe.trace`, `cafe.view`) and the product never imports it: it reaches the `cafe` command,
pytest and `cafe export` through entry points, so deleting this package (and
`cafe_otel._counter`, and their tests) leaves a working product.

The names below are loaded on first use: a process that only records its own agent never
loads jsonschema or the café's clients.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Bound now, not on first use: importing the submodule `cafe.counter.transcript` would
# otherwise leave the module where this function's name should be.
from cafe.counter.transcript import transcript

if TYPE_CHECKING:  # for type checkers; `X as X` re-exports each name (tests check it matches _EXPORTS)
    from cafe.counter.clients import CannedClient as CannedClient
    from cafe.counter.clients import ChatClient as ChatClient
    from cafe.counter.clients import LiveClient as LiveClient
    from cafe.counter.clients import LiveSettings as LiveSettings
    from cafe.counter.clients import ScriptedClient as ScriptedClient
    from cafe.counter.clients import get_client as get_client
    from cafe.counter.clients.story import StoryClient as StoryClient
    from cafe.counter.clients.tracing import TracingClient as TracingClient
    from cafe.counter.consent import ConsentGate as ConsentGate
    from cafe.counter.consent import make_responder as make_responder
    from cafe.counter.demo import DEFAULT_DECISIONS as DEFAULT_DECISIONS
    from cafe.counter.demo import DEFAULT_SCRIPT as DEFAULT_SCRIPT
    from cafe.counter.demo import STORY_DECISIONS as STORY_DECISIONS
    from cafe.counter.demo import STORY_SCRIPT as STORY_SCRIPT
    from cafe.counter.executor import ProtectedExecutor as ProtectedExecutor
    from cafe.counter.handover import handover_note as handover_note
    from cafe.counter.loop import AGENT_NAME as AGENT_NAME
    from cafe.counter.loop import STOP_REASONS as STOP_REASONS
    from cafe.counter.loop import ShiftRun as ShiftRun
    from cafe.counter.loop import run_shift as run_shift
    from cafe.counter.menu import EIGHTY_SIXED as EIGHTY_SIXED
    from cafe.counter.menu import MENU as MENU
    from cafe.counter.page_words import SHIFT_WORDS as SHIFT_WORDS
    from cafe.counter.prompt import SYSTEM_PROMPT as SYSTEM_PROMPT
    from cafe.counter.recording_client import RecordingClient as RecordingClient
    from cafe.counter.replay_client import ReplayClient as ReplayClient
    from cafe.counter.shifts import decisions_shown as decisions_shown
    from cafe.counter.shifts import record_shift as record_shift
    from cafe.counter.shifts import replay_shift as replay_shift
    from cafe.counter.shifts import responder_of as responder_of
    from cafe.counter.shifts import script_of as script_of
    from cafe.counter.tools import TOOL_NAMES as TOOL_NAMES
    from cafe.counter.tools import TOOL_SCHEMAS as TOOL_SCHEMAS

# Each public name and the module that defines it.
_EXPORTS = {
    "AGENT_NAME": "cafe.counter.loop",
    "CannedClient": "cafe.counter.clients",
    "ChatClient": "cafe.counter.clients",
    "ConsentGate": "cafe.counter.consent",
    "DEFAULT_DECISIONS": "cafe.counter.demo",
    "DEFAULT_SCRIPT": "cafe.counter.demo",
    "EIGHTY_SIXED": "cafe.counter.menu",
    "LiveClient": "cafe.counter.clients",
    "LiveSettings": "cafe.counter.clients",
    "MENU": "cafe.counter.menu",
    "ProtectedExecutor": "cafe.counter.executor",
    "RecordingClient": "cafe.counter.recording_client",
    "ReplayClient": "cafe.counter.replay_client",
    "SHIFT_WORDS": "cafe.counter.page_words",
    "STOP_REASONS": "cafe.counter.loop",
    "STORY_DECISIONS": "cafe.counter.demo",
    "STORY_SCRIPT": "cafe.counter.demo",
    "SYSTEM_PROMPT": "cafe.counter.prompt",
    "ScriptedClient": "cafe.counter.clients",
    "ShiftRun": "cafe.counter.loop",
    "StoryClient": "cafe.counter.clients.story",
    "TOOL_NAMES": "cafe.counter.tools",
    "TOOL_SCHEMAS": "cafe.counter.tools",
    "TracingClient": "cafe.counter.clients.tracing",
    "decisions_shown": "cafe.counter.shifts",
    "get_client": "cafe.counter.clients",
    "handover_note": "cafe.counter.handover",
    "make_responder": "cafe.counter.consent",
    "record_shift": "cafe.counter.shifts",
    "replay_shift": "cafe.counter.shifts",
    "responder_of": "cafe.counter.shifts",
    "run_shift": "cafe.counter.loop",
    "script_of": "cafe.counter.shifts",
}

__all__ = ["transcript", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cafe.counter' has no attribute {name!r}")
    # Looked up in its module each time, not kept here: the face then always names what the
    # module holds now, also where a test runner imports the module afresh.
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
