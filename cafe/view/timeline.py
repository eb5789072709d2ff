"""A recording laid out on its recorded timeline: the rows a waterfall draws.

Only what the recording holds is shown, each call read by the reading of its API
(`cafe.apis`): its input and output in the GenAI conventions' message parts, its tool calls
and its usage, whatever the API. A call no reading knows is a row of its method, path and
status. Each call sits where its `timing` says (a plain recording without timings gets a
synthetic timeline, 1 ms a call, and says so). Tool calls are not timed by the recording:
they are read from the conversation (the call that asked for them, and the tool result
answering them in the next request) and placed, in order, in the gap between the call that
asked and the next call, marked as placed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cafe.apis import Message, ModelCall, Operation, api_for, openai_chat, read_exchange
from cafe.recording.format import RecordedCall, Recording
from cafe.recording.windows import SYNTHETIC_STEP_NS, call_windows
from cafe.view.words import ANY_AGENT, Badge, PageWords
from cafe.wire._exchange import payload_bytes

UNKNOWN_OPERATION = "call"
"""`CallRow.operation` of a call no reading knows: drawn as a call, never as a chat."""


@dataclass(frozen=True)
class ToolRow:
    call_id: str
    name: str
    arguments: str
    status: str  # from the tool result: its "status", "error" or "ok"; "no result recorded" if none
    result: str | None
    start_ns: int
    end_ns: int
    badges: tuple[Badge, ...] = ()  # beside the status: what the recording's own words add (a ticket)
    tallied: int | None = None  # the integer of the result field the page's tally lists


@dataclass(frozen=True)
class CallRow:
    index: int
    label: str  # `chat gpt-4o`, `embeddings text-embedding-3-small`, or `POST /v1/files` for an unknown API
    model: str
    start_ns: int
    end_ns: int
    input_tokens: int | None
    output_tokens: int | None
    finish_reason: str | None
    # The call's input as the page shows it, in the conventions' message parts: when the
    # request extends the previous call's (its messages, then that call's reply), only what it
    # adds, and `continues` names that call and `repeated` how many messages are not shown
    # again; otherwise the whole input. System instructions given apart lead it.
    messages: list[Message]
    reply: list[Message]
    continues: int | None = None
    repeated: int = 0
    tools: list[ToolRow] = field(default_factory=list)
    first_chunk_ns: int | None = None  # a streamed call: its first chunk's offset from the call's start
    status: int | None = None  # the HTTP status, when the recording holds the exchange
    known: bool = True  # a reading knows the call's API
    operation: str = "chat"  # `gen_ai.operation.name` of the call (`chat`, `embeddings`), `call` if not known
    vectors: int | None = None  # an embeddings call: how many vectors it answered
    dimensions: int | None = None  # and their length


@dataclass(frozen=True)
class ShiftTimeline:
    title: str
    model: str
    start_ns: int
    end_ns: int
    timed: bool  # False: a synthetic timeline (the recording holds no timings)
    stop_reason: str | None
    calls: list[CallRow]
    words: PageWords = ANY_AGENT

    @property
    def duration_ns(self) -> int:
        return max(self.end_ns - self.start_ns, 1)

    def rows(self) -> list[tuple[str, str, int, int]]:
        """(kind, label, start, end) of every bar, in time order: the run, calls, tools."""
        found = [("shift", self.title, self.start_ns, self.end_ns)]
        for call in self.calls:
            found.append((call.operation, call.label, call.start_ns, call.end_ns))
            found.extend(("tool", f"execute_tool {tool.name}", tool.start_ns, tool.end_ns) for tool in call.tools)
        return found


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_call(call: RecordedCall, *, content: bool = True) -> ModelCall:
    """A recorded call as its API's reading gives it (its conversation too, when `content`).
    A line without an HTTP exchange (a café recording of version 0 or 1, a plain file) holds
    a chat call; a café line on the wire is read from the café's call it also holds."""
    exchange = call.exchange or {}
    method = str(exchange.get("method") or "POST")
    path = str(exchange.get("target") or "").partition("?")[0]
    if not exchange or "request_json" in exchange:
        request = call.request if isinstance(call.request, dict) else None
        response = call.response if isinstance(call.response, dict) else None
        return read_exchange(openai_chat.API, method, path or "/chat/completions", status=_int(exchange.get("status")),
                             request=request, response=response, stream=_stream(exchange), content=content)
    return read_exchange(api_for(method, path), method, path, status=_int(exchange.get("status")),
                         request=call.request or None, response=call.response or None, stream=_stream(exchange),
                         content=content)


def _stream(exchange: Mapping[str, Any]) -> list[tuple[int, bytes]]:
    stream = exchange.get("stream")
    if not isinstance(stream, list):
        return []
    return [(_int(piece.get("offset_ns")) or 0, payload_bytes(piece)) for piece in stream if isinstance(piece, dict)]


def _input(reading: ModelCall) -> list[Message]:
    said = reading.content
    if said is None:
        return []
    leading: list[Message] = [{"role": "system", "parts": said.system_instructions}] if said.system_instructions else []
    return [*leading, *said.input_messages]


def _as_input(message: Message) -> Message:
    """An output message as the next request sends it back: without its finish reason."""
    return {key: value for key, value in message.items() if key != "finish_reason"}


def _repeated(earlier: list[Message] | None, reply: list[Message], messages: list[Message]) -> int:
    """How many of `messages` begin as `earlier` (the previous call's input) and then `reply`
    (its answer) do: the part a page need not show again. 0 unless the request truly extends
    the previous one: independent calls and a sliding window that dropped its oldest message
    repeat nothing."""
    if not earlier or len(messages) < len(earlier) or messages[:len(earlier)] != earlier:
        return 0
    answered = [_as_input(message) for message in reply]
    if answered and messages[len(earlier):len(earlier) + len(answered)] == answered:
        return len(earlier) + len(answered)
    return len(earlier)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _tool_answers(following: ModelCall | None) -> dict[str, str]:
    if following is None or following.content is None:
        return {}
    return {str(part.get("id")): _text(part.get("response"))
            for message in following.content.input_messages for part in message.get("parts", ())
            if isinstance(part, dict) and part.get("type") == "tool_call_response"}


def _status(result: str | None) -> tuple[str, dict[str, Any]]:
    if result is None:
        return "no result recorded", {}
    try:
        parsed = json.loads(result)
    except ValueError:
        return "ok", {}
    if not isinstance(parsed, dict):
        return "ok", {}
    status = parsed.get("status")
    if isinstance(status, str):
        return status, parsed
    return ("error" if "error" in parsed else "ok"), parsed


def _tools(reading: ModelCall, following: ModelCall | None, gap: tuple[int, int], words: PageWords) -> list[ToolRow]:
    requested = reading.response.tool_calls
    if not requested:
        return []
    answers = _tool_answers(following)
    start, end = gap
    step = max((end - start) // len(requested), 0)
    rows = []
    for position, tool_call in enumerate(requested):
        call_id = str(tool_call.id)
        name = str(tool_call.name)
        result = answers.get(call_id)
        status, parsed = _status(result)
        rows.append(ToolRow(
            call_id=call_id,
            name=name,
            arguments=str(tool_call.arguments),
            status=status,
            result=result,
            start_ns=start + position * step,
            end_ns=start + (position + 1) * step,
            badges=tuple(words.tool_badges(name, parsed)),
            tallied=_int(parsed.get(words.tally[1])) if words.tally is not None else None,
        ))
    return rows


def timeline(recording: Recording, words: PageWords = ANY_AGENT) -> ShiftTimeline:
    """`recording` laid out for a page, in `words` (`cafe.view.words_for(recording)`)."""
    recorded = call_windows(recording)
    windows = [(window.start, window.end) for window in recorded.calls]
    model = recording.model or "unknown"
    readings = [read_call(call) for call in recording.calls]
    calls: list[CallRow] = []
    # The last conversation's call, whole input and reply: an embeddings call's inputs are no
    # conversation a later call extends.
    earlier: tuple[int, list[Message], list[Message]] | None = None
    for position, (call, reading) in enumerate(zip(recording.calls, readings, strict=True)):
        following = readings[position + 1] if position + 1 < len(readings) else None
        start, end = windows[position]
        next_start = windows[position + 1][0] if following is not None else end + SYNTHETIC_STEP_NS
        messages = _input(reading)
        reply = reading.response.output_messages or []
        operation = reading.request.operation.value if reading.request is not None else UNKNOWN_OPERATION
        conversation = operation != Operation.EMBEDDINGS
        repeated = _repeated(earlier[1], earlier[2], messages) if earlier is not None and conversation else 0
        usage = reading.response.usage
        asked_model = reading.request.model if reading.request is not None else None
        row = CallRow(
            index=call.index,
            label=reading.label if asked_model or reading.api is None else f"{reading.label} {call.model or model}",
            model=asked_model or call.model or model,
            start_ns=start,
            end_ns=end,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            finish_reason=reading.response.finish_reasons[0] if reading.response.finish_reasons else None,
            messages=messages[repeated:],
            reply=reply,
            continues=earlier[0] if repeated and earlier is not None else None,
            repeated=repeated,
            tools=_tools(reading, following, (end, max(next_start, end)), words),
            first_chunk_ns=reading.first_chunk_ns,
            status=reading.status,
            known=reading.api is not None,
            operation=operation,
            vectors=reading.response.embeddings,
            dimensions=reading.response.dimension_count,
        )
        calls.append(row)
        if conversation:
            earlier = (row.index, messages, reply)
    run_start = recorded.shift.start
    ends = [recorded.shift.end] + [tool.end_ns for call in calls for tool in call.tools]
    return ShiftTimeline(
        title=f"{words.run} {recording.header.conversation_id}" if recording.header.conversation_id else words.run,
        model=model,
        start_ns=run_start,
        end_ns=max(ends, default=run_start),
        timed=recorded.timed,
        stop_reason=recording.ending.stop_reason if recording.ending else None,
        calls=calls,
        words=words,
    )
