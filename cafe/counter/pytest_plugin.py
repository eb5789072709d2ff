"""The café example's pytest fixtures: `cafe_recording`, a café chat client that records the
test's shift once and replays it afterwards, and `cafe_model_client`, the client a recording
is made from. Registered by its own entry point (`pytest11: cafe_counter`), on top of the
product's plugin (`cafe.pytest_plugin`): the same marker, modes, network refusal and reports.

    def test_latte(cafe_recording):
        run = run_shift(cafe_recording, ["A latte, please."], make_responder([]))
        assert run.stop_reason == "answered"

With no recording, the test records through `cafe_model_client`: the live client with
CAFE_MODE=live, or the offline scripted one when that is chosen (CAFE_MODE=offline, the ini
option `cafe_record_offline = true`, or the marker's `record_offline=True`); with no choice
the test fails saying so. Override the fixture to record something else.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cafe._pytest.failures import CALL_PASSED, GUARD, REPLAY, one_line, one_line_failure
from cafe._pytest.options import (
    claim,
    extend,
    make_recording_directory,
    marker_options,
    record_mode,
    recording_exists,
    recording_path,
)

OFFLINE_INI = "cafe_record_offline"
RECORDING_FIXTURE = "cafe_recording"
_RECORDING_TO = pytest.StashKey[Path]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(OFFLINE_INI, "record through the offline scripted model when CAFE_MODE is not set",
                  type="bool", default=False)


def pytest_configure(config: pytest.Config) -> None:
    try:
        config.getini(OFFLINE_INI)
    except (ValueError, pytest.UsageError):
        raise pytest.UsageError(f"{OFFLINE_INI}: expected true or false (or yes/no, on/off, 1/0)") from None
    extend(config, fixtures=(RECORDING_FIXTURE,), flags=("record_offline",))
    config.addinivalue_line("markers", "cafe_recording(..., record_offline=False): with the café's "
                                       "cafe_recording fixture, whether it records through the offline scripted model")


def _offline_chosen(request: pytest.FixtureRequest) -> bool:
    return bool(marker_options(request).get("record_offline")) or bool(request.config.getini(OFFLINE_INI))


@pytest.fixture
def cafe_model_client(request: pytest.FixtureRequest) -> Any:
    """The client a recording is made from (only built when recording): the live client
    with CAFE_MODE=live, the offline scripted one when it is chosen (CAFE_MODE=offline,
    the ini option cafe_record_offline, the marker's record_offline=True). With neither,
    the test fails: a recording of the scripted model made by accident would pass for a
    real one. Override this fixture in a conftest.py to record through another client."""
    from cafe.counter.clients.choose import chosen_mode, get_client
    from cafe.counter.clients.scripted import ScriptedClient
    from cafe.errors import ConfigurationError

    failure = None
    try:
        mode = chosen_mode(os.environ)
        if mode is not None:
            return get_client(os.environ)
    except ConfigurationError as error:
        failure = str(error)
    if failure is not None:
        pytest.fail(f"cafe: {failure}", pytrace=False)
    if _offline_chosen(request):
        return ScriptedClient()
    where = request.node.stash.get(_RECORDING_TO, None)
    pytest.fail(
        f"cafe: {where or 'this test'}: no recording yet, and no model to record: set CAFE_MODE=live (with "
        f"CAFE_BASE_URL, CAFE_API_KEY, CAFE_MODEL) to record the real one, or choose the offline scripted model "
        f"with CAFE_MODE=offline, the ini option {OFFLINE_INI} = true or "
        "@pytest.mark.cafe_recording(record_offline=True), or override the cafe_model_client fixture",
        pytrace=False,
    )


@pytest.fixture
def cafe_recording(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A chat client that records this test's model calls on its first run and replays
    them afterwards, with the network refused and exhaustion checked."""
    from cafe._pytest.network import allowed_hosts, network_refused
    from cafe.counter.replay_client import ReplayClient
    from cafe.recording.errors import RecordingError, TruncatedRecording
    from cafe.recording.modes import RecordMode
    from cafe.recording.reader import load_recording

    options = marker_options(request)
    mode = record_mode(request.config)
    path = recording_path(request)
    claim(request, path)
    hosts = allowed_hosts(path, options)  # checked when recording too: the marker is wrong either way
    if mode is RecordMode.ALL or (mode is RecordMode.ONCE and not recording_exists(path)):
        yield from _record(request, path)
        return
    if mode is RecordMode.NONE and not recording_exists(path):
        pytest.fail(
            f"cafe: {path}: no recording, and record mode 'none' forbids making one "
            "(run once with --cafe-record-mode=once to record it)",
            pytrace=False,
        )
    failure = None
    try:
        recording = load_recording(path, allow_truncated=bool(options.get("allow_truncated")))
        client = ReplayClient(recording, ignore=tuple(options.get("ignore", ())))
    except TruncatedRecording as error:
        # Its own message suggests the command line's flag; a test says it with the marker.
        failure = str(error) if error.line == 1 else (
            f"{error.path}:{error.line}: the last line is truncated (the recorder stopped "
            f"mid-write); mark the test @pytest.mark.cafe_recording(allow_truncated=True) to "
            f"replay the {error.complete_calls} complete call(s) before it"
        )
    except RecordingError as error:
        failure = str(error)
    except Exception as error:
        failure = one_line(error, "reading the recording")[len("cafe: "):]
    if failure is not None:
        # Out of the except block: the chained original would repeat what it says.
        pytest.fail(f"cafe: {failure}", pytrace=False)
    request.node.stash[REPLAY] = client
    with network_refused(path, hosts) as guard:
        request.node.stash[GUARD] = guard
        yield client


def _record(request: pytest.FixtureRequest, path: Path) -> Iterator[Any]:
    from cafe.counter.recording_client import RecordingClient
    from cafe.recording.modes import RecordMode

    request.node.stash[_RECORDING_TO] = path
    inner = request.getfixturevalue("cafe_model_client")
    make_recording_directory(path)
    failure = None
    try:
        # The writer records to PATH.partial and renames it into place on close.
        client = RecordingClient(inner, path, mode=RecordMode.ALL)
    except Exception as error:
        failure = one_line(error, "starting the recording")
    if failure is not None:
        raise one_line_failure(failure) from None
    try:
        yield client
    finally:
        failure = _kept_or_dropped(request, client)
    if failure is not None:
        raise one_line_failure(failure) from None


def _kept_or_dropped(request: pytest.FixtureRequest, client: Any) -> str | None:
    """Keep a passed test's recording, drop a failed one's; the failure line if that failed."""
    try:
        if request.node.stash.get(CALL_PASSED, False):
            client.close()
        else:
            # A failed test's calls hold customer text and are no contract: drop them.
            kept = client.abort()
            if kept is not None:
                with contextlib.suppress(FileNotFoundError):
                    kept.unlink()
    except Exception as error:
        return one_line(error, "keeping the recording")
    return None


