"""How a test that records or replays fails: one line, never a traceback through cafe's
frames (they hold the recorded conversation), and a replay's refusal first, whatever a library
or the test's code raised around it."""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pytest

if TYPE_CHECKING:
    from cafe.recording.errors import NetworkRefused, ReplayError
    from cafe.recording.format import Recording

_E = TypeVar("_E", bound=BaseException)
_CAFE_CODE = os.path.dirname(os.path.dirname(__file__)) + os.sep
# The plugin's own hooks, which every error of a test body passes: not "cafe's code".
_HOOKS = frozenset({os.path.join(_CAFE_CODE, "pytest_plugin.py"), __file__})


class Replay(Protocol):
    """What a test's replay (a wire `ReplayTransport`, the example's `ReplayClient`) tells the
    plugin when the test body ends."""

    @property
    def recording(self) -> Recording: ...

    @property
    def failure(self) -> ReplayError | None: ...

    @property
    def unused(self) -> int: ...

    def assert_exhausted(self) -> None: ...


class NetworkGuard:
    """What a replaying test's network guard refused. `failure` is its first refusal, kept
    because a library may catch it, wrap it in an error of its own or retry past it (an
    asyncio transport turns it into a lost connection): the test's failure names it."""

    __slots__ = ("failure",)

    def __init__(self) -> None:
        self.failure: NetworkRefused | None = None


REPLAY: pytest.StashKey[Replay] = pytest.StashKey()
GUARD: pytest.StashKey[NetworkGuard] = pytest.StashKey()
CALL_PASSED = pytest.StashKey[bool]()
REPORT_DIR = pytest.StashKey[Path | None]()


def one_line(error: BaseException, while_: str) -> str:
    """What a failure says of an error from cafe's code: a named error's own line (it names
    paths and sizes only), else its type alone (its message may quote the conversation)."""
    from cafe.errors import CafeError

    if isinstance(error, CafeError):
        return f"cafe: {error}"
    return (f"cafe: {type(error).__name__} raised through cafe's code while {while_} (its message and "
            "traceback are not shown: cafe's frames hold the recorded conversation)")


_CHAIN_BOUND = 1000  # errors looked at in one chain: a library may build a very long one


def _chain(error: BaseException) -> Iterator[BaseException]:
    """`error`, then the errors it was raised from or while handling (`__cause__`,
    `__context__`, even when `from None` hides the context) and an exception group's members,
    nearest first, each once."""
    seen: set[int] = set()
    waiting = collections.deque([error])
    while waiting and len(seen) < _CHAIN_BOUND:
        current = waiting.popleft()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            waiting.extend(current.exceptions)
        waiting.extend(linked for linked in (current.__cause__, current.__context__) if linked is not None)


def first_in_chain(error: BaseException, kind: type[_E]) -> _E | None:
    """The nearest error of `kind` in `error`'s chain (`_chain`)."""
    return next((linked for linked in _chain(error) if isinstance(linked, kind)), None)


def through_cafe(error: BaseException) -> bool:
    """Whether `error`, or an error in its chain (`_chain`), is cafe's or passed through a
    frame of cafe's code (this plugin's hooks, which every error of a test body passes, aside)."""
    from cafe.errors import CafeError

    for linked in _chain(error):
        if isinstance(linked, CafeError):
            return True
        traceback = linked.__traceback__
        while traceback is not None:
            filename = traceback.tb_frame.f_code.co_filename
            if filename.startswith(_CAFE_CODE) and filename not in _HOOKS:
                return True
            traceback = traceback.tb_next
    return False


def one_line_failure(message: str) -> BaseException:
    """A one-line failure; raise it `from None`, so that no chained error is rendered with it."""
    return pytest.fail.Exception(message, pytrace=False)




def kept_refusal(item: pytest.Item, replay: Any) -> ReplayError | None:
    """The replay's first refusal of a wire request, else its network guard's first refusal."""
    refused: ReplayError | None = getattr(replay, "failure", None)
    if refused is None:
        guard = item.stash.get(GUARD, None)
        refused = None if guard is None else guard.failure
    return refused


def one_line_through_cafe(body: Callable[[], None], while_: str) -> None:
    """Run the test body, its failure one line when it came through cafe's code: pytest
    renders each frame's source and, with --showlocals, its locals, and cafe's frames hold
    the recorded conversation. A cafe error the failure was raised from or during is the line."""
    from cafe.errors import CafeError

    failure = None
    try:
        body()
    except Exception as error:  # pytest's outcomes (skip, xfail, fail) are BaseExceptions: not caught
        if not through_cafe(error):
            raise
        failure = one_line(first_in_chain(error, CafeError) or error, while_)
    if failure is not None:
        raise one_line_failure(failure) from None


def report(item: pytest.Item, replay: Replay, failure: ReplayError) -> str:
    """With --cafe-report-dir: the mismatch page, named after the recording, inside the
    directory and never over another file; returns the clause naming it for the failure line."""
    directory = item.config.stash.get(REPORT_DIR, None)
    if directory is None:
        return ""
    from cafe.view import PageUnwritable, write_report_into

    try:
        page = write_report_into(directory, replay.recording, failure)
    except PageUnwritable as error:
        return f" (no report: {error})"
    except Exception as error:  # a page too large for memory, JSON nested past the stack
        return f" (no report: the page could not be drawn ({type(error).__name__}))"
    return f" (report: {page})"
