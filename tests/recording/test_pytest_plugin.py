"""The pytest plugin (cafe/pytest_plugin.py), accepted end to end: it records, then replays with
sockets refused, then fails a test that makes one call fewer, naming the unused call; its
failures are one clean line, and a truncated recording's failure names the marker option."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

TEST_MODULE = '''
import socket

import pytest

from cafe.counter.clients.canned import CannedClient
from cafe.recording import NetworkRefused, RecordingClient, ReplayClient

CALLS = {calls}
FIRST_LINE = {first_line!r}


@pytest.fixture
def cafe_model_client():
    return CannedClient([{{"content": f"reply {{n}}"}} for n in range(1, 10)])


def test_order(cafe_recording, tmp_path_factory):
    messages = [{{"role": "system", "content": "be brief"}}]
    for n in range(1, CALLS + 1):
        messages.append({{"role": "user", "content": FIRST_LINE if n == 1 else f"order line {{n}}"}})
        reply = cafe_recording.chat(messages)
        messages.append(reply["choices"][0]["message"])
    print("CLIENT", type(cafe_recording).__name__)
    if isinstance(cafe_recording, ReplayClient):
        with pytest.raises(NetworkRefused):
            socket.create_connection(("127.0.0.1", 9), timeout=1)
        with pytest.raises(NetworkRefused):
            socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("127.0.0.1", 9))
        with pytest.raises(NetworkRefused):
            socket.getaddrinfo("api.openai.com", 443)
'''


def _write(pytester: pytest.Pytester, calls: int = 3, first_line: str = "A latte, please.") -> None:
    pytester.makepyfile(test_orders=TEST_MODULE.format(calls=calls, first_line=first_line))


@pytest.fixture
def recording(pytester: pytest.Pytester) -> Path:
    return pytester.path / "recordings" / "test_orders" / "test_order.jsonl"


def test_records_then_replays_then_fails_one_call_fewer(pytester: pytest.Pytester, recording: Path):
    _write(pytester, calls=3)
    first = pytester.runpytest("-s")
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(["*CLIENT RecordingClient*"])
    assert recording.is_file() and recording.stat().st_mode & 0o777 == 0o600
    assert len(recording.read_text().splitlines()) == 4  # header and three calls
    recorded = recording.read_bytes()

    second = pytester.runpytest("-s")
    second.assert_outcomes(passed=1)
    second.stdout.fnmatch_lines(["*CLIENT ReplayClient*"])
    assert recording.read_bytes() == recorded  # replaying never rewrites

    _write(pytester, calls=2)
    third = pytester.runpytest()
    third.assert_outcomes(failed=1)
    third.stdout.fnmatch_lines(["*1 recorded call(s) were never made, from call 3 (line 4: 6 messages*"])
    assert recording.read_bytes() == recorded


def test_record_mode_none_without_a_recording_fails_clearly(pytester: pytest.Pytester, recording: Path):
    _write(pytester)
    result = pytester.runpytest("--cafe-record-mode=none")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*no recording, and record mode 'none' forbids making one*"])
    assert not recording.exists()
    # The remedy the message names, run as written, records; mode none then replays.
    remedy = next(word.rstrip(")") for line in result.stdout.lines for word in line.split()
                  if word.startswith("--cafe-record-mode="))
    pytester.runpytest(remedy).assert_outcomes(passed=1)
    assert recording.exists()
    pytester.runpytest("--cafe-record-mode=none").assert_outcomes(passed=1)


def test_record_mode_none_replays_an_existing_recording(pytester: pytest.Pytester, recording: Path):
    _write(pytester)
    pytester.runpytest().assert_outcomes(passed=1)
    pytester.runpytest("--cafe-record-mode=none").assert_outcomes(passed=1)


def test_a_changed_request_fails_naming_call_and_path(pytester: pytest.Pytester, recording: Path):
    _write(pytester)
    pytester.runpytest().assert_outcomes(passed=1)
    _write(pytester, first_line="A mocha, please.")
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "call 1: the request differs from the recording at $.messages[1].content: recorded text(" in output
    assert "mocha" not in output and "latte" not in output


def test_mode_all_re_records(pytester: pytest.Pytester, recording: Path):
    _write(pytester, calls=3)
    pytester.runpytest().assert_outcomes(passed=1)
    _write(pytester, calls=2)
    pytester.runpytest("--cafe-record-mode=all").assert_outcomes(passed=1)
    assert len(recording.read_text().splitlines()) == 3
    pytester.runpytest().assert_outcomes(passed=1)


def test_more_calls_than_recorded_fails(pytester: pytest.Pytester, recording: Path):
    _write(pytester, calls=2)
    pytester.runpytest().assert_outcomes(passed=1)
    _write(pytester, calls=3)
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*call 3 was made, but the recording holds only 2*"])


def test_a_failing_test_leaves_no_recording(pytester: pytest.Pytester, recording: Path):
    pytester.makepyfile(test_orders="""
        from cafe.counter.clients.canned import CannedClient
        import pytest

        @pytest.fixture
        def cafe_model_client():
            return CannedClient([{"content": "hi"}])

        def test_order(cafe_recording):
            cafe_recording.chat([{"role": "user", "content": "hello"}])
            assert False, "the test itself fails"
    """)
    pytester.runpytest().assert_outcomes(failed=1)
    assert not recording.exists()
    assert not list(recording.parent.glob(".*partial"))


def test_marker_path_and_ignore(pytester: pytest.Pytester):
    pytester.makepyfile(test_stamped="""
        import time
        import pytest
        from cafe.counter.clients.canned import CannedClient

        @pytest.fixture
        def cafe_model_client():
            return CannedClient([{"content": "hi"}])

        @pytest.mark.cafe_recording("fixtures/stamped.jsonl", ignore=["messages.*.sent_at"])
        def test_stamped(cafe_recording):
            cafe_recording.chat([{"role": "user", "content": "hello", "sent_at": time.time_ns()}])
    """)
    pytester.runpytest().assert_outcomes(passed=1)
    path = pytester.path / "fixtures" / "stamped.jsonl"
    assert json.loads(path.read_text().splitlines()[0])["format"] == "cafe-recording"
    pytester.runpytest().assert_outcomes(passed=1)


def test_a_whole_shift_through_the_default_client(pytester: pytest.Pytester, monkeypatch):
    monkeypatch.setenv("COURSE_MODE", "offline")
    monkeypatch.delenv("CAFE_MODE", raising=False)
    pytester.makepyfile(test_shift="""
        from cafe.counter.consent import make_responder
        from cafe.counter.loop import run_shift

        def test_shift(cafe_recording):
            run = run_shift(cafe_recording, ["A latte, please.", "Nothing else."],
                            make_responder([("approve", None)]))
            assert run.stop_reason == "answered"
    """)
    pytester.runpytest().assert_outcomes(passed=1)
    pytester.runpytest("--cafe-record-mode=none").assert_outcomes(passed=1)


# --- recording names ---------------------------------------------------------------------

PARAMETRIZED = '''
import pytest
from cafe.counter.clients.canned import CannedClient


@pytest.fixture
def cafe_model_client(request):
    return CannedClient([{{"content": "reply to " + request.node.callspec.id}}])


@pytest.mark.parametrize("line", {lines!r})
def test_order(cafe_recording, line):
    reply = cafe_recording.chat([{{"role": "user", "content": line}}])
    assert reply["choices"][0]["message"]["content"]
'''


@pytest.mark.parametrize("lines", [
    ["A latte, please.", "A latte; please."],
    ["A latte", "A latte?", "A latte!", "a latte"],
    ["x" * 300 + "1", "x" * 300 + "2"],  # past any file name's length, alike up to the bound
    ["café", "cafe\u0301"],  # one word, in its two Unicode forms
])
def test_each_parametrized_test_has_its_own_recording(pytester: pytest.Pytester, lines):
    pytester.makepyfile(test_orders=PARAMETRIZED.format(lines=lines))
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=len(lines))
    files = sorted((pytester.path / "recordings" / "test_orders").glob("*.jsonl"))
    assert len(files) == len(lines)
    assert all(len(f.name.encode()) <= 255 and f.name.startswith("test_order") for f in files)
    before = {f.name: f.read_bytes() for f in files}
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=len(lines))  # each replays its own
    pytester.runpytest("-p", "no:cacheprovider", "--cafe-record-mode=all").assert_outcomes(passed=len(lines))
    assert sorted(f.name for f in (pytester.path / "recordings" / "test_orders").glob("*.jsonl")) == sorted(before)


def test_a_name_is_the_test_id_when_it_is_a_safe_file_name_else_a_slug_and_a_stable_hash():
    from cafe.pytest_plugin import recording_name

    assert recording_name("test_order") == "test_order.jsonl"
    assert recording_name("TestCafe::test_order") == "TestCafe.test_order.jsonl"
    first, second = recording_name("test_order[A latte, please.]"), recording_name("test_order[A latte; please.]")
    assert first != second and first.startswith("test_order_A_latte_please-")
    assert recording_name("test_order[A latte, please.]") == first  # stable across runs
    assert len(recording_name("t[" + "é" * 400 + "]").encode()) < 255


def test_two_tests_on_one_recording_are_refused(pytester: pytest.Pytester):
    pytester.makepyfile(test_shared='''
        import pytest
        from cafe.counter.clients.canned import CannedClient

        @pytest.fixture
        def cafe_model_client():
            return CannedClient([{"content": "hi"}])

        @pytest.mark.cafe_recording("shared.jsonl")
        def test_first(cafe_recording):
            cafe_recording.chat([{"role": "user", "content": "one"}])

        @pytest.mark.cafe_recording("shared.jsonl")
        def test_second(cafe_recording):
            cafe_recording.chat([{"role": "user", "content": "two"}])
    ''')
    for mode in ("once", "all"):
        result = pytester.runpytest("-p", "no:cacheprovider", f"--cafe-record-mode={mode}")
        result.assert_outcomes(passed=1, errors=1)
        result.stdout.fnmatch_lines(["*shared.jsonl: this recording is already test_shared.py::test_first's "
                                     "in this session; two tests cannot share one*"])


def test_two_marked_tests_that_build_their_own_clients_on_one_recording_are_refused(pytester: pytest.Pytester):
    """The wire path (a marked test that asks for no fixture) claims its recording too: in mode
    `all` the second would otherwise replace the first's, in `once` replay the first's."""
    pytester.makepyfile(test_shared='''
        import pytest

        @pytest.mark.cafe_recording("shared.jsonl")
        @pytest.mark.parametrize("line", ["A latte, please.", "A latte; please."])
        def test_agent(line):
            pass
    ''')
    for mode in ("once", "all"):
        result = pytester.runpytest("-p", "no:cacheprovider", f"--cafe-record-mode={mode}")
        result.assert_outcomes(passed=1, errors=1)
        result.stdout.fnmatch_lines(["*shared.jsonl: this recording is already test_shared.py::test_agent[[]A latte, "
                                     "please.[]]'s in this session; two tests cannot share one*"])


# --- the marker --------------------------------------------------------------------------

MARKED = '''
import pytest
from cafe.counter.clients.canned import CannedClient


@pytest.fixture
def cafe_model_client():
    return CannedClient([{{"content": "hi"}}, {{"content": "again"}}])


@pytest.mark.cafe_recording({marker})
def test_marked(cafe_recording):
    cafe_recording.chat([{{"role": "user", "content": "hello"}}])
'''


@pytest.mark.parametrize(("marker", "says"), [
    ('path=""', "cafe_recording(path=...): needs a file path"),
    ('"  "', "cafe_recording(path=...): needs a file path"),
    ("path=7", "cafe_recording(path=...): needs a file path"),
    ("paht='x.jsonl'", "no option 'paht'; it takes path, ignore, allow_truncated, allow_hosts, record_offline"),
    # A flag is True or False: a string such as "no" must not switch it on.
    ("record_offline='no'", "cafe_recording(record_offline=...): expected True or False, found str"),
    ("record_offline=1", "cafe_recording(record_offline=...): expected True or False, found int"),
    ("allow_truncated='false'", "cafe_recording(allow_truncated=...): expected True or False, found str"),
])
def test_a_marker_option_that_cannot_be_used_is_refused(pytester: pytest.Pytester, marker, says):
    pytester.makepyfile(test_marked=MARKED.format(marker=marker))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*{says}*"])
    assert not (pytester.path / "recordings").exists()


@pytest.mark.parametrize("ignore", [["*"], [" * "], ["*.content"], ["*.*"], ["messages.*", "*"], ["messages.**"]])
def test_an_ignore_that_would_check_nothing_is_refused_saying_what_to_write(pytester: pytest.Pytester, ignore):
    pytester.makepyfile(test_marked=MARKED.format(marker=""))
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    pytester.makepyfile(test_marked=MARKED.format(marker=f"ignore={ignore!r}").replace('"hello"', '"changed"'))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*cafe: *ignore path*e.g. messages.*.sent_at or metadata.request_time*"])


def _first_lines(output: str) -> dict[str, str]:
    """Each failed or erred test's first line, by the test's name in its report's heading."""
    found, current = {}, None
    for line in output.splitlines():
        heading = re.fullmatch(r"_{3,} (?:ERROR at setup of )?(\S+) _{3,}", line)
        if heading is not None:
            current = heading.group(1)
        elif current is not None and current not in found and line.strip():
            found[current] = line
    return found


# Every option is checked for its type, whether the test records or replays, with the
# fixture or without it: one line naming the option, nothing recorded.
WRONG_TYPES = (
    ('ignore="metadata"',
     '@pytest.mark.cafe_recording(ignore=...): expected a list of field paths, found a string '
     '(write ignore=["metadata"])'),
    ("ignore=7", '@pytest.mark.cafe_recording(ignore=...): expected a list of field paths, found int '
                 '(e.g. ignore=["metadata.run_id"])'),
    ('ignore={"metadata": True}', "@pytest.mark.cafe_recording(ignore=...): expected a list of field paths, "
                                  'found dict (e.g. ignore=["metadata.run_id"])'),
    ('ignore=["metadata", 7]', "@pytest.mark.cafe_recording(ignore=...): expected a field path (a string), found int"),
    ('ignore=["*"]', "@pytest.mark.cafe_recording(ignore=...): ignore path '*': a top-level * matches every field"),
    ('allow_truncated="yes"', "@pytest.mark.cafe_recording(allow_truncated=...): expected True or False, found str"),
    ("record_offline=None", "@pytest.mark.cafe_recording(record_offline=...): expected True or False, found NoneType"),
    ('path=b"x.jsonl"', "@pytest.mark.cafe_recording(path=...): needs a file path (a string), found bytes"),
    ('path="x\\0.jsonl"', "@pytest.mark.cafe_recording(path=...): a file path cannot hold a NUL character"),
    ('allow_hosts="127.0.0.1"', 'allow_hosts: expected a list of host names or addresses, e.g. '
                                'allow_hosts=["127.0.0.1"]'),
)

WRONG_TYPES_HEADER = """
import pytest

from cafe.counter.clients.canned import CannedClient


@pytest.fixture
def cafe_model_client():
    return CannedClient([{"content": "hi"}])
"""

WRONG_TYPE_TESTS = """

@pytest.mark.cafe_recording({marker})
def test_fixture_{n}(cafe_recording):
    cafe_recording.chat([{{"role": "user", "content": "hello"}}])


@pytest.mark.cafe_recording({marker})
def test_marker_{n}():
    pass
"""


def _wrong_types_module(*, wrong: bool) -> str:
    return WRONG_TYPES_HEADER + "".join(WRONG_TYPE_TESTS.format(marker=marker if wrong else "", n=n)
                                        for n, (marker, _) in enumerate(WRONG_TYPES))


def _assert_each_refused_naming_its_option(result: pytest.RunResult) -> None:
    result.assert_outcomes(errors=2 * len(WRONG_TYPES))
    lines = _first_lines(result.stdout.str())
    assert len(lines) == 2 * len(WRONG_TYPES)
    for n, (marker, says) in enumerate(WRONG_TYPES):
        for test in (f"test_fixture_{n}", f"test_marker_{n}"):
            assert lines[test].startswith("cafe: ") and says in lines[test], (marker, lines[test])
    assert "Traceback" not in result.stdout.str() and "pytest_plugin.py" not in result.stdout.str()


def test_a_marker_option_of_a_wrong_type_is_one_named_line_when_recording_and_when_replaying(
        pytester: pytest.Pytester) -> None:
    recordings = pytester.path / "recordings"
    pytester.makepyfile(test_typed=_wrong_types_module(wrong=False))
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2 * len(WRONG_TYPES))
    recorded = {path: path.read_bytes() for path in recordings.rglob("*.jsonl")}
    assert len(recorded) == 2 * len(WRONG_TYPES)
    pytester.makepyfile(test_typed=_wrong_types_module(wrong=True))
    _assert_each_refused_naming_its_option(pytester.runpytest("-p", "no:cacheprovider"))  # replaying
    assert {path: path.read_bytes() for path in recordings.rglob("*.jsonl")} == recorded
    shutil.rmtree(recordings)
    _assert_each_refused_naming_its_option(pytester.runpytest("-p", "no:cacheprovider"))  # recording
    assert not recordings.exists() and not list(pytester.path.glob("x*"))


# A recording's directory that cannot be made (a file or a dangling link in the way, a name too
# long, a read-only directory) fails the test, with the fixture or without it, in one line that
# names the recording and why; what was in the way is left as it was.

UNMADE_DIRECTORY_MODULE = """
import pytest

from cafe.counter.clients.canned import CannedClient


@pytest.fixture
def cafe_model_client():
    return CannedClient([{{"content": "hi"}}])
{tests}"""

UNMADE_DIRECTORY_TESTS = {"fixture": """

@pytest.mark.cafe_recording({marker})
def test_{name}_fixture(cafe_recording):
    cafe_recording.chat([{{"role": "user", "content": "hello"}}])
""", "marker": """

@pytest.mark.cafe_recording({marker})
def test_{name}_marker():
    pass
"""}


def _unwritable(why: str) -> str:
    return f"cannot write the recording ({why})"


def test_a_recording_directory_that_cannot_be_made_is_one_line_naming_it_and_why(pytester: pytest.Pytester) -> None:
    here = pytester.path
    long_name = "n" * 300
    (here / "recordings").write_text("not a directory")
    (here / "blocked").write_text("not a directory either")
    (here / "dangling").symlink_to(here / "nowhere")
    in_the_way = "its directory cannot be made: {} is not a directory"
    cases: dict[str, tuple[str | None, str]] = {  # name: (path, None for the default; what the line says)
        "default": (None, _unwritable(in_the_way.format(here / "recordings"))),
        "blocked": ("blocked/sub/{kind}.jsonl", _unwritable(in_the_way.format(here / "blocked"))),
        "dangling": ("dangling/{kind}.jsonl", _unwritable(in_the_way.format(here / "dangling"))),
        "too_long": (long_name + "/{kind}.jsonl", "the recording's path cannot be examined (file name too long)"),
    }
    if os.geteuid() != 0:  # the superuser writes in a read-only directory
        (here / "read-only").mkdir(mode=0o555)
        cases["read_only"] = ("read-only/sub/{kind}.jsonl", _unwritable(
            f"its directory {here / 'read-only' / 'sub'} cannot be made (permission denied)"))
    tests = "".join(UNMADE_DIRECTORY_TESTS[kind].format(name=name, marker="" if path is None else repr(path.format(
        kind=kind))) for name, (path, _) in cases.items() for kind in UNMADE_DIRECTORY_TESTS)
    pytester.makepyfile(test_dirs=UNMADE_DIRECTORY_MODULE.format(tests=tests))
    for mode in ("once", "all"):
        if mode == "all":  # re-recording looks for no recording: it goes on to make the directory
            cases["too_long"] = (cases["too_long"][0], _unwritable(
                f"its directory {here / long_name} cannot be made (file name too long)"))
        result = pytester.runpytest("-p", "no:cacheprovider", f"--cafe-record-mode={mode}")
        result.assert_outcomes(errors=2 * len(cases))
        lines = _first_lines(result.stdout.str())
        for name, (path, says) in cases.items():
            for kind in UNMADE_DIRECTORY_TESTS:
                test = f"test_{name}_{kind}"
                recording = here / (f"recordings/test_dirs/{test}.jsonl" if path is None else path.format(kind=kind))
                assert lines[test] == f"cafe: {recording}: {says}", (mode, lines[test])
        assert "Traceback" not in result.stdout.str()
    assert (here / "recordings").read_text() == "not a directory" and not (here / "nowhere").exists()


# --- the network, while replaying ----------------------------------------------------------

NETWORK = '''
import socket

import pytest
from cafe.counter.clients.canned import CannedClient
from cafe.counter import ReplayClient
from cafe.recording import NetworkRefused

REACHED = []


@pytest.fixture(autouse=True)
def tripwire(monkeypatch):
    """Stands in for the real functions under the plugin's guard, so that nothing this test
    tries ever leaves the process: what gets through is only noted."""
    def stand_in(name):
        def reached(*args, **kwargs):
            REACHED.append(name)
            raise OSError(f"{{name}} reached the stand-in")
        return reached
    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr", "getnameinfo",
                 "create_connection"):
        monkeypatch.setattr(socket, name, stand_in(name))
    for name in ("connect", "connect_ex", "sendto", "sendmsg"):
        monkeypatch.setattr(socket.socket, name, stand_in(name))
    REACHED.clear()


@pytest.fixture
def cafe_model_client():
    return CannedClient([{{"content": "hi"}}])


ATTEMPTS = {{
    "getaddrinfo": lambda: socket.getaddrinfo("api.example.invalid", 443),
    "getaddrinfo loopback": lambda: socket.getaddrinfo("localhost", 443),
    "gethostbyname": lambda: socket.gethostbyname("api.example.invalid"),
    "gethostbyname bytes": lambda: socket.gethostbyname_ex(b"api.example.invalid"),
    "gethostbyname_ex": lambda: socket.gethostbyname_ex("api.example.invalid"),
    "gethostbyaddr": lambda: socket.gethostbyaddr("192.0.2.1"),
    "getnameinfo": lambda: socket.getnameinfo(("192.0.2.1", 443), 0),
    "create_connection": lambda: socket.create_connection(("api.example.invalid", 443), timeout=1),
    "create_connection loopback": lambda: socket.create_connection(("127.0.0.1", 9), timeout=1),
    "connect loopback": lambda: socket.socket().connect(("127.0.0.1", 9)),
    "connect_ex mapped loopback": lambda: socket.socket(socket.AF_INET6).connect_ex(("::ffff:127.0.0.1", 9, 0, 0)),
    "udp sendto": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", 9)),
    "udp sendto flags": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", 0, ("127.0.0.1", 9)),
    "udp sendmsg": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendmsg([b"x"], [], 0, ("127.0.0.1", 9)),
}}


@pytest.mark.cafe_recording({marker})
@pytest.mark.parametrize("attempt", sorted(ATTEMPTS))
def test_attempt(cafe_recording, attempt):
    cafe_recording.chat([{{"role": "user", "content": "hello"}}])
    if not isinstance(cafe_recording, ReplayClient):
        return
    try:
        ATTEMPTS[attempt]()
    except NetworkRefused as refused:
        print("REFUSED", attempt, "|", refused)
    except OSError:
        pass
    print("REACHED", attempt, REACHED)
'''


def _attempts(result: pytest.RunResult) -> tuple[dict[str, str], dict[str, str]]:
    refused, reached = {}, {}
    for line in result.stdout.lines:  # a line may start with pytest's progress dot
        if (found := re.search(r"REFUSED (.+?) \| (.*)$", line)) is not None:
            refused[found.group(1)] = found.group(2)
        elif (found := re.search(r"REACHED (.+?) \[(.+)\]$", line)) is not None:
            reached[found.group(1)] = found.group(2)
    return refused, reached


def test_while_replaying_every_way_out_is_refused_loopback_included(pytester: pytest.Pytester):
    pytester.makepyfile(test_network=NETWORK.format(marker="record_offline=False"))
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=14)
    result = pytester.runpytest("-p", "no:cacheprovider", "-s")
    result.assert_outcomes(passed=14)
    refused, reached = _attempts(result)
    assert reached == {}
    assert len(refused) == 14
    assert "a name lookup of api.example.invalid was attempted" in refused["gethostbyname"]
    assert "a datagram to 127.0.0.1:9 was attempted" in refused["udp sendto"]
    # Refused loopback names the marker option that allows it.
    assert 'allow_hosts=["127.0.0.1"]' in refused["connect loopback"]
    assert "allow_hosts" not in refused["gethostbyname"]


def test_loopback_is_allowed_when_the_test_names_it_and_nothing_else_is(pytester: pytest.Pytester):
    pytester.makepyfile(test_network=NETWORK.format(
        marker='allow_hosts=["localhost", "127.0.0.1", "::ffff:127.0.0.1"]'))
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=14)
    result = pytester.runpytest("-p", "no:cacheprovider", "-s")
    result.assert_outcomes(passed=14)
    refused, reached = _attempts(result)
    loopback = {"getaddrinfo loopback", "create_connection loopback", "connect loopback",
                "connect_ex mapped loopback", "udp sendto", "udp sendto flags", "udp sendmsg"}
    assert set(reached) == loopback
    assert set(refused) == set(_ATTEMPT_NAMES) - loopback


_ATTEMPT_NAMES = ("getaddrinfo", "getaddrinfo loopback", "gethostbyname", "gethostbyname bytes", "gethostbyname_ex",
                  "gethostbyaddr", "getnameinfo", "create_connection", "create_connection loopback",
                  "connect loopback", "connect_ex mapped loopback", "udp sendto", "udp sendto flags", "udp sendmsg")


# --- which model records -------------------------------------------------------------------

DEFAULT_CLIENT = '''
import pytest
from cafe.counter.consent import make_responder
from cafe.counter.loop import run_shift


@pytest.mark.cafe_recording({marker})
def test_shift(cafe_recording):
    run = run_shift(cafe_recording, ["A latte, please.", "Nothing else."], make_responder([]))
    assert run.stop_reason == "answered"
'''


@pytest.fixture
def no_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CAFE_MODE", "COURSE_MODE"):
        monkeypatch.delenv(name, raising=False)


def test_recording_without_a_chosen_model_fails_naming_remedies_that_work(pytester: pytest.Pytester, no_mode,
                                                                           monkeypatch: pytest.MonkeyPatch):
    recording = pytester.path / "recordings" / "test_shift" / "test_shift.jsonl"
    pytester.makepyfile(test_shift=DEFAULT_CLIENT.format(marker=""))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    [line] = [line for line in result.stdout.lines if line.startswith("cafe: ")]
    for remedy in ("CAFE_MODE=live", "CAFE_MODE=offline", "cafe_record_offline = true",
                   "@pytest.mark.cafe_recording(record_offline=True)", "override the cafe_model_client fixture"):
        assert remedy in line
    assert not recording.exists()

    # Each remedy, as the line writes it, records (and the recording then replays).
    monkeypatch.setenv("CAFE_MODE", "offline")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert recording.exists()
    monkeypatch.delenv("CAFE_MODE")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)  # replays: needs no model
    recording.unlink()

    pytester.makeini("[pytest]\ncafe_record_offline = true\n")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert recording.exists()
    recording.unlink()
    pytester.makeini("[pytest]\n")

    pytester.makepyfile(test_shift=DEFAULT_CLIENT.format(marker="record_offline=True"))
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert recording.exists()
    recording.unlink()

    pytester.makeconftest("""
        import pytest
        from cafe.counter.clients.scripted import ScriptedClient

        @pytest.fixture
        def cafe_model_client():
            return ScriptedClient()
    """)
    pytester.makepyfile(test_shift=DEFAULT_CLIENT.format(marker=""))
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert recording.exists()


@pytest.mark.parametrize(("variable", "value"), [("COURSE_MODE", "true"), ("CAFE_MODE", "on")])
def test_recording_with_an_unknown_mode_fails_in_one_line(pytester: pytest.Pytester, no_mode,
                                                         monkeypatch: pytest.MonkeyPatch, variable, value):
    monkeypatch.setenv(variable, value)
    pytester.makepyfile(test_shift=DEFAULT_CLIENT.format(marker=""))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"cafe: {variable}: expected live or offline*"])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize(("ini", "says"), [
    ("cafe_record_offline = maybe", "cafe_record_offline: expected true or false"),
    ("cafe_record_offline =", "cafe_record_offline: expected true or false"),
    ("cafe_record_mode = sometimes", "cafe_record_mode: unknown record mode 'sometimes'; use one of once, all, none"),
])
def test_a_setting_of_the_plugin_that_cannot_be_used_is_one_usage_line(pytester: pytest.Pytester, no_mode,
                                                                        ini: str, says: str):
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(test_shift=DEFAULT_CLIENT.format(marker=""))
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert errors == [f"ERROR: {says}" + errors[0][len(says) + 7:]] and len(errors) == 1, errors
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "recordings").exists()


# --- no traceback --------------------------------------------------------------------------
# The plugin never lets a traceback carry the recorded conversation: whatever goes wrong in
# cafe's code during a recording test (a page that cannot be drawn, an error raised through
# the harness), the test fails with one line, even under `--showlocals`, and that line holds
# no customer text and no secret.

CUSTOMER = "Priya-at-table-nine wants a flat white"
SECRET = "sk-proj-" + "Tb7Wq2Lm9Xc4Vn8Rz1Ks5Dp3"

KEYED_MODULE = '''
from cafe.counter.clients.canned import CannedClient
import pytest

VALUE = {value!r}


@pytest.fixture
def cafe_model_client():
    return CannedClient([{{"content": "Coming up."}}])


def test_order(cafe_recording):
    note = {{"table[9]": VALUE, "said": {customer!r}}}
    messages = [{{"role": "user", "content": {customer!r}, "metadata": note}}]
    cafe_recording.chat(messages)
'''

THROUGH_MODULE = '''
import pytest

from cafe.counter.clients.canned import CannedClient

SAID = {said!r}


class ClosedTill:
    model, provider = "m", "test"

    def chat(self, messages, tools=None, temperature=0.0, tool_choice=None):
        raise RuntimeError("the till is closed")


@pytest.fixture
def cafe_model_client():
    return {client}


def test_order(cafe_recording):
    messages = [{{"role": "user", "content": SAID}}]
    cafe_recording.chat(messages{extra})
'''


def _assert_nothing_recorded(output: str) -> None:
    assert CUSTOMER not in output and "Priya" not in output
    assert SECRET not in output and SECRET[8:] not in output


def _assert_one_clean_line(output: str) -> None:
    _assert_nothing_recorded(output)
    assert "Traceback" not in output and "def " not in output  # no frame is rendered


BROKEN_PAGE = """
import pytest

import cafe.view


@pytest.fixture(autouse=True)
def broken_page(monkeypatch):
    # Stands for a page the recorded conversation makes impossible to draw: a recorded key that
    # trips the page's highlight, say. The error carries what the recording holds.
    def broken(recording, failed):
        request = recording.calls[0].request
        raise ValueError(f"cannot draw {request}")

    monkeypatch.setattr(cafe.view, "mismatch_page", broken)
"""


def _failed_replay_with_a_report(pytester: pytest.Pytester, broken: bool, *flags: str) -> str:
    """What pytest prints for a replay that fails on a recorded key holding `[` (whose path the
    page highlights), with a report directory; `broken`: the page cannot be drawn."""
    pytester.makepyfile(test_orders=KEYED_MODULE.format(value="first", customer=CUSTOMER))
    pytester.runpytest().assert_outcomes(passed=1)
    pytester.makepyfile(test_orders=KEYED_MODULE.format(value="second", customer=CUSTOMER))
    if broken:
        pytester.makeconftest(BROKEN_PAGE)
    reports = pytester.path / "reports"
    reports.mkdir()
    result = pytester.runpytest(*flags, f"--cafe-report-dir={reports}")
    result.assert_outcomes(failed=1)
    return result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("broken", [False, True], ids=["keyed", "broken page"])
@pytest.mark.parametrize("flag", ["-l", "--showlocals", "--tb=long"])
def test_a_failed_replay_with_a_report_fails_the_test_in_one_line(pytester: pytest.Pytester, flag: str,
                                                                  broken: bool) -> None:
    output = _failed_replay_with_a_report(pytester, broken, flag)
    _assert_one_clean_line(output)
    assert "cafe: " in output and "call 1" in output
    assert ("no report: the page could not be drawn (ValueError)" in output) is broken


@pytest.mark.parametrize("broken", [False, True], ids=["keyed", "broken page"])
def test_a_full_trace_of_a_failed_replay_shows_pytests_frames_and_nothing_recorded(pytester: pytest.Pytester,
                                                                                  broken: bool) -> None:
    # --full-trace asks pytest for its own frames too: they are shown, with their locals, and
    # none of them holds what the recording holds.
    output = _failed_replay_with_a_report(pytester, broken, "--full-trace", "--showlocals")
    _assert_nothing_recorded(output)
    assert "cafe: " in output and "call 1" in output


def test_an_error_raised_through_cafes_code_while_recording_fails_the_test_in_one_line(
        pytester: pytest.Pytester) -> None:
    # The model client raises inside the recording client, whose frames hold the conversation.
    pytester.makepyfile(test_orders=THROUGH_MODULE.format(said=f"{CUSTOMER} {SECRET}", client="ClosedTill()",
                                                          extra=""))
    result = pytester.runpytest("--showlocals")
    result.assert_outcomes(failed=1)
    output = result.stdout.str() + result.stderr.str()
    _assert_one_clean_line(output)
    assert "RuntimeError" in output


def test_a_named_error_raised_while_replaying_fails_the_test_in_one_line(pytester: pytest.Pytester) -> None:
    # A request holding a value JSON has no form for: the replay's NotJSON, from deep in its frames.
    canned = 'CannedClient([{"content": "Coming up."}])'
    said = f"{CUSTOMER} {SECRET}"
    pytester.makepyfile(test_orders=THROUGH_MODULE.format(said=said, client=canned, extra=""))
    pytester.runpytest().assert_outcomes(passed=1)
    pytester.makepyfile(test_orders=THROUGH_MODULE.format(said=said, client=canned,
                                                          extra=', tools=[{"type": "function", "x": {1, 2}}]'))
    result = pytester.runpytest("-l", "--cafe-record-mode=none")
    result.assert_outcomes(failed=1)
    output = result.stdout.str() + result.stderr.str()
    _assert_one_clean_line(output)
    assert "cafe: " in output


# A replay's refusal that the test's own code wraps, or that comes out of a task group, is
# still the line the test fails with.
WRAPPED_MODULE = """
import asyncio

import pytest

from cafe.counter.clients.canned import CannedClient

SAID = {said!r}


@pytest.fixture
def cafe_model_client():
    return CannedClient([{{"content": "Coming up."}}, {{"content": "Coming up too."}}])


class OrderFailed(Exception):
    pass


def order(client):
    try:
        return client.chat([{{"role": "user", "content": SAID}}])
    except Exception as error:
        raise OrderFailed("the order failed") from error


def test_wrapped(cafe_recording):
    order(cafe_recording)


def test_in_a_task_group(cafe_recording):
    async def orders():
        async def one():
            return order(cafe_recording)
        async with asyncio.TaskGroup() as group:
            group.create_task(one())
    asyncio.run(orders())
"""


def test_a_replay_refusal_the_tests_code_wraps_is_the_line_the_test_fails_with(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_orders=WRAPPED_MODULE.format(said=CUSTOMER))
    pytester.runpytest().assert_outcomes(passed=2)
    pytester.makepyfile(test_orders=WRAPPED_MODULE.format(said=CUSTOMER + " Twice."))
    result = pytester.runpytest("--showlocals")
    result.assert_outcomes(failed=2)
    output = result.stdout.str() + result.stderr.str()
    lines = _first_lines(result.stdout.str())
    for test in ("test_wrapped", "test_in_a_task_group"):
        mismatch = rf"cafe: \S+/{test}\.jsonl: call 1: the request differs from the recording at "
        assert re.fullmatch(mismatch + r"\$\.messages\[0\]\.content: recorded text\(.+\), incoming text\(.+\)",
                            lines[test]), lines[test]
    assert "raised through cafe's code" not in output
    _assert_one_clean_line(output)


# --- a truncated recording -----------------------------------------------------------------
# On a recording whose last line was cut short, the plugin's failure names the marker option
# a test uses, not the command line's --allow-truncated, and the marker works.

TRUNCATED_MODULE = """
import pytest

from cafe.counter.clients.canned import CannedClient


@pytest.fixture
def cafe_model_client():
    return CannedClient([{{"content": "one"}}, {{"content": "two"}}])


{marker}
def test_order(cafe_recording):
    cafe_recording.chat([{{"role": "user", "content": "hello"}}])
"""


def test_a_truncated_recording_fails_naming_the_marker_then_replays_with_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_orders=TRUNCATED_MODULE.format(marker=""))
    pytester.runpytest().assert_outcomes(passed=1)
    recording = pytester.path / "recordings" / "test_orders" / "test_order.jsonl"
    with recording.open("a", encoding="utf-8") as out:
        out.write('{"kind": "call", "cut sho')  # a crash mid-write

    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    output = result.stdout.str()
    assert "mark the test @pytest.mark.cafe_recording(allow_truncated=True)" in output
    assert "1 complete call(s)" in output
    assert "--allow-truncated" not in output

    pytester.makepyfile(test_orders=TRUNCATED_MODULE.format(marker="@pytest.mark.cafe_recording(allow_truncated=True)"))
    pytester.runpytest().assert_outcomes(passed=1)


# --- where the report pages go -------------------------------------------------------------

CHDIR_MODULE = '''
import pytest
from cafe.counter.clients.canned import CannedClient

LINE = {line!r}


@pytest.fixture
def cafe_model_client():
    return CannedClient([{{"content": "Coming up."}}])


def test_order(cafe_recording, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the test's own working directory is no place for the pages
    cafe_recording.chat([{{"role": "user", "content": LINE}}])
'''


def test_a_relative_report_dir_is_where_pytest_was_started_whatever_the_test_does(pytester: pytest.Pytester):
    pytester.makepyfile(test_orders=CHDIR_MODULE.format(line="A latte, please."))
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    pytester.makepyfile(test_orders=CHDIR_MODULE.format(line="A mocha, please."))
    result = pytester.runpytest("-p", "no:cacheprovider", "--cafe-report-dir=reports",
                                f"--basetemp={pytester.path / 'temporary'}")
    result.assert_outcomes(failed=1)
    named = Path(re.search(r"\(report: (\S+)\)", result.stdout.str()).group(1))
    reports = pytester.path / "reports"
    assert named.is_absolute() and named.parent == reports
    assert [p.name for p in reports.iterdir()] == ["test_orders.test_order.html"]
    assert list((pytester.path / "temporary").rglob("*.html")) == []


@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_report_dir_is_one_usage_line(pytester: pytest.Pytester, value: str):
    pytester.makepyfile(test_orders=CHDIR_MODULE.format(line="A latte, please."))
    result = pytester.runpytest("-p", "no:cacheprovider", f"--cafe-report-dir={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --cafe-report-dir: needs a directory (an empty one names none)*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
