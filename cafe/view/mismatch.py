"""A replay that failed, as a page: the recorded and the incoming request side by side.

The first differing path (the one the one-line error names) is highlighted on both sides,
the calls that matched before it are listed greyed, and the recorded calls that were never
reached are listed after it. Same rules as the shift page: self-contained, no script, no
network, every recorded string escaped, private (it holds the conversation).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cafe.recording.diff import summarise_request
from cafe.recording.errors import RecordingExhausted, ReplayError, ReplayMismatch, UnusedCalls
from cafe.recording.format import RecordedCall, Recording

_ABSENT = object()

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#fbfaf7}
header{background:#7a2e12;color:#fff;padding:10px 18px}
main{padding:12px 18px}.error{font:13px ui-monospace,monospace;background:#fee2e2;color:#7f1d1d;padding:8px}
.calls li{margin:2px 0}.calls .matched{color:#9ca3af}.calls .failed{font-weight:600;color:#991b1b}
.calls .unused{color:#92400e}
.sides{display:grid;grid-template-columns:1fr 1fr;gap:12px}
.side pre{white-space:pre-wrap;word-break:break-word;background:#f3f0e8;padding:8px;
  font:12px/1.4 ui-monospace,monospace}
.diff{background:#fde68a;outline:2px solid #d97706}
"""


@dataclass(frozen=True)
class FailedReplay:
    """What a failed replay knows: where it stopped, and the request that did not match."""

    message: str  # the one-line error, as printed
    call: int  # 1-based: the call that failed (or the first unused one)
    json_path: str | None  # the first differing path, "$.messages[3].content"
    incoming: dict[str, Any] | None  # the request the replay made at `call`, when it made one
    served: int  # how many recorded calls were served before the failure
    on_wire: bool = False  # refused by cafe.wire: `incoming` is the HTTP body as sent


def failed_replay(error: ReplayError) -> FailedReplay:
    """What the page shows, from the error the replay raised."""
    served = error.served or 0
    if isinstance(error, ReplayMismatch):
        return FailedReplay(str(error), error.call, error.json_path, error.incoming_request, served,
                            on_wire=error.on_wire)
    if isinstance(error, UnusedCalls):
        return FailedReplay(str(error), error.first_call, None, None, served)
    if isinstance(error, RecordingExhausted):
        return FailedReplay(str(error), error.recorded + 1, None, error.incoming_request, served)
    return FailedReplay(str(error), served + 1, None, error.incoming_request, served)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _child_of(path: str, highlight: str | None) -> str | None:
    """The first step below `path` on the way to `highlight` (".key" or "[3]"), if any."""
    if highlight is None or not highlight.startswith(path) or highlight == path:
        return None
    rest = highlight[len(path):]
    if rest.startswith("["):
        return rest[: rest.index("]") + 1]
    if rest.startswith("."):
        ends = [i for i in (rest.find(".", 1), rest.find("[", 1)) if i > 0]
        return rest[: min(ends)] if ends else rest
    return None


def _json(value: Any, path: str, highlight: str | None, indent: int = 0) -> str:
    """`value` pretty-printed as HTML, the node at `highlight` (and everything under it) marked."""
    pad = "  " * indent
    if path == highlight:
        return f'<span class="diff" data-path="{_e(path)}">{_json(value, path, None, indent)}</span>'
    if value is _ABSENT:
        return "<i>absent</i>"
    if isinstance(value, dict) and (value or _child_of(path, highlight)):
        items = dict(value)
        missing = _child_of(path, highlight)
        if missing is not None and missing.startswith(".") and missing[1:] not in items:
            items[missing[1:]] = _ABSENT  # the other side has it: show where it would be
        inner = ",\n".join(
            f"{pad}  {_e(json.dumps(key))}: {_json(item, f'{path}.{key}', highlight, indent + 1)}"
            for key, item in sorted(items.items())
        )
        return "{\n" + inner + f"\n{pad}}}"
    if isinstance(value, list) and (value or _child_of(path, highlight)):
        entries = list(value)
        missing = _child_of(path, highlight)
        if missing is not None and missing.startswith("[") and int(missing[1:-1]) >= len(entries):
            entries.extend([_ABSENT] * (int(missing[1:-1]) + 1 - len(entries)))
        inner = ",\n".join(
            f"{pad}  {_json(item, f'{path}[{index}]', highlight, indent + 1)}" for index, item in enumerate(entries)
        )
        return "[\n" + inner + f"\n{pad}]"
    return _e(json.dumps(value, ensure_ascii=False))


def _call_list(calls: Sequence[RecordedCall], failed: FailedReplay) -> str:
    items = []
    for call in calls:
        if call.index < failed.call and call.index <= failed.served:
            state, label = "matched", "matched"
        elif call.index == failed.call:
            state, label = "failed", "failed here"
        else:
            state, label = "unused", "never reached"
        items.append(f'<li class="{state}" data-call="{call.index}">call {call.index}: {label} · '
                     f"{_e(summarise_request(call.request))}</li>")
    if failed.call > len(calls):
        items.append(f'<li class="failed" data-call="{failed.call}">call {failed.call}: made, '
                     "but the recording holds no such call</li>")
    return "<ul class=\"calls\">" + "".join(items) + "</ul>"


def mismatch_page(recording: Recording, failed: FailedReplay) -> str:
    recorded_call = next((c for c in recording.calls if c.index == failed.call), None)
    recorded = recorded_call.request if recorded_call is not None else None
    if failed.on_wire and recorded_call is not None and "request_json" in (recorded_call.exchange or {}):
        # A café shift replayed through the wire: compared was the body as sent, beside its call.
        recorded = (recorded_call.exchange or {}).get("request_json")
    left = _json(recorded, "$", failed.json_path) if recorded is not None else "<i>no recorded call</i>"
    right = (_json(failed.incoming, "$", failed.json_path) if failed.incoming is not None
             else "<i>the replay made no such call</i>")
    where = f" at <code>{_e(failed.json_path)}</code>" if failed.json_path else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>replay failed at call {failed.call}</title><style>{_STYLE}</style></head>
<body data-call="{failed.call}" data-path="{_e(failed.json_path or '')}">
<header><strong>PRIVATE</strong>: this page holds the customer's conversation from {_e(recording.path)}.
Keep it like the recording: do not commit, attach or share it.</header>
<main>
<p class="error">{_e(failed.message)}</p>
<h3>call {failed.call}{where}</h3>
{_call_list(recording.calls, failed)}
<div class="sides">
<div class="side recorded"><h4>recorded request (call {failed.call})</h4><pre>{left}</pre></div>
<div class="side incoming"><h4>incoming request</h4><pre>{right}</pre></div>
</div>
</main></body></html>
"""
