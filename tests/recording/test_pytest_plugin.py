"""Acceptance: the pytest plugin records, then replays with sockets refused, then fails a
test that makes one call fewer, naming the unused call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

TEST_MODULE = '''
import socket

import pytest

from cafe.clients.canned import CannedClient
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
        from cafe.clients.canned import CannedClient
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
        from cafe.clients.canned import CannedClient

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
        from cafe.consent import make_responder
        from cafe.loop import run_shift

        def test_shift(cafe_recording):
            run = run_shift(cafe_recording, ["A latte, please.", "Nothing else."],
                            make_responder([("approve", None)]))
            assert run.stop_reason == "answered"
    """)
    pytester.runpytest().assert_outcomes(passed=1)
    pytester.runpytest("--cafe-record-mode=none").assert_outcomes(passed=1)
