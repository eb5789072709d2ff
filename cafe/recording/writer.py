"""Writing a recording: one line a call, flushed as it is written, scrubbed first.

The file is created with mode 0600 (it holds customer conversations). Every line goes
through `_write_line`, the one place that scrubs, so no write path can skip it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from cafe.clients.base import ChatClient, Message, Response, build_request, secrets_of
from cafe.clients.wrapper import WrappedClient
from cafe.recording.errors import RecordingDisabled, RecordingError, RecordingExists, RecordingUnwritable
from cafe.recording.format import FORMAT_VERSION, Ending, Header, RecordedCall, Timing
from cafe.recording.modes import RecordMode
from cafe.recording.scrub import Scrubber

NanoClock = Callable[[], int]


def _open_for_recording(path: Path, mode: RecordMode) -> IO[str]:
    if mode is RecordMode.NONE:
        raise RecordingDisabled(path)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if mode is RecordMode.ALL else os.O_EXCL)
    try:
        descriptor = os.open(path, flags, 0o600)
    except FileExistsError:
        if path.is_dir():
            raise RecordingUnwritable(path, "it is a directory") from None
        raise RecordingExists(path) from None
    except FileNotFoundError:
        raise RecordingUnwritable(path, "its directory does not exist") from None
    except IsADirectoryError:
        raise RecordingUnwritable(path, "it is a directory") from None
    except PermissionError:
        raise RecordingUnwritable(path, "permission denied") from None
    os.fchmod(descriptor, 0o600)  # an existing file re-recorded under `all` keeps no wider mode
    return os.fdopen(descriptor, "w", encoding="utf-8")


class RecordingWriter:
    def __init__(
        self,
        path: Path | str,
        header: Header,
        *,
        mode: RecordMode | str = RecordMode.ONCE,
        scrubber: Scrubber | None = None,
        durable: bool = False,
    ) -> None:
        self.path = Path(path)
        self._scrubber = scrubber or Scrubber.from_environment()
        self._durable = durable
        self._file = _open_for_recording(self.path, RecordMode.parse(mode))
        self.calls = 0
        self.lines = 0
        self._write_line(header.to_json())

    def _write_line(self, obj: dict[str, Any]) -> None:
        """The one place a line is written: serialised, scrubbed, then written whole."""
        try:
            text = json.dumps(obj, ensure_ascii=False, sort_keys=True, allow_nan=False)
        except ValueError:
            raise RecordingError(
                f"{self.path}: line {self.lines + 1} cannot be recorded: it holds NaN or an "
                "infinite number, which JSON cannot represent"
            ) from None
        except TypeError as error:
            raise RecordingError(
                f"{self.path}: line {self.lines + 1} cannot be recorded: {error}"
            ) from None
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate (from a `\ud800` escape) has no UTF-8 form: keep it escaped.
            text = json.dumps(obj, ensure_ascii=True, sort_keys=True, allow_nan=False)
        text = self._scrubber.scrub(text)
        try:
            json.loads(text)
        except ValueError:
            # Fail closed: a pattern that cut through the JSON must not write a broken line.
            raise RecordingError(
                f"{self.path}: line {self.lines + 1} was not written: a scrub pattern's "
                "replacement broke its JSON (make the pattern match inside a string)"
            ) from None
        self._file.write(text + "\n")
        self.lines += 1
        self._file.flush()
        if self._durable:
            os.fsync(self._file.fileno())

    def scrubbed(self, value: Any) -> Any:
        """`value` as it would read back from this recording: serialised and scrubbed."""
        return json.loads(self._scrubber.scrub(json.dumps(value, ensure_ascii=False, sort_keys=True)))

    def write_call(self, request: dict[str, Any], response: dict[str, Any], timing: Timing | None) -> None:
        self.calls += 1
        self._write_line(RecordedCall(self.calls, self.calls + 1, request, response, timing).to_json())

    def write_end(self, ending: Ending) -> None:
        self._write_line(ending.to_json())

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()


class RecordingClient(WrappedClient):
    """Wraps any client and appends one line per `chat` call. It never builds a client of
    its own: it records whatever it was handed."""

    def __init__(
        self,
        client: ChatClient,
        path: Path | str,
        *,
        mode: RecordMode | str = RecordMode.ONCE,
        scrubber: Scrubber | None = None,
        wall_clock_ns: NanoClock = time.time_ns,
        monotonic_ns: NanoClock = time.perf_counter_ns,
        harness: str | None = None,
        recorded_at: str | None = None,
        seed: int | None = None,
        script: Iterable[str] | None = None,
        decisions: Iterable[Any] | None = None,
        conversation_id: str | None = None,
        durable: bool = False,
    ) -> None:
        super().__init__(client)
        self._wall_clock_ns = wall_clock_ns
        self._monotonic_ns = monotonic_ns
        secrets = secrets_of(client)
        scrubber = (scrubber or Scrubber.from_environment()).with_literals(secrets)
        origin = wall_clock_ns()
        header = Header(
            version=FORMAT_VERSION,
            harness=harness or _harness_version(),
            model=client.model,
            provider=client.provider,
            recorded_at=recorded_at or _iso(origin),
            seed=seed,
            clock_origin_unix_nano=origin,
            conversation_id=conversation_id,
            script=list(script) if script is not None else None,
            decisions=[list(d) for d in decisions] if decisions is not None else None,
        )
        self.writer = RecordingWriter(path, header, mode=mode, scrubber=scrubber, durable=durable)

    @property
    def path(self) -> Path:
        return self.writer.path

    def __repr__(self) -> str:
        return f"RecordingClient({self.inner!r}, path={str(self.writer.path)!r})"

    def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        temperature: float = 0.0,
        tool_choice: Any = None,
    ) -> Response:
        # The request is serialised before the call: the loop mutates `messages` afterwards.
        request = json.loads(json.dumps(build_request(messages, tools, temperature, tool_choice)))
        start_wall, start = self._wall_clock_ns(), self._monotonic_ns()
        response = self.inner.chat(messages, tools, temperature, tool_choice)
        timing = Timing(start_wall, max(self._monotonic_ns() - start, 0))
        self.writer.write_call(request, response, timing)
        return response

    def finish(self, ending: Ending) -> None:
        self.writer.write_end(ending)
        self.writer.close()

    def close(self) -> None:
        self.writer.close()


def _iso(unix_nano: int) -> str:
    seconds, nanos = divmod(unix_nano, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{nanos // 1000:06d}Z"


def _harness_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"cafe {version('cafe-otel')}"
    except PackageNotFoundError:
        return "cafe (unpackaged)"
