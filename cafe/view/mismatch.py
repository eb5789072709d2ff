"""A replay that failed, as a page: the recorded and the incoming request side by side.

The first differing path (the one the one-line error names) is highlighted on both sides,
the calls that matched before it are listed greyed, and the recorded calls that were never
reached are listed after it. A transcript mismatch (every call matched, the conversation
did not) shows the two transcripts instead, the first differing line highlighted. A summary
at the top links to each highlight (plain anchors: the page runs no script). Same rules as
the shift page: self-contained, no network, every recorded string escaped, private (it
holds the conversation).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cafe.apis import api_for, openai_chat, request_summary
from cafe.jsondata import JsonPath, shown_path
from cafe.recording.errors import (
    RecordingExhausted,
    ReplayError,
    ReplayMismatch,
    TranscriptMismatch,
    UnusedCalls,
)
from cafe.recording.format import RecordedCall, Recording

_ABSENT = object()
# A call list longer than this starts folded: the summary above it says where to look.
_FOLDED_CALLS = 20
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
_LONGEST_SHOWN_KEY = 80

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#fbfaf7}
header{background:#7a2e12;color:#fff;padding:10px 18px}
main{padding:12px 18px}
.summary{border:1px solid #e7c9bd;border-left:6px solid #b91c1c;background:#fff;padding:10px 14px;margin:0 0 14px}
.summary h1{font-size:18px;margin:0 0 6px}
.summary p{margin:4px 0}
.summary code{font:13px ui-monospace,monospace;background:#f3f0e8;padding:1px 4px;word-break:break-all}
.jump a{display:inline-block;margin:4px 8px 0 0;padding:3px 10px;border-radius:4px;background:#b45309;color:#fff;
  text-decoration:none;font-weight:600}
.jump a:hover{background:#92400e}
.error{font:13px ui-monospace,monospace;background:#fee2e2;color:#7f1d1d;padding:8px;word-break:break-word}
.calls{margin:0 0 12px;padding-left:22px}.calls li{margin:2px 0}.calls .matched{color:#9ca3af}
.calls .failed{font-weight:600;color:#991b1b}.calls .unused{color:#92400e}
details.call-list>summary{cursor:pointer;color:#3b444f;margin:6px 0}
.sides{display:grid;grid-template-columns:1fr 1fr;gap:12px}
.side h2{font-size:15px;margin:8px 0 4px}
.side pre{white-space:pre-wrap;word-break:break-word;background:#f3f0e8;padding:8px;margin:0;
  font:12px/1.4 ui-monospace,monospace}
.diff{background:#fde68a;outline:2px solid #d97706;scroll-margin-top:40vh}
.diff:target{background:#fcd34d;outline:3px solid #b45309}
.ln{color:#9ca3af;user-select:none}
"""


@dataclass(frozen=True)
class FailedReplay:
    """What a failed replay knows: where it stopped, and the request that did not match."""

    message: str  # the one-line error, as printed
    call: int | None  # 1-based: the call that failed (or the first unused one); None: none did
    steps: JsonPath | None  # the first differing path, a key or an index a step
    incoming: dict[str, Any] | None  # the request the replay made at `call`, when it made one
    served: int  # how many recorded calls were served before the failure
    # A transcript mismatch: the recorded and the replayed transcript, a line an item, and
    # the 1-based line where they first differ (None: the lines agree, the endings do not).
    transcripts: tuple[list[str], list[str]] | None = None
    transcript_line: int | None = None
    on_wire: bool = False  # refused by cafe.wire: `incoming` is the HTTP body as sent
    part: str | None = None  # where an HTTP request differs outside its body ("the method")

    @property
    def json_path(self) -> str | None:
        """The differing path as the one-line error names it."""
        return self.part if self.steps is None else shown_path(self.steps)


def failed_replay(error: ReplayError) -> FailedReplay:
    """What the page shows, from the error the replay raised."""
    served = error.served or 0
    if isinstance(error, ReplayMismatch):
        return FailedReplay(str(error), error.call, error.steps, error.incoming_request, served,
                            on_wire=error.on_wire, part=error.json_path if error.steps is None else None)
    if isinstance(error, UnusedCalls):
        return FailedReplay(str(error), error.first_call, None, None, served)
    if isinstance(error, RecordingExhausted):
        return FailedReplay(str(error), error.recorded + 1, None, error.incoming_request, served)
    if isinstance(error, TranscriptMismatch) and error.transcripts is not None:
        return FailedReplay(str(error), None, None, None, served, error.transcripts, error.line)
    return FailedReplay(str(error), served + 1, None, error.incoming_request, served)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def page_path(steps: JsonPath) -> str:
    """`steps` as the page names them: a plain key as `.key`, any other one quoted in brackets
    (`["messages[1]"]`), so that no key reads as an index or as two keys."""
    parts = ["$"]
    for step in steps:
        if isinstance(step, int):
            parts.append(f"[{step}]")
        elif _PLAIN_KEY.fullmatch(step):
            parts.append(f".{step}")
        elif len(step) > _LONGEST_SHOWN_KEY:
            parts.append(f"[{json.dumps(step[:_LONGEST_SHOWN_KEY - 20])}… ({len(step)} characters)]")
        else:
            parts.append(f"[{json.dumps(step)}]")
    return "".join(parts)


def _json(value: Any, steps: JsonPath | None, side: str) -> str:
    """`value` pretty-printed as HTML, the node at `steps` (and everything under it) marked.

    Walked with a stack of its own: a recording may nest deeper than Python's recursion limit
    allows a recursive walk to go. Each item of the stack is a piece of text to write as it
    is, or a value to write, with what remains of `steps` below it when it is on the way to
    the marked node (None when it is not) and its indent."""
    written: list[str] = []
    stack: list[str | tuple[Any, JsonPath | None, int]] = [(value, steps, 0)]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            written.append(item)
            continue
        node, rest, indent = item
        if rest is not None and not rest:
            written.append(f'<span class="diff" id="diff-{side}" data-path="{_e(shown_path(steps or ()))}">')
            stack.extend(["</span>", (node, None, indent)])
            continue
        if node is _ABSENT:
            written.append("<i>absent</i>")
            continue
        pad = "  " * indent
        step = rest[0] if rest else None
        below = rest[1:] if rest else None
        children: list[tuple[str, Any, JsonPath | None]]
        if isinstance(node, dict) and (node or isinstance(step, str)):
            items = dict(node)
            if isinstance(step, str) and step not in items:
                items[step] = _ABSENT  # the other side has it: show where it would be
            children = [(f"{_e(json.dumps(key, ensure_ascii=False))}: ", child, below if key == step else None)
                        for key, child in sorted(items.items())]
            opening, closing = "{", "}"
        elif isinstance(node, list) and (node or isinstance(step, int)):
            children = [("", child, below if index == step else None) for index, child in enumerate(node)]
            if isinstance(step, int) and step >= len(node):
                children.append(("", _ABSENT, below))  # the other side is longer: where its next item would be
            opening, closing = "[", "]"
        else:
            written.append(_e(json.dumps(node, ensure_ascii=False)))
            continue
        written.append(opening + "\n")
        pieces: list[str | tuple[Any, JsonPath | None, int]] = []
        for position, (prefix, child, child_rest) in enumerate(children):
            pieces.extend([("," if position else "") + ("\n" if position else "") + f"{pad}  {prefix}",
                           (child, child_rest, indent + 1)])
        pieces.append(f"\n{pad}{closing}")
        stack.extend(reversed(pieces))
    return "".join(written)


def _summary(call: RecordedCall) -> str:
    """One line naming a recorded call by its API's reading, without its conversation: a line
    without an HTTP exchange (or a café line on the wire) holds a chat call."""
    exchange = call.exchange or {}
    if not exchange or "request_json" in exchange:
        return openai_chat.API.summary(call.request)
    method, path = str(exchange.get("method") or "POST"), str(exchange.get("target") or "").partition("?")[0]
    return request_summary(api_for(method, path), method, path, call.request)


def _call_list(calls: Sequence[RecordedCall], failed: FailedReplay) -> str:
    items = []
    for call in calls:
        if failed.call is None or (call.index < failed.call and call.index <= failed.served):
            state, label = "matched", "matched"
        elif call.index == failed.call:
            state, label = "failed", "failed here"
        else:
            state, label = "unused", "never reached"
        items.append(f'<li class="{state}" data-call="{call.index}">call {call.index}: {label} · '
                     f"{_e(_summary(call))}</li>")
    if failed.call is not None and failed.call > len(calls):
        items.append(f'<li class="failed" data-call="{failed.call}">call {failed.call}: made, '
                     "but the recording holds no such call</li>")
    listed = '<ul class="calls">' + "".join(items) + "</ul>"
    opened = " open" if len(items) <= _FOLDED_CALLS else ""
    return (f'<details class="call-list"{opened}><summary>the {len(calls)} recorded call(s)</summary>'
            f"{listed}</details>")


def _transcript(lines: list[str], line: int | None, side: str) -> str:
    width = len(str(max(len(lines), 1)))
    shown = []
    for number, text in enumerate(lines, start=1):
        row = f'<span class="ln">{number:>{width}}</span> {_e(text)}'
        if number == line:
            row = f'<span class="diff" id="diff-{side}" data-line="{number}">{row}</span>'
        shown.append(row)
    if line is not None and line > len(lines):
        shown.append(f'<span class="diff" id="diff-{side}" data-line="{line}"><i>no line {line}</i></span>')
    return "\n".join(shown) or "<i>empty</i>"


def _jump(marked: Sequence[tuple[str, str]]) -> str:
    links = "".join(f'<a href="#diff-{side}">{_e(label)}</a>' for side, label in marked)
    return f'<p class="jump">jump to the difference: {links}</p>'


@dataclass(frozen=True)
class _Drawn:
    title: str  # what failed, for the page's title and heading
    where: str  # HTML: where the two sides first differ, and how many calls matched
    jump: str  # HTML: the links to the highlighted nodes
    sides: str  # HTML: the two sides


def _transcript_sides(recording: Recording, failed: FailedReplay,
                      transcripts: tuple[list[str], list[str]]) -> _Drawn:
    recorded, replayed = transcripts
    line = failed.transcript_line
    if line is None:
        where = "The transcript lines agree; the recorded ending differs from the replayed one"
    elif line <= min(len(recorded), len(replayed)) and recorded[line - 1] == replayed[line - 1]:
        where = (f"The transcripts first differ at line {line}; as shown, the two lines differ only in "
                 "text this page hides (scrubbed as a secret)")
    else:
        where = f"The transcripts first differ at line {line}"
    jump = _jump([("recorded", "recorded line"), ("incoming", "replayed line")]) if line else ""
    sides = (f'<div class="side recorded"><h2>recorded transcript (through the last call)</h2>'
             f"<pre>{_transcript(recorded, line, 'recorded')}</pre></div>"
             f'<div class="side incoming"><h2>replayed transcript</h2>'
             f"<pre>{_transcript(replayed, line, 'incoming')}</pre></div>")
    counts = f"all {len(recording.calls)} recorded call(s) matched."
    return _Drawn("every recorded call matched, but the conversation did not", f"{where}; {_e(counts)}",
                  jump, sides)


def _request_sides(recording: Recording, failed: FailedReplay) -> _Drawn:
    recorded_call = next((c for c in recording.calls if c.index == failed.call), None)
    recorded = recorded_call.request if recorded_call is not None else None
    if failed.on_wire and recorded_call is not None and "request_json" in (recorded_call.exchange or {}):
        # A café shift replayed through the wire: compared was the body as sent, beside its call.
        recorded = (recorded_call.exchange or {}).get("request_json")
    steps = failed.steps
    left = _json(recorded, steps, "recorded") if recorded is not None else "<i>no recorded call</i>"
    right = (_json(failed.incoming, steps, "incoming") if failed.incoming is not None
             else "<i>the replay made no such call</i>")
    unreached = sum(1 for c in recording.calls if failed.call is not None and c.index > failed.call)
    counts = _e(f"{failed.served} call(s) matched before it" + (f", {unreached} never reached." if unreached else "."))
    if steps is not None:
        where = f"The requests first differ at <code>{_e(page_path(steps))}</code>; {counts}"
        jump = _jump([(side, label) for side, label, shown in
                      (("recorded", "recorded side", recorded), ("incoming", "incoming side", failed.incoming))
                      if shown is not None])
    elif failed.json_path:  # a part of the HTTP request outside its body: the method, the path
        where, jump = f"The requests first differ at {_e(failed.json_path)}; {counts}", ""
    else:
        where, jump = counts[0].upper() + counts[1:], ""
    sides = (f'<div class="side recorded"><h2>recorded request (call {failed.call})</h2><pre>{left}</pre></div>'
             f'<div class="side incoming"><h2>incoming request</h2><pre>{right}</pre></div>')
    return _Drawn(f"call {failed.call} of {len(recording.calls)} recorded", where, jump, sides)


def mismatch_page(recording: Recording, failed: FailedReplay) -> str:
    drawn = (_request_sides(recording, failed) if failed.transcripts is None
             else _transcript_sides(recording, failed, failed.transcripts))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>replay failed: {_e(drawn.title)}</title><style>{_STYLE}</style></head>
<body data-call="{failed.call or ''}" data-path="{_e(failed.json_path or '')}">
<header><strong>PRIVATE</strong>: this page holds the customer's conversation from {_e(recording.path)}.
Keep it like the recording: do not commit, attach or share it.</header>
<main>
<section class="summary">
<h1>Replay failed: {_e(drawn.title)}</h1>
<p>{drawn.where}</p>
<p class="error">{_e(failed.message)}</p>
{drawn.jump}
</section>
{_call_list(recording.calls, failed)}
<div class="sides">
{drawn.sides}
</div>
</main></body></html>
"""
