"""`RecordingClient`: the café's chat client that records each call of a shift, through the
product's `RecordingWriter` (a version 5 line with its HTTP exchange when the client is on the
wire, else version 4)."""

from __future__ import annotations

import operator
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cafe.counter.clients.base import ChatClient, Message, Response, build_request, secrets_of
from cafe.counter.clients.wrapper import WrappedClient
from cafe.jsondata import json_document, same_json
from cafe.privacy import MIN_SECRET_CHARS, Scrubber
from cafe.recording.errors import RecordingError
from cafe.recording.format import SHARED_VERSION, SHARED_WIRE_VERSION, Ending, Header, Timing
from cafe.recording.modes import RecordMode
from cafe.recording.writer import RecordingWriter, _harness_version, _iso
from cafe.trace.clock import NanoClock, Timeline


class RecordingClient(WrappedClient):
    """Wraps any client and appends one line per `chat` call. It never builds a client of
    its own: it records whatever it was handed.

    A client on the wire (the live client: it has a `wire_log`, `cafe.wire`) makes a
    version 5 recording: each line also holds the HTTP exchange of its call, the JSON
    bodies as sent and answered included, so the recording replays through the wire too.
    Any other client's recording is version 4.

    A call whose conversation is the one the call before sent, grown at its end (as a
    shift's is), is recorded by what is new in it: its new messages and the arguments that
    changed, the line referring to the call before for the rest (a version 4 or 5
    `extends`). So a call takes of the file, and costs to write, what is new in it, at any
    length of shift. Any other conversation is recorded whole.

    Call starts are readings of one `Timeline` (an origin plus a monotonic clock). With
    `follows_tracer`, the timeline is the tracer's clock and a call's start is the reading
    the tracer took when it opened the call's generation span."""

    def __init__(
        self,
        client: ChatClient,
        path: Path | str,
        *,
        mode: RecordMode | str = RecordMode.ONCE,
        scrubber: Scrubber | None = None,
        wall_clock_ns: NanoClock = time.time_ns,
        monotonic_ns: NanoClock = time.perf_counter_ns,
        timeline: Timeline | None = None,
        follows_tracer: bool = False,
        harness: str | None = None,
        recorded_at: str | None = None,
        seed: int | None = None,
        script: Iterable[str] | None = None,
        decisions: Iterable[Any] | None = None,
        conversation_id: str | None = None,
        shift_settings: Mapping[str, Any] | None = None,
        durable: bool = False,
    ) -> None:
        super().__init__(client)
        self.timeline = timeline if timeline is not None else Timeline(wall_clock_ns(), monotonic_ns)
        self._follows_tracer = follows_tracer and timeline is not None
        secrets = secrets_of(client)
        for position, secret in enumerate(secrets, start=1):
            if len(secret) < MIN_SECRET_CHARS:
                raise RecordingError(
                    f"{path}: the client's secret #{position} has {len(secret)} characters; one "
                    f"shorter than {MIN_SECRET_CHARS} cannot be scrubbed without destroying the "
                    "conversation, so nothing was recorded"
                )
        scrubber = (scrubber or Scrubber.from_environment()).with_literals(secrets)
        origin = self.timeline.origin_unix_nano
        settings = dict(shift_settings or {})
        self._wire_log: Any = getattr(client, "wire_log", None)
        header = Header(
            version=SHARED_VERSION if self._wire_log is None else SHARED_WIRE_VERSION,
            harness=harness or _harness_version(),
            model=client.model,
            provider=client.provider,
            recorded_at=recorded_at or _iso(origin),
            seed=seed,
            clock_origin_unix_nano=origin,
            conversation_id=conversation_id,
            script=list(script) if script is not None else None,
            decisions=[list(d) for d in decisions] if decisions is not None else None,
            max_turns=settings.get("max_turns"),
            max_repairs=settings.get("max_repairs"),
            temperature=settings.get("temperature"),
        )
        self.writer = RecordingWriter(path, header, mode=mode, scrubber=scrubber, durable=durable)
        if self._wire_log is not None:
            self._wire_log.armed = True
        # The messages the last call was sent (the objects, not copies), the number of the
        # call line it was written in, and its other arguments as recorded.
        self._sent: tuple[list[Message], int, dict[str, Any]] | None = None

    @property
    def path(self) -> Path:
        return self.writer.path

    def __repr__(self) -> str:
        return f"RecordingClient({self.inner!r}, path={str(self.writer.path)!r})"

    def _exchange(self) -> dict[str, Any] | None:
        """The HTTP exchange of the call just made: the last one (an SDK's retries came first)."""
        if self._wire_log is None:
            return None
        exchanges = self._wire_log.take()
        if not exchanges:
            raise RecordingError(f"{self.path}: call {self.writer.calls + 1} made no HTTP exchange through the "
                                 "wire, so its line cannot be written (the client's http_client bypasses it)")
        exchange: dict[str, Any] = exchanges[-1]
        return exchange

    def _disarm(self) -> None:
        if self._wire_log is not None:
            self._wire_log.armed = False
            self._wire_log.take()

    def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        temperature: float = 0.0,
        tool_choice: Any = None,
    ) -> Response:
        start = self.timeline.latest if self._follows_tracer else self.timeline()
        # The request is serialised before the call: the loop mutates `messages` afterwards.
        # (Refused before the call when JSON cannot write it: it could not be recorded.)
        number = self.writer.calls + 1
        kept, arguments = self._kept_of(messages, number)
        request = build_request(messages[kept:] if kept else messages, tools, temperature, tool_choice)
        request = json_document({key: value for key, value in request.items()
                                 if not (kept and key != "messages" and key in arguments
                                         and same_json(value, arguments[key]))})
        if self._wire_log is not None:
            self._wire_log.take()  # what an earlier, failed call left
        response = self.inner.chat(messages, tools, temperature, tool_choice)
        end = self.timeline()
        start_ns = self.timeline.unix_nano(start)
        timing = Timing(start_ns, max(self.timeline.unix_nano(end) - start_ns, 0))
        self.writer.write_call(request, response, timing, exchange=self._exchange(),
                               extends=("messages", kept) if kept else None)
        if type(messages) is list:
            sent = self._sent[0] if kept and self._sent is not None else []
            sent.extend(messages[kept:])
            self._sent = (sent, number, {**arguments, **{key: value for key, value in request.items()
                                                         if key != "messages"}})
        else:
            self._sent = None
        return response

    def _kept_of(self, messages: list[Message], number: int) -> tuple[int, dict[str, Any]]:
        """How many messages of `messages` the call line written last holds as this call
        sends them (0: record them all), and that call's other arguments as recorded.

        They are the messages that call was sent, the same objects (compared by identity, in
        C: a conversation that only grew costs no serialising or scanning of what was sent);
        a message once sent is taken as sent, as `ToolCallIdCheck` takes it. A conversation
        with a message replaced, dropped or inserted is recorded whole."""
        sent = self._sent
        if sent is None:
            return 0, {}
        previous, written, arguments = sent
        length = len(previous)
        if (not length or type(messages) is not list or len(messages) < length
                or self.writer.extendable(number, "messages") != written
                or not all(map(operator.is_, messages, previous))):
            return 0, {}
        return length, arguments

    def finish(self, ending: Ending) -> None:
        self.writer.write_end(ending)
        self._disarm()
        self.writer.commit()

    def close(self) -> None:
        """The recording is complete as it stands: move it into place."""
        self._disarm()
        self.writer.commit()

    def abort(self) -> Path | None:
        """The recording did not finish: the path keeps what it held; returns where the
        calls recorded so far were kept, if there were any."""
        self._disarm()
        return self.writer.abort()
