"""A recorded shift laid out on its recorded timeline: the rows a waterfall draws.

Only what the recording holds is shown. Each model call sits where its `timing` says
(a plain recording without timings gets a synthetic timeline, 1 ms a call, and says so).
Tool calls are not timed by the recording: they are read from the conversation (the call
that asked for them, and the tool message answering them in the next request) and placed,
in order, in the gap between the call that asked and the next call, marked as placed.
Consent decisions are the `propose_order` results, tickets the `fire_ticket` results.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from cafe.recording.format import RecordedCall, Recording
from cafe.recording.windows import SYNTHETIC_STEP_NS, call_windows
from cafe.view.words import ANY_AGENT, Badge, PageWords


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
    model: str
    start_ns: int
    end_ns: int
    input_tokens: int | None
    output_tokens: int | None
    finish_reason: str | None
    # The call's input as the page shows it: when the request extends the previous call's
    # (its messages, then that call's reply), only what it adds, and `continues` names that
    # call and `repeated` how many messages are not shown again; otherwise the whole input.
    messages: list[dict[str, Any]]
    reply: dict[str, Any]
    continues: int | None = None
    repeated: int = 0
    tools: list[ToolRow] = field(default_factory=list)
    first_chunk_ns: int | None = None  # a streamed call: its first chunk's offset from the call's start


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
        """(kind, label, start, end) of every bar, in time order: shift, calls, tools."""
        found = [("shift", self.title, self.start_ns, self.end_ns)]
        for call in self.calls:
            found.append(("chat", f"chat {call.model}", call.start_ns, call.end_ns))
            found.extend(("tool", f"execute_tool {tool.name}", tool.start_ns, tool.end_ns) for tool in call.tools)
        return found


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _reply(call: RecordedCall) -> dict[str, Any]:
    choices = call.response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict):
            return message
    return {}


def _finish_reason(call: RecordedCall) -> str | None:
    choices = call.response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        reason = choices[0].get("finish_reason")
        return reason if isinstance(reason, str) else None
    return None


def _first_chunk_ns(call: RecordedCall) -> int | None:
    stream = (call.exchange or {}).get("stream")
    if isinstance(stream, list) and stream and isinstance(stream[0], dict):
        return _int(stream[0].get("offset_ns"))
    return None


def _messages(call: RecordedCall) -> list[dict[str, Any]]:
    messages = call.request.get("messages")
    return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []


def _repeated(earlier: list[dict[str, Any]] | None, reply: dict[str, Any], messages: list[dict[str, Any]]) -> int:
    """How many of `messages` begin as `earlier` (the previous call's input) and then `reply`
    (its answer) do: the part a page need not show again. 0 unless the request truly extends
    the previous one: independent calls and a sliding window that dropped its oldest message
    repeat nothing."""
    if not earlier or len(messages) < len(earlier) or messages[:len(earlier)] != earlier:
        return 0
    if len(messages) > len(earlier) and messages[len(earlier)] == reply:
        return len(earlier) + 1
    return len(earlier)


def _tool_answers(following: RecordedCall | None) -> dict[str, str]:
    if following is None:
        return {}
    return {
        str(message.get("tool_call_id")): str(message.get("content"))
        for message in _messages(following)
        if message.get("role") == "tool"
    }


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


def _tools(call: RecordedCall, following: RecordedCall | None, gap: tuple[int, int],
           words: PageWords) -> list[ToolRow]:
    requested = [c for c in _reply(call).get("tool_calls") or [] if isinstance(c, dict)]
    if not requested:
        return []
    answers = _tool_answers(following)
    start, end = gap
    step = max((end - start) // len(requested), 0)
    rows = []
    for position, tool_call in enumerate(requested):
        raw_function = tool_call.get("function")
        function: dict[str, Any] = raw_function if isinstance(raw_function, dict) else {}
        call_id = str(tool_call.get("id"))
        result = answers.get(call_id)
        status, parsed = _status(result)
        rows.append(ToolRow(
            call_id=call_id,
            name=str(function.get("name")),
            arguments=str(function.get("arguments")),
            status=status,
            result=result,
            start_ns=start + position * step,
            end_ns=start + (position + 1) * step,
            badges=tuple(words.tool_badges(str(function.get("name")), parsed)),
            tallied=_int(parsed.get(words.tally[1])) if words.tally is not None else None,
        ))
    return rows


def timeline(recording: Recording, words: PageWords = ANY_AGENT) -> ShiftTimeline:
    """`recording` laid out for a page, in `words` (`cafe.view.words_for(recording)`)."""
    recorded = call_windows(recording)
    windows = [(window.start, window.end) for window in recorded.calls]
    model = recording.model or "unknown"
    calls: list[CallRow] = []
    earlier: list[dict[str, Any]] | None = None
    for position, call in enumerate(recording.calls):
        following = recording.calls[position + 1] if position + 1 < len(recording.calls) else None
        start, end = windows[position]
        next_start = windows[position + 1][0] if following is not None else end + SYNTHETIC_STEP_NS
        messages = _messages(call)
        reply = _reply(call)
        repeated = _repeated(earlier, calls[-1].reply, messages) if calls else 0
        raw_usage = call.response.get("usage")
        usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        calls.append(CallRow(
            index=call.index,
            model=call.model or model,
            start_ns=start,
            end_ns=end,
            input_tokens=_int(usage.get("prompt_tokens")),
            output_tokens=_int(usage.get("completion_tokens")),
            finish_reason=_finish_reason(call),
            messages=messages[repeated:],
            reply=reply,
            continues=calls[-1].index if repeated else None,
            repeated=repeated,
            tools=_tools(call, following, (end, max(next_start, end)), words),
            first_chunk_ns=_first_chunk_ns(call),
        ))
        earlier = messages
    shift_start = recorded.shift.start
    ends = [recorded.shift.end] + [tool.end_ns for call in calls for tool in call.tools]
    return ShiftTimeline(
        title=f"{words.run} {recording.header.conversation_id}" if recording.header.conversation_id else words.run,
        model=model,
        start_ns=shift_start,
        end_ns=max(ends, default=shift_start),
        timed=recorded.timed,
        stop_reason=recording.ending.stop_reason if recording.ending else None,
        calls=calls,
        words=words,
    )
