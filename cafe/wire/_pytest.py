"""The pytest marker path: a test marked `@pytest.mark.cafe_recording` whose code builds its
own `openai.OpenAI` / `AsyncOpenAI` clients (it asks for no `cafe_recording` fixture) has
every httpx2 call recorded on its first run and replayed afterwards.

Loaded by cafe.pytest_plugin only when such a test runs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cafe.errors import Unwritable
from cafe.recording.errors import RecordingError, TruncatedRecording
from cafe.recording.modes import RecordMode
from cafe.wire._intercept import intercept
from cafe.wire._recorder import WireRecorder
from cafe.wire._replay import ReplayTransport


def marked_test(request: pytest.FixtureRequest, path: Path, mode: RecordMode, options: dict[str, Any],
                passed: pytest.StashKey[bool], replay_key: pytest.StashKey[Any]) -> Iterator[None]:
    from cafe.pytest_plugin import _GUARD, _network_refused, allowed_hosts, recording_exists

    hosts = allowed_hosts(path, options)  # checked when recording too: the marker is wrong either way
    if mode is RecordMode.ALL or (mode is RecordMode.ONCE and not recording_exists(path)):
        yield from _record(request, path, passed)
        return
    if mode is RecordMode.NONE and not recording_exists(path):
        pytest.fail(f"cafe: {path}: no recording, and record mode 'none' forbids making one "
                    "(run once with --cafe-record-mode=once to record it)", pytrace=False)
    failure = None
    try:
        source = ReplayTransport(path, ignore=tuple(options.get("ignore", ())),
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
    request.node.stash[replay_key] = source
    with _network_refused(path, hosts) as guard, intercept(source=source):
        request.node.stash[_GUARD] = guard
        yield


def _record(request: pytest.FixtureRequest, path: Path, passed: pytest.StashKey[bool]) -> Iterator[None]:
    from cafe.pytest_plugin import make_recording_directory

    make_recording_directory(path)
    try:
        recorder = WireRecorder(path, mode=RecordMode.ALL)
    except (RecordingError, Unwritable) as error:
        pytest.fail(f"cafe: {error}", pytrace=False)
    try:
        with intercept([recorder]):
            yield
    finally:
        if request.node.stash.get(passed, False):
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
