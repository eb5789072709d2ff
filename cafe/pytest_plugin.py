"""cafe's pytest plugin: record a test's model calls once, replay them in CI.

Installed with cafe (entry point `pytest11: cafe_recording`). A test asks for the
`cafe_recording` fixture and gets a chat client:

    def test_latte(cafe_recording):
        run = run_shift(cafe_recording, ["A latte, please."], make_responder([]))
        assert run.stop_reason == "answered"

- The recording lives next to the test file, in `recordings/<module>/<test>.jsonl`, or
  where `@pytest.mark.cafe_recording(path=...)` says (relative to the test file).
  A test id that is not a safe file name (a parametrized `test_x[A latte, please.]`) is
  named by a readable slug of it and a short hash of the whole id; two tests of one
  session on one recording fail (with the fixture or without it).
- With no recording, the test records one through the client the `cafe_model_client`
  fixture gives: by default the live client with CAFE_MODE=live, or the offline scripted
  one when that is chosen (CAFE_MODE=offline, the ini option `cafe_record_offline = true`,
  or the marker's `record_offline=True`); with no choice the test fails saying so.
  Override the fixture to record something else. The recording is
  written beside its final name and moved into place only when the test passes, so a
  failed test never leaves a half recording to be replayed.
- With a recording, the test replays it: responses are served in order, each request
  must match (`ReplayMismatch` otherwise; declare volatile fields with
  `@pytest.mark.cafe_recording(ignore=["messages.*.sent_at"])`), the network is refused
  for the whole test (connections, datagrams, name lookups, and sends on connections opened
  before it; loopback too unless the test names the hosts it may reach:
  `@pytest.mark.cafe_recording(allow_hosts=["127.0.0.1"])`), and when the test body ends
  every recorded call must have been made: a test that made fewer calls fails naming the
  first unused one. A refusal is the line the test fails with, whatever a library or the
  test's code raised around it.
- A marker option of the wrong type, or a recording whose directory cannot be made, fails
  the test in one line naming it.
- `--cafe-record-mode=once` (default; or the `cafe_record_mode` ini setting) records only
  when there is no recording; `all` re-records every time; `none` never records, so a
  missing recording fails the test.
- `--cafe-report-dir=DIR` (relative to where pytest starts) gets each failing replay's page.
  A setting that cannot be used (an unknown record mode, a `cafe_record_offline` that is
  not a truth value, an empty report directory) is one usage line before any test runs.

pytest imports this module in every session on a machine where cafe is installed, used or
not, so it imports nothing of the harness at module level: the recording machinery (and
jsonschema with it) is loaded only when a test asks for the fixture.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import ipaddress
import os
import re
import socket
import unicodedata
from collections.abc import Collection, Generator, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import pytest

if TYPE_CHECKING:
    from cafe.recording.errors import NetworkRefused, ReplayError
    from cafe.recording.modes import RecordMode
    from cafe.recording.replay import ReplayClient

# The values of cafe.recording.modes.RecordMode, spelt out so that adding the option does
# not import cafe.recording (a test keeps the two equal).
RECORD_MODES = ("once", "all", "none")

_REPLAY: pytest.StashKey[ReplayClient] = pytest.StashKey()
_GUARD: pytest.StashKey[NetworkGuard] = pytest.StashKey()
_E = TypeVar("_E", bound=BaseException)
_CAFE_CODE = os.path.dirname(__file__) + os.sep
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
    parser.addini(OFFLINE_INI, "record through the offline scripted model when CAFE_MODE is not set",
                  type="bool", default=False)
    group.addoption(
        "--cafe-report-dir",
        default=None,
        metavar="DIR",
        help="on a failed replay, write a page of the mismatch to DIR/<folder>.<recording>.html (private: "
             "0600; DIR, relative to where pytest starts, is created 0700)",
    )


def _one_line(error: BaseException, while_: str) -> str:
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


def _first_in_chain(error: BaseException, kind: type[_E]) -> _E | None:
    """The nearest error of `kind` in `error`'s chain (`_chain`)."""
    return next((linked for linked in _chain(error) if isinstance(linked, kind)), None)


def _through_cafe(error: BaseException) -> bool:
    """Whether `error`, or an error in its chain (`_chain`), is cafe's or passed through a
    frame of cafe's code (this plugin's hooks, which every error of a test body passes, aside)."""
    from cafe.errors import CafeError

    for linked in _chain(error):
        if isinstance(linked, CafeError):
            return True
        traceback = linked.__traceback__
        while traceback is not None:
            filename = traceback.tb_frame.f_code.co_filename
            if filename.startswith(_CAFE_CODE) and filename != __file__:
                return True
            traceback = traceback.tb_next
    return False


def _failure(message: str) -> BaseException:
    """A one-line failure; raise it `from None`, so that no chained error is rendered with it."""
    return pytest.fail.Exception(message, pytrace=False)


_REPORT_DIR = pytest.StashKey[Path | None]()


def _checked_settings(config: pytest.Config) -> None:
    """Refuse, before any test runs and in one line, a setting of the plugin that cannot be
    used; and fix `--cafe-report-dir` to where pytest starts (a test may change directory)."""
    mode = config.getini("cafe_record_mode")
    if mode not in RECORD_MODES:
        shown = repr(mode) if isinstance(mode, str) and len(mode) <= 20 else "given"
        raise pytest.UsageError(f"cafe_record_mode: unknown record mode {shown}; use one of {', '.join(RECORD_MODES)}")
    try:
        config.getini(OFFLINE_INI)
    except (ValueError, pytest.UsageError):
        raise pytest.UsageError(f"{OFFLINE_INI}: expected true or false (or yes/no, on/off, 1/0)") from None
    directory = config.getoption("--cafe-report-dir")
    if directory is not None and not directory.strip():
        raise pytest.UsageError("--cafe-report-dir: needs a directory (an empty one names none); leave the option "
                                "out to write no report pages")
    config.stash[_REPORT_DIR] = None if directory is None else config.invocation_params.dir / directory


def pytest_configure(config: pytest.Config) -> None:
    _checked_settings(config)
    config.addinivalue_line(
        "markers",
        "cafe_recording(path=None, *, ignore=(), allow_truncated=False, allow_hosts=(), "
        "record_offline=False): where this test's cafe recording lives (relative to the test file), "
        "which request fields replay ignores, which hosts a replaying test may still reach, and "
        "whether it records through the offline scripted model",
    )


def record_mode(config: pytest.Config) -> RecordMode:
    from cafe.recording.modes import RecordMode

    chosen = config.getoption("--cafe-record-mode") or config.getini("cafe_record_mode")
    try:
        return RecordMode.parse(chosen)
    except ValueError as error:
        raise pytest.UsageError(f"cafe_record_mode: {error}") from None


MARKER = "cafe_recording"
MARKER_OPTIONS = ("path", "ignore", "allow_truncated", "allow_hosts", "record_offline")
MARKER_FLAGS = ("allow_truncated", "record_offline")
MAX_NAME_BYTES = 96  # of the readable part of a recording's name; a file name may hold 255
DIGEST_CHARS = 12


def marker_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The test's `@pytest.mark.cafe_recording(...)` options, checked: an unknown option or
    an empty path fails the test saying so, rather than being quietly ignored."""
    marker = request.node.get_closest_marker(MARKER)
    if marker is None:
        return {}
    known = ", ".join(MARKER_OPTIONS)
    unknown = sorted(set(marker.kwargs) - set(MARKER_OPTIONS))
    if unknown:
        pytest.fail(f"cafe: @pytest.mark.cafe_recording: no option {unknown[0]!r}; it takes {known}", pytrace=False)
    if len(marker.args) > 1 or (marker.args and "path" in marker.kwargs):
        pytest.fail("cafe: @pytest.mark.cafe_recording: one path only, given either first or as path=",
                    pytrace=False)
    options = dict(marker.kwargs)
    for flag in MARKER_FLAGS:
        # bool("no") is True: only a bool says what the test means.
        if flag in options and not isinstance(options[flag], bool):
            pytest.fail(f"cafe: @pytest.mark.cafe_recording({flag}=...): expected True or False, found "
                        f"{type(options[flag]).__name__}", pytrace=False)
    if marker.args:
        options["path"] = marker.args[0]
    path = options.get("path")
    if path is not None:
        _check_path(path)
    if "ignore" in options:
        _check_ignore(options["ignore"])
    return options


def _check_path(path: Any) -> None:
    """The marker's path is a string (or a path object) naming a file."""
    shown = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not isinstance(shown, str):
        found = type(path if shown is None else shown).__name__
        pytest.fail(f"cafe: @pytest.mark.cafe_recording(path=...): needs a file path (a string), found {found}",
                    pytrace=False)
    if not shown.strip():
        pytest.fail("cafe: @pytest.mark.cafe_recording(path=...): needs a file path (an empty one names no "
                    "file); leave path out to name the recording after the test", pytrace=False)
    if "\0" in shown:
        pytest.fail("cafe: @pytest.mark.cafe_recording(path=...): a file path cannot hold a NUL character",
                    pytrace=False)


def _check_ignore(ignore: Any) -> None:
    """`ignore` is a list of field paths, each one replay can use: a string alone would be
    taken a character at a time, so it is refused, whether the test records or replays."""
    from cafe.recording.normalise import parse_path

    option = "cafe: @pytest.mark.cafe_recording(ignore=...)"
    if isinstance(ignore, str):
        plain = ignore.strip() and ignore.isprintable() and len(ignore) <= 60 and not set(ignore) & set('"\\')
        example = f'"{ignore}"' if plain else '"metadata.run_id"'
        pytest.fail(f"{option}: expected a list of field paths, found a string (write ignore=[{example}])",
                    pytrace=False)
    if not isinstance(ignore, list | tuple | set | frozenset):
        pytest.fail(f"{option}: expected a list of field paths, found {type(ignore).__name__} "
                    '(e.g. ignore=["metadata.run_id"])', pytrace=False)
    failure = None
    for declared in ignore:
        if not isinstance(declared, str):
            failure = f"expected a field path (a string), found {type(declared).__name__}"
            break
        try:
            parse_path(declared)
        except ValueError as error:
            failure = str(error)
            break
    if failure is not None:
        pytest.fail(f"{option}: {failure}", pytrace=False)


def recording_name(test: str) -> str:
    """A recording's file name for a test id within its module (`test_x[a, b]`,
    `TestCafe::test_x`): the id itself when it is a safe file name, else a readable slug
    of it, bounded in length, followed by a short hash of the whole id, so that two ids
    never share a name (`[A latte, please.]` and `[A latte; please.]` differ)."""
    readable = test.replace("::", ".")
    slug = re.sub(r"[^\w.-]+", "_", readable).strip("._-") or "test"
    exact = slug == readable and len(slug.encode("utf-8")) <= MAX_NAME_BYTES
    if exact:
        return f"{slug}.jsonl"
    bounded = slug.encode("utf-8")[:MAX_NAME_BYTES].decode("utf-8", "ignore").rstrip("._-") or "test"
    digest = hashlib.sha256(test.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_CHARS]
    return f"{bounded}-{digest}.jsonl"


def recording_path(request: pytest.FixtureRequest) -> Path:
    explicit = marker_options(request).get("path")
    here = Path(request.node.path).parent
    if explicit is not None:
        path = Path(explicit)
        return path if path.is_absolute() else here / path
    test = "::".join(request.node.nodeid.split("::")[1:]) or request.node.name
    return here / "recordings" / Path(request.node.path).stem / recording_name(test)


_CLAIMED = pytest.StashKey[dict[str, str]]()


def _claim(request: pytest.FixtureRequest, path: Path) -> None:
    """One recording per test in a session: a second test on the same file (a shared
    path=, or two names that one file system takes for the same: case, Unicode form)
    fails, instead of replaying or replacing the other's recording."""
    claims = request.config.stash.setdefault(_CLAIMED, {})
    key = unicodedata.normalize("NFC", os.path.abspath(path)).casefold()
    owner = claims.setdefault(key, request.node.nodeid)
    if owner != request.node.nodeid:
        pytest.fail(f"cafe: {path}: this recording is already {owner}'s in this session; two tests cannot "
                    "share one (give this test its own @pytest.mark.cafe_recording(path=...))", pytrace=False)


_RECORDING_TO = pytest.StashKey[Path]()
OFFLINE_INI = "cafe_record_offline"


def _offline_chosen(request: pytest.FixtureRequest) -> bool:
    return bool(marker_options(request).get("record_offline")) or bool(request.config.getini(OFFLINE_INI))


@pytest.fixture(autouse=True)
def _cafe_wire_recording(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test marked `cafe_recording` that builds its own model clients (it asks for no
    `cafe_recording` fixture): its httpx2 calls are recorded, then replayed (cafe.wire)."""
    marker = request.node.get_closest_marker("cafe_recording")
    if marker is None or "cafe_recording" in request.fixturenames:
        yield
        return
    from cafe.wire._pytest import marked_test

    path = recording_path(request)
    _claim(request, path)
    yield from marked_test(request, path, record_mode(request.config), dict(marker.kwargs),
                           _CALL_PASSED, _REPLAY)


@pytest.fixture
def cafe_model_client(request: pytest.FixtureRequest) -> Any:
    """The client a recording is made from (only built when recording): the live client
    with CAFE_MODE=live, the offline scripted one when it is chosen (CAFE_MODE=offline,
    the ini option cafe_record_offline, the marker's record_offline=True). With neither,
    the test fails: a recording of the scripted model made by accident would pass for a
    real one. Override this fixture in a conftest.py to record through another client."""
    from cafe.clients.choose import chosen_mode, get_client
    from cafe.clients.scripted import ScriptedClient
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
    from cafe.recording.errors import RecordingError, TruncatedRecording
    from cafe.recording.modes import RecordMode
    from cafe.recording.reader import load_recording
    from cafe.recording.replay import ReplayClient

    options = marker_options(request)
    mode = record_mode(request.config)
    path = recording_path(request)
    _claim(request, path)
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
        failure = _one_line(error, "reading the recording")[len("cafe: "):]
    if failure is not None:
        # Out of the except block: the chained original would repeat what it says.
        pytest.fail(f"cafe: {failure}", pytrace=False)
    request.node.stash[_REPLAY] = client
    with _network_refused(path, hosts) as guard:
        request.node.stash[_GUARD] = guard
        yield client


def _record(request: pytest.FixtureRequest, path: Path) -> Iterator[Any]:
    from cafe.recording.modes import RecordMode
    from cafe.recording.writer import RecordingClient

    request.node.stash[_RECORDING_TO] = path
    inner = request.getfixturevalue("cafe_model_client")
    make_recording_directory(path)
    failure = None
    try:
        # The writer records to PATH.partial and renames it into place on close.
        client = RecordingClient(inner, path, mode=RecordMode.ALL)
    except Exception as error:
        failure = _one_line(error, "starting the recording")
    if failure is not None:
        raise _failure(failure) from None
    try:
        yield client
    finally:
        failure = _kept_or_dropped(request, client)
    if failure is not None:
        raise _failure(failure) from None


def recording_exists(path: Path) -> bool:
    """Whether anything is at the recording's path; a path that cannot be examined (a name too
    long, a loop of links) fails the test in one line naming it and why."""
    from cafe._files import reason

    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as error:
        failure = f"cafe: {path}: the recording's path cannot be examined ({reason(error)})"
    else:
        return True
    pytest.fail(failure, pytrace=False)


def make_recording_directory(path: Path) -> None:
    """Make the directories a recording goes in, or fail the test in one line naming the
    recording and why they cannot be made (a file in the way, permission denied, a
    read-only file system)."""
    from cafe._files import reason
    from cafe.errors import Unwritable

    directory = path.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        # The part of the path that is there and is not a directory.
        blocker = next((part for part in (directory, *directory.parents)
                        if os.path.lexists(part) and not part.is_dir()), directory)
        why = f"its directory cannot be made: {blocker} is not a directory"
    except OSError as error:
        why = f"its directory {directory} cannot be made ({reason(error)})"
    else:
        return
    pytest.fail(f"cafe: {Unwritable(path, why, what='the recording')}", pytrace=False)


def _kept_or_dropped(request: pytest.FixtureRequest, client: Any) -> str | None:
    """Keep a passed test's recording, drop a failed one's; the failure line if that failed."""
    try:
        if request.node.stash.get(_CALL_PASSED, False):
            client.close()
        else:
            # A failed test's calls hold customer text and are no contract: drop them.
            kept = client.abort()
            if kept is not None:
                with contextlib.suppress(FileNotFoundError):
                    kept.unlink()
    except Exception as error:
        return _one_line(error, "keeping the recording")
    return None


def is_loopback(host: Any) -> bool:
    """A host that names this machine's loopback interface: `localhost`, 127.0.0.0/8, ::1
    (an IPv4-mapped one too), or None (getaddrinfo's "this host", which looks nothing up)."""
    if host is None:
        return True
    if isinstance(host, (bytes, bytearray)):
        host = bytes(host).decode("ascii", "replace")
    text = str(host).strip().lower()
    if text in ("localhost", "localhost."):
        return True
    try:
        address = ipaddress.ip_address(text.strip("[]").split("%")[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _host_key(host: Any) -> str:
    """A host as the allowlist compares it: text, lower case, without IPv6 brackets."""
    if isinstance(host, (bytes, bytearray)):
        host = bytes(host).decode("ascii", "replace")
    return str(host).strip().lower().strip("[]")


def _addresses_in(lookup: str, found: Any) -> list[str]:
    """The addresses a name lookup returned (`getaddrinfo` entries, `gethostbyname`'s one,
    `gethostbyname_ex`'s list), so that a connection to one of them is the allowed host's."""
    if lookup == "getaddrinfo":
        return [str(entry[4][0]) for entry in found]
    if lookup == "gethostbyname":
        return [str(found)]
    if lookup in ("gethostbyname_ex", "gethostbyaddr"):
        return [str(address) for address in found[2]]
    return []


def _target(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return "a network address"


def _host_of(address: Any) -> Any:
    return address[0] if isinstance(address, tuple) and address else address


def allowed_hosts(path: Path, options: Mapping[str, Any]) -> frozenset[str]:
    """The marker's `allow_hosts`: the hosts (names or addresses) a replaying test may still
    reach, such as a local server it starts itself; none unless it names them."""
    hosts = options.get("allow_hosts", ())
    listed = isinstance(hosts, list | tuple | set | frozenset)
    if not listed or not all(isinstance(host, str) and host for host in hosts):
        pytest.fail(f"cafe: {path}: allow_hosts: expected a list of host names or addresses, "
                    'e.g. allow_hosts=["127.0.0.1"]', pytrace=False)
    return frozenset(hosts)


class NetworkGuard:
    """What a replaying test's network guard refused. `failure` is its first refusal, kept
    because a library may catch it, wrap it in an error of its own or retry past it (an
    asyncio transport turns it into a lost connection): the test's failure names it."""

    __slots__ = ("failure",)

    def __init__(self) -> None:
        self.failure: NetworkRefused | None = None


_IP_FAMILIES = (socket.AF_INET, socket.AF_INET6)
_SENDS = ("send", "sendall", "sendfile")  # socket.socket's ways to send on its connection
_TLS_SENDS = ("send", "sendall", "write")  # ssl.SSLSocket's own, which encrypt before they send


@contextlib.contextmanager
def _network_refused(path: Path, allow_hosts: Collection[str] = ()) -> Iterator[NetworkGuard]:
    """Refuse every way out of the process over an IP socket for the test's duration:
    connections (`connect`, `connect_ex`, `create_connection`), name lookups (`getaddrinfo`,
    `gethostbyname`, `gethostbyname_ex`, `gethostbyaddr`, `getnameinfo`), datagrams sent to
    an address (`sendto`, `sendmsg`), and bytes sent on a connection that is already open,
    however long before the test it was opened (a module's `http.client` connection, a
    `requests.Session`'s pool): `send`, `sendall`, `sendmsg`, `sendfile` and `os.sendfile`
    on a socket, `send`, `sendall` and `write` on a TLS socket. asyncio's transports send
    through these. Local Unix sockets are allowed, and the hosts of `allow_hosts` (the
    marker's option: names or addresses; a lookup of an allowed name allows the addresses it
    gives). The guard yielded keeps the first refusal."""
    import ssl
    import stat

    from cafe.recording.errors import NetworkRefused

    guard = NetworkGuard()
    allowed = {_host_key(host) for host in allow_hosts}
    loopback_remedy = ("; name it in @pytest.mark.cafe_recording(allow_hosts=[\"127.0.0.1\"]) to let the test "
                       "reach a server it started on this machine")

    def refuse(target: str, attempt: str, host: Any) -> NoReturn:
        remedy = loopback_remedy if is_loopback(host) else ""
        refused = NetworkRefused(path, target, attempt=attempt, remedy=remedy)
        if guard.failure is None:
            guard.failure = refused
        raise refused

    def allowed_host(host: Any) -> bool:
        return host is not None and _host_key(host) in allowed

    def allowed_socket(sock: socket.socket, address: Any) -> bool:
        if getattr(socket, "AF_UNIX", None) is not None and sock.family == socket.AF_UNIX:
            return True
        return sock.family in _IP_FAMILIES and allowed_host(_host_of(address))

    def check_peer(sock: socket.socket) -> None:
        """Refuse bytes sent on an IP connection to a host the test may not reach."""
        if sock.family not in _IP_FAMILIES:
            return
        try:
            peer = sock.getpeername()
        except OSError:  # not connected (or closed): the send itself fails, as it would
            return
        if not allowed_host(_host_of(peer)):
            refuse(_target(peer), "a send on a connection to", _host_of(peer))

    originals: dict[tuple[Any, str], tuple[Any, bool]] = {}

    def patch(owner: Any, name: str, replacement: Any) -> None:
        originals[(owner, name)] = (getattr(owner, name), name in vars(owner))
        setattr(owner, name, replacement)

    def real(owner: Any, name: str) -> Any:
        return originals[(owner, name)][0]

    def connect(self: socket.socket, address: Any) -> None:
        if not allowed_socket(self, address):
            refuse(_target(address), "a connection to", _host_of(address))
        return real(socket.socket, "connect")(self, address)  # type: ignore[no-any-return]

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not allowed_socket(self, address):
            refuse(_target(address), "a connection to", _host_of(address))
        return real(socket.socket, "connect_ex")(self, address)  # type: ignore[no-any-return]

    def sendto(self: socket.socket, data: Any, *rest: Any) -> int:
        address = rest[-1] if rest else None
        if not allowed_socket(self, address):
            refuse(_target(address), "a datagram to", _host_of(address))
        return real(socket.socket, "sendto")(self, data, *rest)  # type: ignore[no-any-return]

    def sendmsg(self: socket.socket, buffers: Any, *rest: Any, **named: Any) -> int:
        address = named.get("address", rest[2] if len(rest) > 2 else None)
        if address is None:
            check_peer(self)
        elif not allowed_socket(self, address):
            refuse(_target(address), "a message to", _host_of(address))
        return real(socket.socket, "sendmsg")(self, buffers, *rest, **named)  # type: ignore[no-any-return]

    def on_connection(owner: type[socket.socket], name: str) -> Any:
        def send(self: socket.socket, *args: Any, **kwargs: Any) -> Any:
            check_peer(self)
            return real(owner, name)(self, *args, **kwargs)
        send.__name__ = send.__qualname__ = name
        return send

    def os_sendfile(out_fd: Any, in_fd: Any, *args: Any, **kwargs: Any) -> int:
        try:
            is_socket = stat.S_ISSOCK(os.fstat(out_fd).st_mode)
        except (OSError, TypeError, ValueError):  # not a descriptor: os.sendfile says so itself
            is_socket = False
        if is_socket:
            # A socket object over the descriptor to ask its peer: made under a default timeout
            # it turns the descriptor non-blocking, which is put back as its owner had it.
            blocking = os.get_blocking(out_fd)
            sock = socket.socket(fileno=out_fd)
            try:
                check_peer(sock)
            finally:
                sock.detach()  # the descriptor stays its owner's, open
                if os.get_blocking(out_fd) != blocking:
                    os.set_blocking(out_fd, blocking)
        return real(os, "sendfile")(out_fd, in_fd, *args, **kwargs)  # type: ignore[no-any-return]

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        if not allowed_host(_host_of(address)):
            refuse(_target(address), "a connection to", _host_of(address))
        return real(socket, "create_connection")(address, *args, **kwargs)  # type: ignore[no-any-return]

    def lookup(name: str) -> Any:
        def looked_up(host: Any, *args: Any, **kwargs: Any) -> Any:
            if not allowed_host(host):
                refuse(str(host) if not isinstance(host, bytes) else host.decode("ascii", "replace"),
                       "a name lookup of", host)
            found = real(socket, name)(host, *args, **kwargs)
            allowed.update(_host_key(address) for address in _addresses_in(name, found))
            return found
        return looked_up

    def getnameinfo(address: Any, flags: int) -> Any:
        if not allowed_host(_host_of(address)):
            refuse(_target(address), "a name lookup of", _host_of(address))
        return real(socket, "getnameinfo")(address, flags)

    # Patching a C type's methods: typeshed's signatures cannot be met by a wrapper.
    try:
        patch(socket.socket, "connect", connect)
        patch(socket.socket, "connect_ex", connect_ex)
        patch(socket.socket, "sendto", sendto)
        if hasattr(socket.socket, "sendmsg"):
            patch(socket.socket, "sendmsg", sendmsg)
        for name in _SENDS:
            patch(socket.socket, name, on_connection(socket.socket, name))
        for name in _TLS_SENDS:
            patch(ssl.SSLSocket, name, on_connection(ssl.SSLSocket, name))
        if hasattr(os, "sendfile"):
            patch(os, "sendfile", os_sendfile)
        patch(socket, "create_connection", create_connection)
        for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr"):
            patch(socket, name, lookup(name))
        patch(socket, "getnameinfo", getnameinfo)
        yield guard
    finally:
        for (owner, name), (original, own) in reversed(list(originals.items())):
            if own:
                setattr(owner, name, original)
            else:  # it was inherited: the class is left as it was found
                delattr(owner, name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    replay = item.stash.get(_REPLAY, None)
    if replay is None:
        # Not a replaying test (most, in a session that does not use cafe): nothing to check
        # but whether the body passed, which a recording needs to be kept.
        if "cafe_recording" not in getattr(item, "fixturenames", ()):
            result = yield
        else:
            result = yield from _one_line_through_cafe("recording")
        item.stash[_CALL_PASSED] = True
        return result
    from cafe.recording.errors import ReplayError

    failure: ReplayError | None = None
    through = None
    try:
        result = yield
    except (KeyboardInterrupt, pytest.exit.Exception):
        raise
    except BaseException as error:
        # The replay's refusal is what the test reports, whatever came of it: raised as it is,
        # wrapped in a library's error (an SDK's APIConnectionError, a retry wrapper's), or
        # caught by the test's code, which then failed, skipped or exited some other way.
        failure = _first_in_chain(error, ReplayError) or _kept_refusal(item, replay)
        if failure is None:
            if not isinstance(error, Exception) or not _through_cafe(error):
                raise
            through = _one_line(error, "replaying")
    if through is not None:
        # One line, not a traceback: the frames' arguments would print the conversation.
        raise _failure(through) from None
    if failure is None:
        # A test that caught a refused wire request and passed made fewer calls than it meant.
        failure = getattr(replay, "failure", None)
    if failure is None and replay.unused:
        try:
            replay.assert_exhausted()
        except ReplayError as error:
            failure = error
    if failure is not None:
        raise _failure(f"cafe: {failure}{_report(item, replay, failure)}") from None
    item.stash[_CALL_PASSED] = True
    return result


def _kept_refusal(item: pytest.Item, replay: Any) -> ReplayError | None:
    """The replay's first refusal of a wire request, else its network guard's first refusal."""
    refused: ReplayError | None = getattr(replay, "failure", None)
    if refused is None:
        guard = item.stash.get(_GUARD, None)
        refused = None if guard is None else guard.failure
    return refused


def _one_line_through_cafe(while_: str) -> Generator[None, Any, Any]:
    """The test body (the wrapper's `yield`), its failure one line when it came through cafe's
    code: pytest renders each frame's source and, with --showlocals, its locals, and cafe's
    frames hold the recorded conversation. A cafe error the failure was raised from or during
    is the line."""
    from cafe.errors import CafeError

    failure = None
    try:
        return (yield)
    except Exception as error:  # pytest's outcomes (skip, xfail, fail) are BaseExceptions: not caught
        if not _through_cafe(error):
            raise
        failure = _one_line(_first_in_chain(error, CafeError) or error, while_)
    raise _failure(failure) from None


def _report(item: pytest.Item, replay: ReplayClient, failure: ReplayError) -> str:
    """With --cafe-report-dir: the mismatch page, named after the recording, inside the
    directory and never over another file; returns the clause naming it for the failure line."""
    directory = item.config.stash.get(_REPORT_DIR, None)
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
