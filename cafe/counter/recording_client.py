"""`RecordingClient`: the café's chat client that records each call of a shift, through the
product's `RecordingWriter` (a version 2 line with its HTTP exchange when the client is on the
wire, else version 1)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cafe.counter.clients.base import ChatClient, Message, Response, build_request, secrets_of
from cafe.counter.clients.wrapper import WrappedClient
from cafe.jsondata import json_document
from cafe.privacy import MIN_SECRET_CHARS, Scrubber
from cafe.recording import format as _format
from cafe.recording.errors import RecordingError
from cafe.recording.format import FORMAT_VERSION, Ending, Header, Timing
from cafe.recording.modes import RecordMode
from cafe.recording.writer import RecordingWriter, _harness_version, _iso
from cafe.trace.clock import NanoClock, Timeline


class RecordingClient(WrappedClient):
    """Wraps any client and appends one line per `chat` call. It never builds a client of
    its own: it records whatever it was handed.

    A client on the wire (the live client: it has a `wire_log`, `cafe.wire`) makes a
    version 2 recording: each line also holds the HTTP exchange of its call, the JSON
    bodies as sent and answered included, so the recording replays through the wire too.
    Any other client's recording is version 1.

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
            version=FORMAT_VERSION if self._wire_log is None else _format.WIRE_VERSION,
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
        request = json_document(build_request(messages, tools, temperature, tool_choice))
        if self._wire_log is not None:
            self._wire_log.take()  # what an earlier, failed call left
        response = self.inner.chat(messages, tools, temperature, tool_choice)
        end = self.timeline()
        start_ns = self.timeline.unix_nano(start)
        timing = Timing(start_ns, max(self.timeline.unix_nano(end) - start_ns, 0))
        self.writer.write_call(request, response, timing, exchange=self._exchange())
        return response

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
