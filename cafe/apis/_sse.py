"""Server-sent events (`text/event-stream`), the one streaming format every reading shares:
split a body into events as its pieces arrive, and take each event's `data`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

EVENT_ENDS = (b"\r\n\r\n", b"\n\n", b"\r\r")
MAX_EVENT_BYTES = 1024 * 1024
"""An event longer than this is not held waiting for its end (it is dropped, not read)."""


def split_events(pending: bytes) -> tuple[list[bytes], bytes]:
    """The complete events in `pending` (each ended by a blank line, in any of the three
    line-end styles), and what is left of it."""
    if b"\r" not in pending:  # the usual `\n\n`: one split
        pieces = pending.split(b"\n\n")
        rest = pieces.pop()
        return pieces, rest
    events: list[bytes] = []
    while True:
        end, size = -1, 0
        for separator in EVENT_ENDS:
            found = pending.find(separator)
            if found != -1 and (end == -1 or found < end):
                end, size = found, len(separator)
        if end == -1:
            return events, pending
        events.append(pending[:end])
        pending = pending[end + size:]


def event_data(event: bytes) -> bytes:
    """The `data` of one event: its `data:` lines' values joined by a line end (b"" for an
    event with none, such as a comment or a bare `event:` line)."""
    if event.startswith(b"data:") and b"\n" not in event and b"\r" not in event:
        return event[5:].lstrip(b" ")  # one `data:` line: the usual event
    lines = [line[5:].lstrip(b" ") for line in event.splitlines() if line.startswith(b"data:")]
    return b"\n".join(lines)


class EventSplitter:
    """Events from a body read piece by piece: `feed` returns the `data` of each event the
    piece completed (empty data and the OpenAI end marker `[DONE]` left out)."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> list[bytes]:
        pending = self._pending + data if self._pending else data
        events, rest = split_events(pending)
        self._pending = rest if len(rest) <= MAX_EVENT_BYTES else b""
        found = []
        for event in events:
            payload = event_data(event)
            if payload and payload != b"[DONE]":
                found.append(payload)
        return found


def stream_data(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """The `data` of every complete event of a whole stream's pieces."""
    splitter = EventSplitter()
    for piece in pieces:
        yield from splitter.feed(piece)
