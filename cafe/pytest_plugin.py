"""cafe's pytest plugin: record a test's model calls once, replay them in CI.

Installed with cafe (entry point `pytest11: cafe_recording`). A test asks for the
`cafe_recording` fixture and gets a chat client:

    def test_latte(cafe_recording):
        run = run_shift(cafe_recording, ["A latte, please."], make_responder([]))
        assert run.stop_reason == "answered"

- The recording lives next to the test file, in `recordings/<module>/<test>.jsonl`, or
  where `@pytest.mark.cafe_recording(path=...)` says (relative to the test file).
- With no recording, the test records one through the client the `cafe_model_client`
  fixture gives (by default the one `cafe.clients.get_client()` picks: offline unless
  COURSE_MODE=live; override the fixture to record something else). The recording is
  written beside its final name and moved into place only when the test passes, so a
  failed test never leaves a half recording to be replayed.
- With a recording, the test replays it: responses are served in order, each request
  must match (`ReplayMismatch` otherwise; declare volatile fields with
  `@pytest.mark.cafe_recording(ignore=["messages.*.sent_at"])`), network connections are
  refused for the whole test, loopback included unless the test names the hosts it may
  reach (`@pytest.mark.cafe_recording(allow_hosts=["127.0.0.1"])`), and when the test
  body ends every recorded call must have been made: a test that made fewer calls fails
  naming the first unused one.
- `--cafe-record-mode=once` (default; or the `cafe_record_mode` ini setting) records only
  when there is no recording; `all` re-records every time; `none` never records, so a
  missing recording fails the test.

pytest imports this module in every session on a machine where cafe is installed, used or
not, so it imports nothing of the harness at module level: the recording machinery (and
jsonschema with it) is loaded only when a test asks for the fixture.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from cafe.recording.errors import ReplayError
    from cafe.recording.modes import RecordMode
    from cafe.recording.replay import ReplayClient

# The values of cafe.recording.modes.RecordMode, spelt out so that adding the option does
# not import cafe.recording (a test keeps the two equal).
RECORD_MODES = ("once", "all", "none")

_REPLAY: pytest.StashKey[ReplayClient] = pytest.StashKey()
_CALL_PASSED = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cafe", "cafe recordings")
    group.addoption(
        "--cafe-record-mode",
        choices=RECORD_MODES,
        default=None,
        help="once: record only when a test has no recording (default); all: re-record; "
             "none: never record (a missing recording fails the test)",
    )
    parser.addini("cafe_record_mode", "default for --cafe-record-mode", default="once")
    group.addoption(
        "--cafe-report-dir",
        default=None,
        metavar="DIR",
        help="on a failed replay, write a page of the mismatch to DIR/<recording>.html (private: 0600)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cafe_recording(path=None, *, ignore=(), allow_truncated=False, allow_hosts=()): where this "
        "test's cafe recording lives (relative to the test file), which request fields replay ignores "
        "and which hosts a replay may still connect to",
    )


def record_mode(config: pytest.Config) -> RecordMode:
    from cafe.recording.modes import RecordMode

    chosen = config.getoption("--cafe-record-mode") or config.getini("cafe_record_mode")
    try:
        return RecordMode.parse(chosen)
    except ValueError as error:
        raise pytest.UsageError(f"cafe_record_mode: {error}") from None


def recording_path(request: pytest.FixtureRequest) -> Path:
    marker = request.node.get_closest_marker("cafe_recording")
    explicit = (marker.kwargs.get("path") or (marker.args[0] if marker.args else None)) if marker else None
    here = Path(request.node.path).parent
    if explicit:
        path = Path(explicit)
        return path if path.is_absolute() else here / path
    test = "::".join(request.node.nodeid.split("::")[1:]) or request.node.name
    name = re.sub(r"[^\w.-]+", "_", test.replace("::", ".")).strip("_") or "test"
    return here / "recordings" / Path(request.node.path).stem / f"{name}.jsonl"


@pytest.fixture(autouse=True)
def _cafe_wire_recording(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test marked `cafe_recording` that builds its own model clients (it asks for no
    `cafe_recording` fixture): its httpx2 calls are recorded, then replayed (cafe.wire)."""
    marker = request.node.get_closest_marker("cafe_recording")
    if marker is None or "cafe_recording" in request.fixturenames:
        yield
        return
    from cafe.wire._pytest import marked_test

    yield from marked_test(request, recording_path(request), record_mode(request.config), dict(marker.kwargs),
                           _CALL_PASSED, _REPLAY)


@pytest.fixture
def cafe_model_client() -> Any:
    """The client a recording is made from (only built when recording). Override it in a
    conftest.py to record through another client."""
    from cafe.clients.select import get_client

    return get_client()


@pytest.fixture
def cafe_recording(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A chat client that records this test's model calls on its first run and replays
    them afterwards, with the network refused and exhaustion checked."""
    from cafe.recording.errors import RecordingError, TruncatedRecording
    from cafe.recording.modes import RecordMode
    from cafe.recording.reader import load_recording
    from cafe.recording.replay import ReplayClient

    marker = request.node.get_closest_marker("cafe_recording")
    options = marker.kwargs if marker else {}
    mode = record_mode(request.config)
    path = recording_path(request)
    hosts = allowed_hosts(path, options)  # checked when recording too: the marker is wrong either way
    if mode is RecordMode.ALL or (mode is RecordMode.ONCE and not path.exists()):
        yield from _record(request, path)
        return
    if not path.exists():
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
    if failure is not None:
        # Out of the except block: the chained original would repeat what it says.
        pytest.fail(f"cafe: {failure}", pytrace=False)
    request.node.stash[_REPLAY] = client
    with _network_refused(path, hosts):
        yield client


def _record(request: pytest.FixtureRequest, path: Path) -> Iterator[Any]:
    from cafe.recording.errors import RecordingError
    from cafe.recording.modes import RecordMode
    from cafe.recording.writer import RecordingClient

    inner = request.getfixturevalue("cafe_model_client")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        # The writer records to PATH.partial and renames it into place on close.
        client = RecordingClient(inner, path, mode=RecordMode.ALL)
    except RecordingError as error:
        pytest.fail(f"cafe: {error}", pytrace=False)
    try:
        yield client
    finally:
        if request.node.stash.get(_CALL_PASSED, False):
            client.close()
        else:
            # A failed test's calls hold customer text and are no contract: drop them.
            kept = client.abort()
            if kept is not None:
                with contextlib.suppress(FileNotFoundError):
                    kept.unlink()


def allowed_hosts(path: Path, options: Mapping[str, Any]) -> frozenset[str]:
    """The marker's `allow_hosts`: the hosts (names or addresses) a replaying test may still
    reach, such as a local server it starts itself; none unless it names them."""
    hosts = options.get("allow_hosts", ())
    if isinstance(hosts, str) or not all(isinstance(host, str) and host for host in hosts):
        pytest.fail(f"cafe: {path}: allow_hosts: expected a list of host names or addresses, "
                    'e.g. allow_hosts=["127.0.0.1"]', pytrace=False)
    return frozenset(hosts)


@contextlib.contextmanager
def _network_refused(path: Path, allow_hosts: Collection[str] = ()) -> Iterator[None]:
    """Refuse every connection and name lookup that is not a local Unix socket, or to one
    of `allow_hosts` (or an address a lookup of one of them gave)."""
    from cafe.recording.errors import NetworkRefused

    allowed = set(allow_hosts)

    def _allowed(address: Any) -> bool:
        return isinstance(address, tuple) and bool(address) and address[0] in allowed

    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex
    original_getaddrinfo = socket.getaddrinfo

    def _is_local(sock: socket.socket) -> bool:
        return getattr(socket, "AF_UNIX", None) is not None and sock.family == socket.AF_UNIX

    def _target(address: Any) -> str:
        if isinstance(address, tuple) and len(address) >= 2:
            return f"{address[0]}:{address[1]}"
        return "a network address"

    def connect(self: socket.socket, address: Any) -> None:
        if _is_local(self) or _allowed(address):
            return original_connect(self, address)
        raise NetworkRefused(path, _target(address))

    def connect_ex(self: socket.socket, address: Any) -> int:
        if _is_local(self) or _allowed(address):
            return original_connect_ex(self, address)
        raise NetworkRefused(path, _target(address))

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in allowed:
            found = original_getaddrinfo(host, port, *args, **kwargs)
            allowed.update(str(entry[4][0]) for entry in found)
            return found
        raise NetworkRefused(path, f"{host}:{port} (a name lookup)")

    # Patching a C type's methods: typeshed's signatures cannot be met by a wrapper.
    socket.socket.connect = connect  # type: ignore[method-assign, assignment]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign, assignment]
    socket.getaddrinfo = getaddrinfo
    try:
        yield
    finally:
        socket.socket.connect = original_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = original_connect_ex  # type: ignore[method-assign]
        socket.getaddrinfo = original_getaddrinfo


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    replay = item.stash.get(_REPLAY, None)
    if replay is None:
        # Not a replaying test (most, in a session that does not use cafe): nothing to check
        # but whether the body passed, which a recording needs to be kept.
        result = yield
        item.stash[_CALL_PASSED] = True
        return result
    from cafe.recording.errors import ReplayError

    failure: ReplayError | None = None
    # A wire replay keeps its first refusal: an SDK wraps it in an error of its own
    # (openai's APIConnectionError), or the test's code may have caught that.
    try:
        result = yield  # raises when the test body failed: that failure says more
    except ReplayError as error:
        # One line, not a traceback: the frames' arguments would print the conversation.
        failure = error
    except Exception:
        refused: ReplayError | None = getattr(replay, "failure", None)
        if refused is None:
            raise
        failure = refused
    if failure is None:
        failure = getattr(replay, "failure", None)
    if failure is None and replay.unused:
        try:
            replay.assert_exhausted()
        except ReplayError as error:
            failure = error
    if failure is not None:
        pytest.fail(f"cafe: {failure}{_report(item, replay, failure)}", pytrace=False)
    item.stash[_CALL_PASSED] = True
    return result


def _report(item: pytest.Item, replay: ReplayClient, failure: ReplayError) -> str:
    """With --cafe-report-dir: the mismatch page, named after the recording, never over
    another; returns the clause naming it for the failure line."""
    directory = item.config.getoption("--cafe-report-dir")
    if not directory:
        return ""
    from cafe.view import PageUnwritable, write_mismatch_report

    base = Path(directory) / replay.recording.path.stem
    for attempt in range(1, 100):
        target = base.with_name(f"{base.name}.html" if attempt == 1 else f"{base.name}-{attempt}.html")
        if os.path.lexists(target):
            continue
        try:
            write_mismatch_report(target, replay.recording, failure)
        except PageUnwritable as error:
            return f" (no report: {error})"
        return f" (report: {target})"
    return " (no report: 99 reports of this recording already in the directory)"
