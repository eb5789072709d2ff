"""Acceptance: a user's test module that builds its own `openai` clients (sync, streamed,
`asyncio.gather` of three), marked `@pytest.mark.cafe_recording`, is recorded against a
local OpenAI-compatible server once, and with the server stopped replays with zero requests
and identical results; changed, dropped and added calls fail naming what changed."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from tests.local_http import QuietHandler, serving
from tests.wire.anthropic_server import AnthropicServer
from tests.wire.openai_server import OpenAIServer

pytest_plugins = ["pytester"]

KEY = "sk-test-acceptance-0123456789abcdef"

USER_MODULE = '''
import asyncio
import json
import os

import openai
import pytest

BASE_URL = os.environ["AGENT_BASE_URL"]
OUT = os.environ["AGENT_RESULTS"]
MAX_TOKENS = {max_tokens}
CALLS = {calls}


def note(name, value):
    with open(OUT, "a") as out:
        out.write(json.dumps([name, value]) + "\\n")


@pytest.mark.cafe_recording
def test_agent():
    client = openai.OpenAI(base_url=BASE_URL, api_key=os.environ["AGENT_KEY"], max_retries=0)
    reply = client.chat.completions.create(model="m", max_tokens=MAX_TOKENS,
                                           messages=[{{"role": "user", "content": "A latte, please."}}])
    note("plain", reply.model_dump())
    if CALLS >= 2:
        stream = client.chat.completions.create(model="m", stream=True, stream_options={{"include_usage": True}},
                                                messages=[{{"role": "user", "content": "And a croissant."}}])
        note("stream", [chunk.model_dump() for chunk in stream])
    for extra in range(CALLS - 2):
        client.chat.completions.create(model="m", messages=[{{"role": "user", "content": f"extra {{extra}}"}}])


@pytest.mark.cafe_recording
def test_gather():
    async def three():
        client = openai.AsyncOpenAI(base_url=BASE_URL, api_key=os.environ["AGENT_KEY"], max_retries=0)
        replies = await asyncio.gather(*(client.chat.completions.create(
            model="m", messages=[{{"role": "user", "content": f"table {{n}}"}}]) for n in range(3)))
        await client.close()
        return [r.model_dump() for r in replies]
    note("gather", asyncio.run(three()))
'''


def _module(pytester: pytest.Pytester, *, max_tokens: int = 5, calls: int = 2) -> None:
    pytester.makepyfile(test_user_agent=USER_MODULE.format(max_tokens=max_tokens, calls=calls))


def _results(path: Path) -> list[object]:
    found = [json.loads(line) for line in path.read_text().splitlines()]
    path.unlink()
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def recorded(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[object]]:
    results = tmp_path / "results.jsonl"
    monkeypatch.setenv("AGENT_RESULTS", str(results))
    monkeypatch.setenv("AGENT_KEY", KEY)
    _module(pytester)
    with OpenAIServer.running() as server:
        monkeypatch.setenv("AGENT_BASE_URL", server.base_url)
        pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)
        assert server.count == 5
        # The replay runs against the same URL, its server stopped.
        stopped_url = server.base_url
    monkeypatch.setenv("AGENT_BASE_URL", stopped_url)
    return results, _results(results)


def test_recorded_once_then_replayed_with_no_server_and_identical_results(
        pytester: pytest.Pytester, recorded: tuple[Path, list[object]]) -> None:
    results, live = recorded
    recordings = sorted((pytester.path / "recordings" / "test_user_agent").glob("*.jsonl"))
    assert [p.name for p in recordings] == ["test_agent.jsonl", "test_gather.jsonl"]
    assert all(KEY not in p.read_text() for p in recordings)
    with OpenAIServer.running() as bystander:
        # A server that would answer is there, on another port: it hears nothing.
        pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)
        assert bystander.count == 0
    assert _results(results) == live
    streamed = next(value for name, value in live if name == "stream")  # type: ignore[misc]
    assert len(streamed) > 3


def test_a_changed_max_tokens_fails_naming_it(pytester: pytest.Pytester, recorded: tuple[Path, list[object]]) -> None:
    _module(pytester, max_tokens=6)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*cafe: *test_agent.jsonl: call 1: the request differs from the recording "
                                 "at $.max_tokens: recorded 5, incoming 6*"])
    assert KEY not in result.stdout.str() + result.stderr.str()


def test_a_dropped_call_fails_naming_the_unused_call(pytester: pytest.Pytester,
                                                    recorded: tuple[Path, list[object]]) -> None:
    _module(pytester, calls=1)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_agent.jsonl: 1 recorded call(s) were never made, from call 2 "
                                 "(line 3: POST /v1/chat/completions, 1 message(s), the last from user)*"])
    assert KEY not in result.stdout.str()


def test_an_added_call_fails_at_once(pytester: pytest.Pytester, recorded: tuple[Path, list[object]]) -> None:
    _module(pytester, calls=3)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_agent.jsonl: call 3 was made, but the recording holds only 2*"])
    assert KEY not in result.stdout.str()


def test_record_mode_none_without_a_recording_fails_saying_so(pytester: pytest.Pytester,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_BASE_URL", f"http://127.0.0.1:{_free_port()}/v1")
    monkeypatch.setenv("AGENT_RESULTS", str(pytester.path / "r.jsonl"))
    monkeypatch.setenv("AGENT_KEY", KEY)
    _module(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider", "--cafe-record-mode=none")
    result.assert_outcomes(errors=2)  # as with the fixture: the setup refuses
    result.stdout.fnmatch_lines(["*no recording, and record mode 'none' forbids making one*"])


# --- a refusal wrapped by a library, or caught by the test ---------------------------------
# The Anthropic SDK wraps every error of its transport in its APIConnectionError; a retry
# wrapper holds the last error without chaining it; the test's code may catch what it got and
# fail, skip or exit its own way. Whichever, a replay's refusal is the line pytest reports.

WRAPPING_MODULE = '''
import asyncio
import os
import sys

import anthropic
import openai
import pytest

MAX_TOKENS = int(os.environ["AGENT_MAX_TOKENS"])
ORDER = [{"role": "user", "content": "A latte, please."}]


def ask_openai():
    client = openai.OpenAI(base_url=os.environ["AGENT_BASE_URL"], api_key=os.environ["AGENT_KEY"], max_retries=0)
    return client.chat.completions.create(model="m", max_tokens=MAX_TOKENS, messages=ORDER)


def anthropic_client(kind=anthropic.Anthropic):
    return kind(base_url=os.environ["AGENT_ANTHROPIC_URL"], api_key=os.environ["AGENT_KEY"], max_retries=2)


class GaveUp(Exception):
    """What a retry wrapper raises after its last attempt: the attempt's error held, not chained."""


def with_retries(call, attempts=3):
    failures = []
    for _ in range(attempts):
        try:
            return call()
        except Exception as error:
            failures.append(error)
    raise GaveUp(f"{attempts} attempts failed", failures)


@pytest.mark.cafe_recording
def test_anthropic_message():
    reply = anthropic_client().messages.create(model="claude-test", max_tokens=MAX_TOKENS, messages=ORDER)
    assert reply.content[0].text.startswith("Sure")


@pytest.mark.cafe_recording
def test_anthropic_stream():
    with anthropic_client().messages.stream(model="claude-test", max_tokens=MAX_TOKENS, messages=ORDER) as stream:
        assert "".join(stream.text_stream).startswith("Sure")


@pytest.mark.cafe_recording
def test_anthropic_in_a_task_group():
    async def order():
        async with anthropic_client(anthropic.AsyncAnthropic) as client, asyncio.TaskGroup() as group:
            asked = group.create_task(client.messages.create(model="claude-test", max_tokens=MAX_TOKENS,
                                                             messages=ORDER))
        return asked.result()
    assert asyncio.run(order()).content


@pytest.mark.cafe_recording
def test_given_up_by_a_retry_wrapper():
    assert with_retries(ask_openai).choices


@pytest.mark.cafe_recording
def test_wrapped_from_none():
    try:
        ask_openai()
    except Exception:
        raise RuntimeError("the agent could not take the order") from None


@pytest.mark.cafe_recording
def test_caught_then_failed():
    try:
        ask_openai()
    except Exception:
        pytest.fail("the model could not be reached")


@pytest.mark.cafe_recording
def test_caught_then_skipped():
    try:
        ask_openai()
    except Exception:
        pytest.skip("no model today")


@pytest.mark.cafe_recording
def test_caught_then_exited():
    try:
        ask_openai()
    except Exception:
        sys.exit(3)


@pytest.mark.cafe_recording
def test_caught_then_passed():
    try:
        ask_openai()
    except Exception:
        pass
'''

WRAPPING_TESTS = ("test_anthropic_message", "test_anthropic_stream", "test_anthropic_in_a_task_group",
                  "test_given_up_by_a_retry_wrapper", "test_wrapped_from_none", "test_caught_then_failed",
                  "test_caught_then_skipped", "test_caught_then_exited", "test_caught_then_passed")


def _reported(output: str) -> dict[str, str]:
    """Each failed test's first line, by the test's name in its report's heading."""
    found, current = {}, None
    for line in output.splitlines():
        heading = re.fullmatch(r"_{3,} (\S+) _{3,}", line)
        if heading is not None:
            current = heading.group(1)
        elif current is not None and current not in found and line.strip():
            found[current] = line
    return found


def test_a_refusal_a_library_wraps_or_the_test_catches_is_the_line_pytest_reports(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("anthropic", reason="the Anthropic SDK (on httpx2) is not installed beside this openai")
    pytester.makepyfile(test_wrapping=WRAPPING_MODULE)
    monkeypatch.setenv("AGENT_KEY", KEY)
    monkeypatch.setenv("AGENT_MAX_TOKENS", "5")
    with OpenAIServer.running() as openai_server, AnthropicServer.running() as anthropic_server:
        monkeypatch.setenv("AGENT_BASE_URL", openai_server.base_url)
        monkeypatch.setenv("AGENT_ANTHROPIC_URL", anthropic_server.base_url)
        pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=len(WRAPPING_TESTS))
        assert (openai_server.count, anthropic_server.count) == (6, 3)
    # Replayed with the servers stopped: unchanged, every test passes.
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=len(WRAPPING_TESTS))
    monkeypatch.setenv("AGENT_MAX_TOKENS", "6")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=len(WRAPPING_TESTS))
    output = result.stdout.str() + result.stderr.str()
    reported = _reported(result.stdout.str())
    assert set(reported) == set(WRAPPING_TESTS)
    for test, line in reported.items():
        assert re.fullmatch(rf"cafe: \S+/{test}\.jsonl: call 1: the request differs from the recording at "
                            r"\$\.max_tokens: recorded 5, incoming 6", line), (test, line)
    assert "raised through cafe's code" not in output
    assert KEY not in output


CHILD_MODULE = '''
import os
import subprocess
import sys

import openai
import pytest

CHILD = """
import os, openai
client = openai.OpenAI(base_url=os.environ["AGENT_BASE_URL"], api_key="sk-test-child-0123456789", max_retries=0)
client.chat.completions.create(model="m", messages=[{"role": "user", "content": "from the child"}])
"""


@pytest.mark.cafe_recording
def test_a_child_asks():
    client = openai.OpenAI(base_url=os.environ["AGENT_BASE_URL"], api_key="sk-test-parent-0123456789", max_retries=0)
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "from the parent"}])
    subprocess.run([sys.executable, "-c", CHILD], check=False)
'''


def test_a_python_the_marked_test_starts_has_its_calls_refused_and_the_test_fails_saying_so(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_child=CHILD_MODULE)
    recording = pytester.path / "recordings" / "test_child" / "test_a_child_asks.jsonl"
    with OpenAIServer.running() as server:
        monkeypatch.setenv("AGENT_BASE_URL", server.base_url)
        recorded = pytester.runpytest_subprocess("-p", "no:cacheprovider")
        # Only the test's own process records: the child's call never left, and the run kept nothing.
        assert [received.body["messages"][0]["content"] for received in server.received
                if received.body] == ["from the parent"]
        assert "cafe: " in recorded.stdout.str() and "process" in recorded.stdout.str()
        assert recorded.ret != 0 and not recording.exists()


NEITHER_MODULE = '''
import os
import urllib.request

import pytest


@pytest.mark.cafe_recording
def test_by_hand():
    with urllib.request.urlopen(os.environ["AGENT_BASE_URL"] + "/models", timeout=30) as answer:
        answer.read()
'''


class _Answers(QuietHandler):
    def do_GET(self) -> None:
        self.answer(200, b"[]", "application/json")


def test_a_marked_test_that_calls_through_neither_library_is_told_so_in_one_line(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_neither=NEITHER_MODULE)
    with serving(_Answers) as port:
        monkeypatch.setenv("AGENT_BASE_URL", f"http://127.0.0.1:{port}")
        # langsmith's pytest plugin (installed with langchain) imports httpx2 in every session.
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:langsmith_plugin")
    result.assert_outcomes(passed=1, errors=1)  # the test ran; the marker refuses to record nothing
    reports = [line for line in result.stdout.lines if line.startswith("cafe: ")]
    assert reports == [f"cafe: {pytester.path / 'recordings' / 'test_neither' / 'test_by_hand.jsonl'}: nothing to "
                       "record: no call went through httpx or httpx2 (the test imported neither: cafe records the "
                       "model calls made through them)"]
    assert not (pytester.path / "recordings" / "test_neither" / "test_by_hand.jsonl").exists()
UNMARKED_MODULE = '''
import importlib.util

import pytest

# A library the marked parameter could call through (whichever is installed): it records no call.
for _library in ("httpx2", "httpx"):
    if importlib.util.find_spec(_library) is not None:
        __import__(_library)


def _cafe_hooks(config, name):
    return [impl for impl in getattr(config.hook, name).get_hookimpls()
            if getattr(impl.plugin, "__name__", "").startswith("cafe")]


def test_plain(request):
    assert not [name for name in request.fixturenames if "cafe" in name]
    assert "runtest" not in vars(request.node)
    assert not _cafe_hooks(request.config, "pytest_runtest_call")
    assert not _cafe_hooks(request.config, "pytest_runtest_setup")


@pytest.mark.parametrize("n", [1, pytest.param(2, marks=pytest.mark.cafe_recording(path="two.jsonl"))])
def test_one_marked_parameter(request, n):
    wired = "_cafe_wire_recording" in request.fixturenames
    assert wired == (n == 2)
    assert ("runtest" in vars(request.node)) == (n == 2)
'''


def test_a_test_that_uses_neither_the_marker_nor_a_fixture_gets_no_fixture_wrapper_or_hook_of_the_plugins(
        pytester: pytest.Pytester) -> None:
    # Every test of a session where cafe is installed runs beside the plugins: only the marked
    # one (here one parameter of a parametrized test, whose siblings share its fixture list)
    # gets the wire recording's fixture and the wrapper of its body.
    pytester.makepyfile(test_unmarked=UNMARKED_MODULE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    assert (pytester.path / "two.jsonl").exists()  # the marked parameter was recorded (no calls)
