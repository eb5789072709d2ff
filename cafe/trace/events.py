"""The shift's trace as typed events: what a `Tracer` hands to its listeners.

Each span is a pair of events (`...Started`, `...Ended`) sharing a `span_id`; `parent_id`
is the enclosing span's id (None at the root). `at` is the tracer clock's reading, in
seconds. Two point events (`ConsentDecided`, `TicketFired`) belong to the span they
happened in. Events are immutable values: a listener may keep them (a buffer, a replay) but
must not change what they reference. A generation's input messages are shared by every
listener and every later call, and refuse to change (`cafe.trace.history`); its response is
shared too, and must be left as it is. The four a model call makes (its request and result,
its started and ended events) are named tuples, on every call's path: a frozen dataclass
sets each field through `object.__setattr__`, several times the cost of building a tuple,
and a tuple is as immutable. Their reprs leave out a response, its output text and an
exception (each can quote customer text).

A listener reads typed fields, never a string key another module wrote; a renamed field
or enum member breaks a type check or an import, not silently an attribute.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from cafe.trace.outcomes import ConsentDecision, ConsentOutcome, StopReason, ToolStatus

if TYPE_CHECKING:
    from cafe.apis import ModelCall


class NodeKind(StrEnum):
    """What a span of the shift is. `SPAN` is a plain span opened with `Tracer.span`."""

    SHIFT = "shift"
    PHASE = "phase"
    GENERATION = "generation"
    TOOL = "tool"
    SPAN = "span"


class Phase(StrEnum):
    SETUP = "setup"
    TURN = "turn"
    WRAPUP = "wrapup"


def phase_name(phase: Phase, turn: int | None) -> str:
    return f"turn {turn}" if phase is Phase.TURN else phase.value


class GenerationRequest(NamedTuple):
    """One model call as it was asked for. `messages` is what the call was sent, read-only
    (a `cafe.trace.history.HistoryView` from a tracer: the calls of a shift share one frozen copy
    of each message), when the tracer keeps inputs, and empty when it does not (a
    metadata-only tracer copies nothing)."""

    model: str
    provider: str
    messages: Sequence[Mapping[str, Any]] = ()
    temperature: float | None = None
    tools: Sequence[Mapping[str, Any]] | None = None
    # Where the model was reached, when it was over the network (a live client).
    server_address: str | None = None
    server_port: int | None = None
    # The call as its API's reading gives it, when it was read from a recorded exchange of an
    # API other than chat completions (`cafe export`): its operation, content and answer.
    reading: ModelCall | None = None


class GenerationResult(NamedTuple):
    """What a chat-completions response says, read once; `response` is the response itself."""

    response: Mapping[str, Any]
    model: str | None
    response_id: str | None
    finish_reasons: tuple[str, ...]
    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None
    tool_calls: tuple[str, ...]  # the requested tool names, as the model wrote them
    output: str | None

    def __repr__(self) -> str:  # without the response and the output text (content)
        return (f"GenerationResult(model={self.model!r}, response_id={self.response_id!r}, "
                f"finish_reasons={self.finish_reasons!r}, input_tokens={self.input_tokens!r}, "
                f"output_tokens={self.output_tokens!r}, total_tokens={self.total_tokens!r}, "
                f"tool_calls={len(self.tool_calls)})")

    @classmethod
    def of(cls, response: Mapping[str, Any]) -> GenerationResult:
        # On every model call's path: plain loops, no helper calls.
        choices = response.get("choices") or ()
        finish: list[str] = []
        for choice in choices:
            reason = choice.get("finish_reason")
            if reason is not None:
                finish.append(str(reason))
        message = (choices[0].get("message") if choices else None) or {}
        calls = message.get("tool_calls")
        usage = response.get("usage") or {}
        prompt, completion, total = (usage.get("prompt_tokens"), usage.get("completion_tokens"),
                                     usage.get("total_tokens"))
        model, response_id = response.get("model"), response.get("id")
        return tuple.__new__(cls, (  # every field in order, without the named tuple's Python constructor
            response,
            model if isinstance(model, str) else None,
            response_id if isinstance(response_id, str) else None,
            tuple(finish),
            prompt if type(prompt) is int else None,  # not bool, not a float that looks whole
            completion if type(completion) is int else None,
            total if type(total) is int else None,
            tuple((call.get("function") or {}).get("name", "") for call in calls) if calls else (),
            message.get("content"),
        ))


@dataclass(frozen=True, slots=True)
class _Event:
    span_id: int
    parent_id: int | None
    at: float


@dataclass(frozen=True, slots=True)
class _Ended(_Event):
    # The exception that ended the span, if one did. Out of repr: its message may quote
    # customer text. `error_type` (the class name) is what goes anywhere else.
    error: BaseException | None = field(default=None, repr=False, compare=False, kw_only=True)

    @property
    def error_type(self) -> str | None:
        return None if self.error is None else type(self.error).__name__


@dataclass(frozen=True, slots=True)
class ShiftStarted(_Event):
    agent: str
    conversation_id: str | None
    model: str | None
    provider: str | None


@dataclass(frozen=True, slots=True)
class ShiftEnded(_Ended):
    # None when the shift raised before it could say (then `error` is set).
    stop_reason: StopReason | None = None
    turns: int | None = None
    tickets: int | None = None
    repairs: int | None = None  # invalid tool calls re-asked (the repair budget spent)


@dataclass(frozen=True, slots=True)
class PhaseStarted(_Event):
    phase: Phase
    turn: int | None = None

    @property
    def name(self) -> str:
        return phase_name(self.phase, self.turn)


@dataclass(frozen=True, slots=True)
class PhaseEnded(_Ended):
    phase: Phase
    turn: int | None = None
    stop_reason: StopReason | None = None  # set on the turn that ended the shift


_NO_ATTRS: Mapping[str, Any] = MappingProxyType({})


class GenerationStarted(NamedTuple):
    span_id: int
    parent_id: int | None
    at: float
    name: str
    request: GenerationRequest
    # Extra annotations a caller gave `Tracer.generation(**attrs)`: for the in-memory tree
    # only (rendered); no exporter reads them.
    attrs: Mapping[str, Any] = _NO_ATTRS


class GenerationEnded(NamedTuple):
    span_id: int
    parent_id: int | None
    at: float
    request: GenerationRequest
    result: GenerationResult | None = None  # None when the call raised
    # The exception that ended the span, if one did. Out of repr: its message may quote
    # customer text. `error_type` (the class name) is what goes anywhere else.
    error: BaseException | None = None
    # The clock reading its GenerationStarted had: a listener shared by several tracers
    # (several shifts at once) needs no per-span state of its own to know the duration.
    started_at: float | None = None

    @property
    def error_type(self) -> str | None:
        return None if self.error is None else type(self.error).__name__

    @property
    def response(self) -> Mapping[str, Any] | None:
        return None if self.result is None else self.result.response

    def __repr__(self) -> str:  # without the exception (its message) and the request's content
        return (f"GenerationEnded(span_id={self.span_id!r}, parent_id={self.parent_id!r}, at={self.at!r}, "
                f"model={self.request.model!r}, result={self.result!r}, error_type={self.error_type!r}, "
                f"started_at={self.started_at!r})")


@dataclass(frozen=True, slots=True)
class ToolStarted(_Event):
    name: str  # as the model requested it: any string (map it to a safe label before export)
    call_id: str
    arguments: str | None = field(default=None, repr=False)  # content
    defined: bool = False  # the agent defines a tool of this name: the name is its own, not free text


@dataclass(frozen=True, slots=True)
class ToolEnded(_Ended):
    name: str
    call_id: str
    status: ToolStatus | None = None
    ticket_number: int | None = None
    arguments: str | None = field(default=None, repr=False)  # content
    result: str | None = field(default=None, repr=False)  # content: the text the model got back
    defined: bool = False  # as ToolStarted's


@dataclass(frozen=True, slots=True)
class ConsentDecided(_Event):
    """One round at the consent gate, inside the `propose_order` tool span `span_id`."""

    turn: int
    round: int
    outcome: ConsentOutcome
    decision: ConsentDecision | None = None  # what the customer said; None for an answer of no known kind


@dataclass(frozen=True, slots=True)
class TicketFired(_Event):
    """A ticket reached the kitchen, from the `fire_ticket` tool span `span_id`."""

    number: int
    turn: int


@dataclass(frozen=True, slots=True)
class SpanStarted(_Event):
    """A plain span (`Tracer.span`): a name, a kind and free annotations for the tree."""

    name: str
    kind: str
    attrs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SpanEnded(_Ended):
    name: str
    kind: str
    attrs: Mapping[str, Any] = field(default_factory=dict)  # what `.set()` added


TraceEvent = (
    ShiftStarted | ShiftEnded | PhaseStarted | PhaseEnded | GenerationStarted | GenerationEnded
    | ToolStarted | ToolEnded | ConsentDecided | TicketFired | SpanStarted | SpanEnded
)
STARTED = (ShiftStarted, PhaseStarted, GenerationStarted, ToolStarted, SpanStarted)
ENDED = (ShiftEnded, PhaseEnded, GenerationEnded, ToolEnded, SpanEnded)


@runtime_checkable
class TraceListener(Protocol):
    """Anything that hears a tracer's events. It should not raise; when it does, the
    tracer counts the failure and the shift goes on."""

    def on_event(self, event: TraceEvent) -> None: ...
