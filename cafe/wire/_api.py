"""Record or replay a block of code without pytest, whichever covered library its clients use."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from cafe.privacy import Scrubber
from cafe.recording.modes import RecordMode
from cafe.wire._hook import children_refused
from cafe.wire._intercept import intercept
from cafe.wire._recorder import WireRecorder
from cafe.wire._replay import WireReplay
from cafe.wire._transport import Clock
from cafe.wire._types import WireObserver


@contextmanager
def record(path: Path | str, *, mode: RecordMode | str = RecordMode.ONCE, scrubber: Scrubber | None = None,
           observers: Sequence[WireObserver] = (), clock: Clock = time.monotonic_ns) -> Iterator[WireRecorder]:
    """Record every httpx or httpx2 call made in the block (the `openai` SDK's, whichever it
    uses and however its client was built) to `path`. The recording is moved into place when the block ends; if it
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
           clock: Clock = time.monotonic_ns) -> Iterator[WireReplay]:
    """Answer every httpx or httpx2 call made in the block from the recording at `path`,
    strictly (see `WireReplay`); no request reaches the network. When the block ends, a refused
    request is raised (whatever error the SDK wrapped it in), a call refused in another
    process (a child forked or started in the block), then `UnusedCalls` if recorded calls
    were never made.

        with cafe.wire.replay("agent.jsonl", ignore=["metadata.run_id"]):
            run_my_agent()
    """
    source = WireReplay(path, ignore=ignore, scrubber=scrubber, allow_truncated=allow_truncated)
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
