"""Record or replay a block of code, or hand a transport to a client, without pytest."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx2

from cafe.privacy import Scrubber
from cafe.recording.modes import RecordMode
from cafe.wire._hook import children_refused
from cafe.wire._intercept import intercept
from cafe.wire._recorder import WireRecorder
from cafe.wire._replay import ReplayTransport
from cafe.wire._transport import AsyncObservedTransport, Clock, ObservedTransport
from cafe.wire._types import WireObserver


@contextmanager
def record(path: Path | str, *, mode: RecordMode | str = RecordMode.ONCE, scrubber: Scrubber | None = None,
           observers: Sequence[WireObserver] = (), clock: Clock = time.monotonic_ns) -> Iterator[WireRecorder]:
    """Record every httpx2 call made in the block (the `openai` SDK's, however its client
    was built) to `path`. The recording is moved into place when the block ends; if it
    raises, `path` is left as it was and the calls made so far stay in `PATH.partial`.
    A model call from another process (a child forked or started in the block) is refused
    before it is sent, and the block then raises `OtherProcessCall`.

        with cafe.wire.record("agent.jsonl"):
            run_my_agent()
    """
    recorder = WireRecorder(path, mode=mode, scrubber=scrubber, clock=clock)
    try:
        with children_refused(path, replaying=False) as raise_refused, intercept([recorder, *observers],
                                                                                  clock=clock):
            yield recorder
            raise_refused()
    except BaseException:
        recorder.abort()
        raise
    recorder.close()


@contextmanager
def replay(path: Path | str, *, ignore: Sequence[str] = (), scrubber: Scrubber | None = None,
           allow_truncated: bool = False, observers: Sequence[WireObserver] = (),
           clock: Clock = time.monotonic_ns) -> Iterator[ReplayTransport]:
    """Answer every httpx2 call made in the block from the recording at `path`, strictly
    (see `ReplayTransport`); no request reaches the network. When the block ends, a refused
    request is raised (whatever error the SDK wrapped it in), a call refused in another
    process (a child forked or started in the block), then `UnusedCalls` if recorded calls
    were never made.

        with cafe.wire.replay("agent.jsonl", ignore=["metadata.run_id"]):
            run_my_agent()
    """
    source = ReplayTransport(path, ignore=ignore, scrubber=scrubber, allow_truncated=allow_truncated)
    with children_refused(path, replaying=True) as raise_refused:
        try:
            with intercept(observers, source=source, clock=clock):
                yield source
        except BaseException as error:
            if source.failure is not None and error is not source.failure:
                raise source.failure from None
            raise_refused()
            raise
        if source.failure is not None:
            raise source.failure
        raise_refused()
    source.assert_exhausted()


class RecordingTransport(ObservedTransport):
    """A transport for `openai.OpenAI(http_client=httpx2.Client(transport=...))` that sends
    through `inner` (the network by default) and records each call to `path`; closing the
    client moves the recording into place."""

    def __init__(self, path: Path | str, inner: httpx2.BaseTransport | None = None, *,
                 mode: RecordMode | str = RecordMode.ONCE, scrubber: Scrubber | None = None,
                 observers: Sequence[WireObserver] = (), clock: Clock = time.monotonic_ns) -> None:
        self.recorder = WireRecorder(path, mode=mode, scrubber=scrubber, clock=clock)
        super().__init__(inner if inner is not None else httpx2.HTTPTransport(), [self.recorder, *observers],
                         clock=clock)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.recorder.close()


class AsyncRecordingTransport(AsyncObservedTransport):
    """`RecordingTransport` for `openai.AsyncOpenAI(http_client=httpx2.AsyncClient(...))`."""

    def __init__(self, path: Path | str, inner: httpx2.AsyncBaseTransport | None = None, *,
                 mode: RecordMode | str = RecordMode.ONCE, scrubber: Scrubber | None = None,
                 observers: Sequence[WireObserver] = (), clock: Clock = time.monotonic_ns) -> None:
        self.recorder = WireRecorder(path, mode=mode, scrubber=scrubber, clock=clock)
        super().__init__(inner if inner is not None else httpx2.AsyncHTTPTransport(),
                         [self.recorder, *observers], clock=clock)

    async def aclose(self) -> None:
        try:
            await super().aclose()
        finally:
            self.recorder.close()
