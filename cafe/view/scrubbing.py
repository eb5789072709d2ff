"""A recording as a page may show it: every string scrubbed as `cafe export` and the recorder
scrub (`Scrubber.from_environment`: the secret patterns and `CAFE_SCRUB_PATTERNS`).

cafe's own recordings were scrubbed when they were written, so for them this changes nothing
(scrubbing a scrubbed text is a no-op). A plain file another harness wrote, or one written before
a pattern was added, may hold a key: the page must not show it. A call whose serialised
request or response holds nothing any pattern could match is passed on as it is, unread.

Unlike a recording's, a page's object keys are scrubbed too, of the secrets the default
patterns find: a recording keeps its keys as they are (they are its structure), but a page only
shows them, and a key another harness wrote can be anything, a key included.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from cafe.recording.format import Ending, Header, RecordedCall, Recording, encoded
from cafe.recording.scrub import Scrubber, structure_scrubber


def shown_json(value: Any, scrubber: Scrubber) -> Any:
    """A JSON value as a page shows it: its string values scrubbed, and its object keys of
    any secret the default patterns find (`structure_scrubber`: a configured pattern broad
    enough to match `messages` would rename the keys the page is laid out by)."""
    return _keys_scrubbed(scrubber.scrub_json(value), structure_scrubber())


def _keys_scrubbed(value: Any, keys: Scrubber) -> Any:
    if isinstance(value, dict):
        return {keys.scrub(key) if isinstance(key, str) else key: _keys_scrubbed(item, keys)
                for key, item in value.items()}
    if isinstance(value, list):
        return [_keys_scrubbed(item, keys) for item in value]
    return value


def _document(call: RecordedCall, name: str, scrubber: Scrubber) -> tuple[Any, bool]:
    """The call's `request` or `response`, scrubbed, and whether that changed it."""
    held = encoded(call, name)
    if held is not None and not scrubber.may_need_scrubbing(held.decode("utf-8")):
        return held, False
    value = getattr(call, name)
    scrubbed = shown_json(value, scrubber)
    return scrubbed, scrubbed != value


def _text(value: str | None, scrubber: Scrubber) -> str | None:
    return None if value is None else scrubber.scrub(value)


def _call(call: RecordedCall, scrubber: Scrubber) -> RecordedCall:
    request, request_changed = _document(call, "request", scrubber)
    response, response_changed = _document(call, "response", scrubber)
    line_model, header_model = _text(call.line_model, scrubber), _text(call.header_model, scrubber)
    exchange = None if call.exchange is None else shown_json(call.exchange, scrubber)
    if not (request_changed or response_changed) and (line_model, header_model, exchange) == (
            call.line_model, call.header_model, call.exchange):
        return call
    return RecordedCall.loaded(call.index, call.line, request, response, call.timing, line_model, header_model,
                               exchange)


def _header(header: Header, scrubber: Scrubber) -> Header:
    return replace(
        header,
        harness=_text(header.harness, scrubber),
        model=_text(header.model, scrubber),
        provider=_text(header.provider, scrubber),
        recorded_at=_text(header.recorded_at, scrubber),
        conversation_id=_text(header.conversation_id, scrubber),
        script=shown_json(header.script, scrubber) if header.script is not None else None,
        decisions=shown_json(header.decisions, scrubber) if header.decisions is not None else None,
    )


def scrubbed(recording: Recording, scrubber: Scrubber) -> Recording:
    """`recording` with every string value and key of its header, calls and end line scrubbed,
    and its file name (which a page names)."""
    ending = recording.ending
    if ending is not None:
        ending = Ending(scrubber.scrub(ending.stop_reason), ending.model_calls, ending.transcript_sha256)
    return replace(recording, path=Path(scrubber.scrub(str(recording.path))),
                   header=_header(recording.header, scrubber),
                   calls=[_call(call, scrubber) for call in recording.calls], ending=ending)
