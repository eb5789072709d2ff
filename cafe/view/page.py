"""One self-contained HTML page of a recorded shift: a waterfall on its recorded timeline.

No script, no network: the styles are inline and a Content-Security-Policy forbids every
fetch, so the page opens the same offline, from a mail attachment or a CI artefact. Every
piece of recorded text is HTML-escaped (a customer line can hold anything). The page
holds the customer's conversation, so it says so at the top; `write_private_page` creates
it 0600 and never over an existing file.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Any

from cafe.trace.render import format_seconds
from cafe.view.timeline import CallRow, ShiftTimeline, ToolRow

EMBEDDINGS = "embeddings"  # `CallRow.operation` of an embeddings call
_FAILED = {"refused", "aborted", "duplicate", "invalid", "cancelled", "error", "rejected", "no result recorded"}

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#fbfaf7}
header{background:#7a2e12;color:#fff;padding:10px 18px}
header strong{letter-spacing:.02em}
main{padding:12px 24px 24px 18px}
.summary{margin:6px 0 14px;color:#3b444f}
.summary b{color:#1d232a}
.row,.line{display:grid;grid-template-columns:minmax(300px,40%) 1fr;align-items:center;
  border-bottom:1px solid #ece8df;min-height:26px}
.label{padding:3px 8px 3px 0;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.label .meta{color:#6b7280;font-size:12px;margin-left:6px}
.lane{position:relative;height:18px}
.bar{position:absolute;top:2px;height:14px;min-width:6px;border-radius:2px;box-sizing:border-box;
  background:#2563eb}
.shift .bar{background:#6b7280}.embeddings .bar{background:#7c3aed}.call .bar{background:#9ca3af}
.tool .bar{background:#10b981}
.tool.failed .bar{background:#ef4444}.tool .label{padding-left:22px}
.placed .bar{border:1px dashed #065f46}.tool.failed.placed .bar{border-color:#7f1d1d}
.axis{position:sticky;top:0;z-index:1;background:#fbfaf7;border-bottom:1px solid #9ca3af;min-height:22px}
.axis .label{color:#6b7280;font-size:12px}
.axis .lane{height:22px}
.tick{position:absolute;bottom:0;height:6px;border-left:1px solid #6b7280}
.tick span{position:absolute;bottom:6px;left:-1px;font-size:11px;color:#4b5563;white-space:nowrap;
  transform:translateX(-50%)}
.tick:first-child span{transform:none}.tick.end span{transform:translateX(-100%)}
.setup .lane{color:#6b7280;font-size:12px;display:flex;align-items:center;
  border-left:3px double #9ca3af;padding-left:6px;height:18px}
.badge{display:inline-block;border-radius:8px;padding:0 6px;font-size:12px;margin-left:6px;background:#e5e7eb}
.badge.failed{background:#fee2e2;color:#991b1b}.badge.ticket{background:#dcfce7;color:#166534}
details{grid-column:1/3;margin:0 0 4px 22px;font-size:13px;color:#4b5563}
details summary{cursor:pointer}
details pre{white-space:pre-wrap;word-break:break-word;background:#f3f0e8;padding:6px 8px;margin:4px 0;
  font:12px/1.4 ui-monospace,monospace;color:#1d232a}
.stop{margin-top:14px;font-weight:600}
"""
# Ticks of the time axis: a step of 1, 2 or 5 times a power of ten, the smallest that keeps
# the axis to at most this many intervals.
_MOST_TICKS = 8


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def format_duration(ns: int) -> str:
    """A duration in ns as the span tree prints one: 740µs, 12.3ms, 1.520s."""
    return format_seconds(ns / 1e9)


@dataclass(frozen=True)
class Scale:
    """The waterfall's time scale: from the first drawn event (the first model call) to the
    shift's end. What came before the first call (setup) is a row of its own, not empty space."""

    start_ns: int
    end_ns: int

    @classmethod
    def of(cls, timeline: ShiftTimeline) -> Scale:
        start = min((call.start_ns for call in timeline.calls), default=timeline.start_ns)
        return cls(start, max(timeline.end_ns, start))

    @property
    def span_ns(self) -> int:
        return max(self.end_ns - self.start_ns, 1)

    def percent(self, ns: int) -> float:
        return ns / self.span_ns * 100

    def tick_step_ns(self) -> int:
        magnitude = 1
        while True:
            for factor in (1, 2, 5):
                if self.span_ns / (factor * magnitude) <= _MOST_TICKS:
                    return factor * magnitude
            magnitude *= 10


def _axis(scale: Scale) -> str:
    step = scale.tick_step_ns()
    ticks = "".join(
        # A label near the right edge ends at its tick, so that it stays inside the page.
        f'<div class="tick{" end" if scale.percent(offset) > 92 else ""}" style="left:{scale.percent(offset):.4f}%">'
        f'<span>{"0" if offset == 0 else "+" + format_duration(offset)}</span></div>'
        for offset in range(0, scale.span_ns + 1, step)
    )
    return (f'<div class="line axis" data-tick-ns="{step}"><div class="label">time since the first model call</div>'
            f'<div class="lane">{ticks}</div></div>')


def _grid(scale: Scale) -> str:
    """A line down every lane at each tick of the axis."""
    step = f"{scale.percent(scale.tick_step_ns()):.4f}%"
    return f".row .lane{{background:repeating-linear-gradient(90deg,#e7e2d6 0 1px,transparent 1px {step})}}"


def _bar(scale: Scale, start: int, end: int, tooltip: str) -> str:
    start = max(start, scale.start_ns)  # the shift's setup is a row of its own
    left = scale.percent(start - scale.start_ns)
    width = scale.percent(max(end - start, 0))
    return (f'<div class="lane"><div class="bar" title="{_e(tooltip)}" '
            f'style="left:{left:.4f}%;width:{width:.4f}%"></div></div>')


def _row(scale: Scale, kind: str, label: str, meta: str, start: int, end: int,
         extra_class: str = "", tooltip: str | None = None) -> str:
    classes = " ".join(c for c in ("row", kind, extra_class) if c)
    if tooltip is None:
        tooltip = f"{label}: {format_duration(max(end - start, 0))}, from +{format_duration(start - scale.start_ns)}"
    # Real durations in the label and the tooltip: a short bar is drawn wider than it lasted.
    return (
        f'<div class="{classes}" data-kind="{kind}" data-name="{_e(label)}" data-start-ns="{start}" '
        f'data-duration-ns="{max(end - start, 0)}">'
        f'<div class="label">{_e(label)}<span class="meta">{meta}</span></div>'
        f"{_bar(scale, start, end, tooltip)}</div>"
    )


def _setup(timeline: ShiftTimeline, scale: Scale) -> str:
    """The time from the shift's start to its first model call, as a row, not to scale."""
    setup_ns = scale.start_ns - timeline.start_ns
    if setup_ns <= 0 or not timeline.timed:  # a synthetic timeline's lead-in is no setup
        return ""
    return (f'<div class="line setup" data-setup-ns="{setup_ns}">'
            f'<div class="label">setup<span class="meta">{format_duration(setup_ns)} before the first model call'
            "</span></div><div class=\"lane\">not drawn to scale: the axis starts at the first model call</div></div>")


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _part_text(role: str, part: Any) -> str:
    """One message part as a line of the page: text as it is, a tool call as `name(arguments)`,
    a tool's result by its call id, and anything else (an image, a file) as its JSON, inline
    data shown by its size only."""
    if not isinstance(part, dict):
        return f"{role}: {_compact_json(part)}"
    kind = part.get("type")
    if kind == "text":
        return f"{role}: {part.get('content')}"
    if kind == "reasoning":
        return f"{role} (reasoning): {part.get('content')}"
    if kind == "tool_call":
        arguments = part.get("arguments")
        shown = arguments if isinstance(arguments, str) else _compact_json(arguments)
        return f"{role} -> {part.get('name')}({shown})"
    if kind == "tool_call_response":
        response = part.get("response")
        return f"tool[{part.get('id')}]: {response if isinstance(response, str) else _compact_json(response)}"
    if kind == "blob" and isinstance(part.get("content"), str):
        part = {**part, "content": f"({len(part['content'])} characters of inline data)"}
    return f"{role}: {_compact_json(part)}"


def _message_text(message: dict[str, Any]) -> str:
    role = str(message.get("role") or "?")
    lines = [_part_text(role, part) for part in message.get("parts") or ()]
    return "\n".join(lines) or f"{role}:"


# A message at least this long that an earlier call's input already showed is shown as a
# link to it: a system prompt sent with each of 20,000 independent calls would otherwise be
# most of the page.
_LINKED_CHARS = 200


def _input(call: CallRow, first_shown: dict[str, int]) -> str:
    """The call's input and reply as the `<pre>` of its details: each message in full, but a
    long one shown in an earlier call's input, which is a link to that input."""
    shown = []
    for message in call.messages:
        text = _message_text(message)
        earlier = first_shown.get(text) if len(text) >= _LINKED_CHARS else None
        if earlier is None:
            if len(text) >= _LINKED_CHARS:
                first_shown[text] = call.index
            shown.append(_e(text))
        else:
            shown.append(f"{_e(message.get('role', '?'))}: <i>the same {len(text)} characters as in "
                         f'<a href="#input-{earlier}">the input of call {earlier}</a></i>')
    if call.operation == EMBEDDINGS:
        shown.append("→ " + _e(_vectors(call) or "(no vectors recorded)"))
        return "\n\n".join(shown)
    reply = "\n".join(_message_text(message) for message in call.reply) if call.reply else "(no reply recorded)"
    shown.append("→ reply\n" + _e(reply))
    return "\n\n".join(shown)


def _vectors(call: CallRow) -> str | None:
    """What an embeddings call answered: `2 vector(s) of 256 dimensions`."""
    if call.vectors is None:
        return None
    size = f" of {call.dimensions} dimensions" if call.dimensions is not None else ""
    return f"{call.vectors} vector(s){size}"


def _tokens(call: CallRow) -> str:
    """The usage an answer reported: input+output (`?` for a count it did not report), the
    input alone for an embeddings call (it has no output tokens)."""
    if call.operation == EMBEDDINGS:
        return f"{call.input_tokens} input tokens" if call.input_tokens is not None else "no usage"
    if call.input_tokens is None and call.output_tokens is None:
        return "no usage"
    shown = ("?" if count is None else str(count) for count in (call.input_tokens, call.output_tokens))
    return "+".join(shown) + " tokens"


def _call(scale: Scale, call: CallRow, first_shown: dict[str, int]) -> str:
    meta = f"call {call.index} · {format_duration(call.end_ns - call.start_ns)}"
    if not call.known:  # shown as what it is; the recording keeps its request and answer as sent
        meta += f" · status {call.status or '?'} · an API cafe does not read"
    elif call.operation == EMBEDDINGS:
        meta += f" · {len(call.messages)} input(s) · {_tokens(call)}"
        if (vectors := _vectors(call)) is not None:
            meta += f" · {vectors}"
    else:
        meta += f" · {_tokens(call)}"
    if call.first_chunk_ns is not None:
        meta += f" · first chunk at {format_duration(call.first_chunk_ns)}"
    if call.finish_reason:
        meta += f" · {_e(call.finish_reason)}"
    parts = [_row(scale, call.operation, call.label, _e(meta), call.start_ns, call.end_ns)]
    if not call.known:
        return "\n".join(parts)
    if call.continues is not None:
        what = (f"continues call {call.continues} ({call.repeated} earlier message(s) not repeated), "
                f"{len(call.messages)} new")
    elif call.operation == EMBEDDINGS:
        what = f"{len(call.messages)} input(s)"
    else:
        what = f"the whole input, {len(call.messages)} message(s)"
    parts.append(f'<details id="input-{call.index}"><summary>input of call {call.index}: {_e(what)}</summary>'
                 f"<pre>{_input(call, first_shown)}</pre></details>")
    parts.extend(_tool(scale, call, tool) for tool in call.tools)
    return "\n".join(parts)


def _tool(scale: Scale, call: CallRow, tool: ToolRow) -> str:
    failed = tool.status in _FAILED
    badges = [f'<span class="badge{" failed" if failed else ""}">{_e(tool.status)}</span>']
    badges.extend(f'<span class="badge{" " + _e(kind) if kind else ""}">{_e(text)}</span>'
                  for kind, text in tool.badges)
    meta = f"{_e(tool.call_id)} {''.join(badges)}"
    row = _row(scale, "tool", f"execute_tool {tool.name}", meta, tool.start_ns, tool.end_ns,
               "placed failed" if failed else "placed",
               tooltip=f"{tool.name} {tool.status}: its time is not recorded; placed after call {call.index}")
    detail = f"arguments: {tool.arguments}\nresult: {tool.result if tool.result is not None else '(no answer)'}"
    return row + f"<details><summary>{_e(tool.name)} {_e(tool.call_id)}</summary><pre>{_e(detail)}</pre></details>"


def shift_page(timeline: ShiftTimeline, *, source: str) -> str:
    """The page for one recorded run (a café shift in the café's words); `source` names the
    recording it was made from."""
    words = timeline.words
    calls = len(timeline.calls)
    tokens_in = sum(c.input_tokens or 0 for c in timeline.calls)
    tokens_out = sum(c.output_tokens or 0 for c in timeline.calls)
    tallied = [t.tallied for c in timeline.calls for t in c.tools if t.tallied is not None]
    clock = ("recorded timeline" if timeline.timed
             else "synthetic timeline: this recording holds no timings, each call is drawn 1 ms long")
    summary = (
        f"<b>{_e(timeline.model)}</b> · {calls} model call(s) · {tokens_in}+{tokens_out} tokens · "
        f"{format_duration(timeline.end_ns - timeline.start_ns)} · {_e(clock)} · tool times are not recorded: "
        "each tool is placed after the call that asked for it"
    )
    scale = Scale.of(timeline)
    shift_ns = format_duration(timeline.end_ns - timeline.start_ns)
    rows = [_axis(scale),
            _row(scale, "shift", timeline.title, _e(f"{calls} call(s) · {shift_ns}"), timeline.start_ns,
                 timeline.end_ns, tooltip=f"{timeline.title}: {shift_ns} in all"),
            _setup(timeline, scale)]
    first_shown: dict[str, int] = {}
    rows.extend(_call(scale, call, first_shown) for call in timeline.calls)
    stop = timeline.stop_reason or f"not recorded (the {words.run} did not finish, or the recording has no end line)"
    shown: dict[str, Any] = {"calls": calls, "stop_reason": timeline.stop_reason}
    tally = ""
    if words.tally is not None:
        shown[words.tally[1]] = tallied
        tally = f'<div class="tally">{_e(words.tally[0])}: {_e(", ".join(map(str, tallied)) or "none")}</div>\n'
    data = json.dumps(shown)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>{_e(timeline.title)}</title><style>{_STYLE}{_grid(scale)}</style></head>
<body data-run="{_e(data)}">
<header><strong>PRIVATE</strong>: this page holds the {_e(words.owner)}'s conversation from {_e(source)}.
Keep it like the recording: do not commit, attach or share it.</header>
<main>
<div class="summary">{summary}</div>
<div class="waterfall" data-scale-start-ns="{scale.start_ns}" data-scale-ns="{scale.span_ns}">
{chr(10).join(rows)}
</div>
<div class="stop" data-stop-reason="{_e(timeline.stop_reason or '')}">stop reason: {_e(stop)}</div>
{tally}</main></body></html>
"""
