"""The marker's own recording: a test marked `@pytest.mark.cafe_recording` whose code builds
its own model clients (it asks for no fixture that records it) has every call on the wire
recorded on its first run and replayed afterwards.

Loaded by cafe.pytest_plugin only when such a test runs."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cafe._pytest.failures import CALL_PASSED, GUARD, REPLAY
from cafe._pytest.network import allowed_hosts, network_refused
from cafe._pytest.options import make_recording_directory, recording_exists
from cafe.errors import CafeError, Unwritable
from cafe.recording.errors import RecordingError, TruncatedRecording
from cafe.recording.modes import RecordMode
from cafe.wire._hook import children_refused
from cafe.wire._intercept import intercept, patched
from cafe.wire._libraries import NO_CALL, installed_libraries
from cafe.wire._recorder import WireRecorder
from cafe.wire._replay import WireReplay


def marked_test(request: pytest.FixtureRequest, path: Path, mode: RecordMode,
                options: dict[str, Any]) -> Iterator[None]:

    hosts = allowed_hosts(path, options)  # checked when recording too: the marker is wrong either way
    if mode is RecordMode.ALL or (mode is RecordMode.ONCE and not recording_exists(path)):
        yield from _record(request, path)
        return
    if mode is RecordMode.NONE and not recording_exists(path):
        pytest.fail(f"cafe: {path}: no recording, and record mode 'none' forbids making one "
                    "(run once with --cafe-record-mode=once to record it)", pytrace=False)
    failure = None
    try:
        source = WireReplay(path, ignore=tuple(options.get("ignore", ())),
                            allow_truncated=bool(options.get("allow_truncated")))
    except TruncatedRecording as error:
        failure = str(error) if error.line == 1 else (
            f"{error.path}:{error.line}: the last line is truncated (the recorder stopped mid-write); mark the "
            f"test @pytest.mark.cafe_recording(allow_truncated=True) to replay the {error.complete_calls} "
            "complete call(s) before it")
    except (RecordingError, Unwritable) as error:
        failure = str(error)
    if failure is not None:
        pytest.fail(f"cafe: {failure}", pytrace=False)
    if source.unused and not installed_libraries():
        pytest.fail(f"cafe: {path}: its {source.unused} recorded call(s) cannot be replayed: {NO_CALL} (neither is "
                    "installed in this Python: install the SDK the calls were recorded with)", pytrace=False)
    request.node.stash[REPLAY] = source
    with network_refused(path, hosts) as guard, children_refused(path, replaying=True) as raise_refused, \
            intercept(source=source):
        request.node.stash[GUARD] = guard
        yield
        refused = _refusal(raise_refused)
    if refused is not None:
        pytest.fail(refused, pytrace=False)


def _record(request: pytest.FixtureRequest, path: Path) -> Iterator[None]:
    make_recording_directory(path)
    try:
        recorder = WireRecorder(path, mode=RecordMode.ALL)
    except (RecordingError, Unwritable) as error:
        pytest.fail(f"cafe: {error}", pytrace=False)
    refused = None
    try:
        with children_refused(path, replaying=False) as raise_refused, intercept([recorder]):
            yield
            refused = _refusal(raise_refused)
            if refused is None and not recorder.calls and not patched():
                refused = (f"cafe: {path}: nothing to record: {NO_CALL} (the test imported neither: cafe records "
                           "the model calls made through them)")
    finally:
        if request.node.stash.get(CALL_PASSED, False) and refused is None:
            try:
                recorder.close()
            except (RecordingError, Unwritable) as error:
                pytest.fail(f"cafe: {error}", pytrace=False)
        else:
            # A failed test's calls hold customer text and are no contract: drop them.
            kept = recorder.abort()
            if kept is not None:
                with contextlib.suppress(FileNotFoundError):
                    kept.unlink()
    if refused is not None:  # what the test's run made is not the whole run: nothing is kept
        pytest.fail(refused, pytrace=False)


def _refusal(raise_refused: Callable[[], None]) -> str | None:
    """The line the test fails with when a process it started made a model call, refused there
    (only the test's own process records or replays), else None."""
    try:
        raise_refused()
    except CafeError as error:
        return f"cafe: {error}"
    return None
