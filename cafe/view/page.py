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
from typing import Any

from cafe.trace.render import format_seconds
from cafe.view.timeline import CallRow, ShiftTimeline, ToolRow

_FAILED = {"refused", "aborted", "duplicate", "invalid", "cancelled", "error", "rejected", "no result recorded"}

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#fbfaf7}
header{background:#7a2e12;color:#fff;padding:10px 18px}
header strong{letter-spacing:.02em}
main{padding:12px 18px}
.summary{margin:6px 0 14px;color:#3b444f}
.summary b{color:#1d232a}
.row{display:grid;grid-template-columns:minmax(300px,40%) 1fr;align-items:center;
  border-bottom:1px solid #ece8df;min-height:26px}
.label{padding:3px 8px 3px 0;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.label .meta{color:#6b7280;font-size:12px;margin-left:6px}
.lane{position:relative;height:18px;background:repeating-linear-gradient(90deg,#f3f0e8 0 1px,transparent 1px 10%)}
.bar{position:absolute;top:2px;height:14px;min-width:1px;border-radius:2px}
.shift .bar{background:#6b7280}.chat .bar{background:#2563eb}.tool .bar{background:#059669}
.tool.failed .bar{background:#dc2626}.tool .label{padding-left:22px}
.placed .bar{opacity:.55;background-image:repeating-linear-gradient(45deg,transparent 0 3px,#fff6 3px 6px)}
.badge{display:inline-block;border-radius:8px;padding:0 6px;font-size:12px;margin-left:6px;background:#e5e7eb}
.badge.failed{background:#fee2e2;color:#991b1b}.badge.ticket{background:#dcfce7;color:#166534}
details{grid-column:1/3;margin:0 0 6px 22px}
details pre{white-space:pre-wrap;word-break:break-word;background:#f3f0e8;padding:6px 8px;margin:4px 0;
  font:12px/1.4 ui-monospace,monospace}
.stop{margin-top:14px;font-weight:600}
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def format_duration(ns: int) -> str:
    """A duration in ns as the span tree prints one: 740µs, 12.3ms, 1.520s."""
    return format_seconds(ns / 1e9)


def _bar(timeline: ShiftTimeline, start: int, end: int) -> str:
    left = (start - timeline.start_ns) / timeline.duration_ns * 100
    width = max(end - start, 0) / timeline.duration_ns * 100
    return f'<div class="lane"><div class="bar" style="left:{left:.4f}%;width:{width:.4f}%"></div></div>'


def _row(timeline: ShiftTimeline, kind: str, label: str, meta: str, start: int, end: int,
         extra_class: str = "") -> str:
    classes = " ".join(c for c in ("row", kind, extra_class) if c)
    return (
        f'<div class="{classes}" data-kind="{kind}" data-name="{_e(label)}" data-start-ns="{start}" '
        f'data-duration-ns="{max(end - start, 0)}">'
        f'<div class="label">{_e(label)}<span class="meta">{meta}</span></div>{_bar(timeline, start, end)}</div>'
    )


def _message_text(message: dict[str, Any]) -> str:
    role = message.get("role", "?")
    if role == "tool":
        return f"tool[{message.get('tool_call_id')}]: {message.get('content')}"
    lines = [f"{role}: {message['content']}"] if message.get("content") is not None else []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {} if isinstance(call, dict) else {}
        lines.append(f"{role} -> {function.get('name')}({function.get('arguments')})")
    return "\n".join(lines) or f"{role}:"


def _call(timeline: ShiftTimeline, call: CallRow) -> str:
    tokens = (f"{call.input_tokens}+{call.output_tokens} tokens"
              if call.input_tokens is not None or call.output_tokens is not None else "no usage")
    meta = f"call {call.index} · {format_duration(call.end_ns - call.start_ns)} · {tokens}"
    if call.first_chunk_ns is not None:
        meta += f" · first chunk at {format_duration(call.first_chunk_ns)}"
    if call.finish_reason:
        meta += f" · {_e(call.finish_reason)}"
    parts = [_row(timeline, "chat", f"chat {call.model}", _e(meta), call.start_ns, call.end_ns)]
    shown = "\n\n".join(_message_text(m) for m in [*call.new_messages, call.reply])
    parts.append(f"<details><summary>messages of call {call.index}</summary><pre>{_e(shown)}</pre></details>")
    parts.extend(_tool(timeline, tool) for tool in call.tools)
    return "\n".join(parts)


def _tool(timeline: ShiftTimeline, tool: ToolRow) -> str:
    failed = tool.status in _FAILED
    badges = [f'<span class="badge{" failed" if failed else ""}">{_e(tool.status)}</span>']
    if tool.decision is not None:
        badges.append(f'<span class="badge">consent: {_e(tool.decision)}</span>')
    if tool.ticket_number is not None:
        badges.append(f'<span class="badge ticket">ticket {tool.ticket_number}</span>')
    meta = f"{_e(tool.call_id)} {''.join(badges)}"
    row = _row(timeline, "tool", f"execute_tool {tool.name}", meta, tool.start_ns, tool.end_ns,
               "placed failed" if failed else "placed")
    detail = f"arguments: {tool.arguments}\nresult: {tool.result if tool.result is not None else '(no answer)'}"
    return row + f"<details><summary>{_e(tool.name)} {_e(tool.call_id)}</summary><pre>{_e(detail)}</pre></details>"


def shift_page(timeline: ShiftTimeline, *, source: str) -> str:
    """The page for one recorded shift; `source` names the recording it was made from."""
    calls = len(timeline.calls)
    tokens_in = sum(c.input_tokens or 0 for c in timeline.calls)
    tokens_out = sum(c.output_tokens or 0 for c in timeline.calls)
    tickets = [t.ticket_number for c in timeline.calls for t in c.tools if t.ticket_number is not None]
    clock = ("recorded timeline" if timeline.timed
             else "synthetic timeline: this recording holds no timings, each call is drawn 1 ms long")
    summary = (
        f"<b>{_e(timeline.model)}</b> · {calls} model call(s) · {tokens_in}+{tokens_out} tokens · "
        f"{format_duration(timeline.end_ns - timeline.start_ns)} · {_e(clock)} · tool times are not recorded: "
        "each tool is placed after the call that asked for it"
    )
    rows = [_row(timeline, "shift", timeline.title, _e(f"{calls} call(s)"), timeline.start_ns, timeline.end_ns)]
    rows.extend(_call(timeline, call) for call in timeline.calls)
    stop = timeline.stop_reason or "not recorded (the shift did not finish, or the recording has no end line)"
    data = json.dumps({"calls": calls, "tickets": tickets, "stop_reason": timeline.stop_reason})
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>{_e(timeline.title)}</title><style>{_STYLE}</style></head>
<body data-shift="{_e(data)}">
<header><strong>PRIVATE</strong>: this page holds the customer's conversation from {_e(source)}.
Keep it like the recording: do not commit, attach or share it.</header>
<main>
<div class="summary">{summary}</div>
<div class="waterfall">
{chr(10).join(rows)}
</div>
<div class="stop" data-stop-reason="{_e(timeline.stop_reason or '')}">stop reason: {_e(stop)}</div>
<div class="tickets">tickets fired: {_e(", ".join(map(str, tickets)) or "none")}</div>
</main></body></html>
"""
