"""The pages show recordings scrubbed as the recorder and `cafe export` scrub them: a plain file
cafe did not write (another harness's `{request, response}` lines) may hold a key, and
neither `cafe view` nor `cafe replay --report` puts it on the page."""

from __future__ import annotations

import html
import io
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cafe import Tracer
from cafe.cli import main
from cafe.counter import ReplayClient, make_responder, record_shift
from cafe.counter.cli import plugin as COUNTER
from cafe.counter.clients.scripted import ScriptedClient
from cafe.counter.demo import DEFAULT_DECISIONS, DEFAULT_SCRIPT
from cafe.privacy import REDACTED, Scrubber
from cafe.recording import ReplayMismatch, load_recording
from cafe.view import scrubbed, shift_page, timeline, words_for, write_mismatch_report

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "tests" / "recordings" / "seed-shift.jsonl"
OPENAI_KEY = "sk-proj-Zq81ViewCanary0123456789"
BEARER = "eyJhbGciOiJIUzI1NiJ9.view-canary-token"
FIELD_SECRET = "field-canary-9f8e7d6c"  # no shape of its own: secret by the key that holds it
CUSTOM = "ACME-731946"  # matched only by CAFE_SCRUB_PATTERNS
CUSTOM_PATTERN = r"ACME-[0-9]{6}"


def _third_party_lines(user: str, reply: str, arguments: dict[str, Any], model: str = "their-model") -> str:
    """Two calls as another harness writes them: a tool call, its answer, a closing line."""
    first_request = {"model": model, "messages": [{"role": "user", "content": user}]}
    tool_call = {"id": "call_1", "type": "function",
                 "function": {"name": "price_check", "arguments": json.dumps(arguments)}}
    first_reply = {"role": "assistant", "content": None, "tool_calls": [tool_call]}
    second_request = {"model": model, "messages": [*first_request["messages"], first_reply,
                                                   {"role": "tool", "tool_call_id": "call_1",
                                                    "content": json.dumps({"price_eur": 1.6, **arguments})}]}

    def response(message: dict[str, Any], reason: str) -> dict[str, Any]:
        return {"model": model, "choices": [{"index": 0, "message": message, "finish_reason": reason}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}}

    lines = [{"request": first_request, "response": response(first_reply, "tool_calls")},
             {"request": second_request, "response": response({"role": "assistant", "content": reply}, "stop")}]
    return "".join(json.dumps(line) + "\n" for line in lines)


def _keyed_file(path: Path) -> Path:
    path.write_text(_third_party_lines(
        user=f"my key is {OPENAI_KEY}, code {CUSTOM}",
        reply=f"Use Authorization: Bearer {BEARER} next time.",
        arguments={"item": "latte", "api_key": FIELD_SECRET},
    ))
    return path


def _run(argv: list[str], environ: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, environ=environ, out=out, err=err, load_plugins=lambda warn: [COUNTER])
    return code, out.getvalue(), err.getvalue()


def test_a_third_party_recording_holding_keys_is_shown_scrubbed(tmp_path: Path) -> None:
    recording = _keyed_file(tmp_path / "theirs.jsonl")
    page = tmp_path / "theirs.html"
    code, _, err = _run(["view", str(recording), "-o", str(page)], {"CAFE_SCRUB_PATTERNS": CUSTOM_PATTERN})
    assert code == 0, err
    text = page.read_text()
    for secret in (OPENAI_KEY, OPENAI_KEY[3:], BEARER, FIELD_SECRET, CUSTOM):
        assert secret not in text
    assert text.count(REDACTED) >= 5  # the key, the token, the field (arguments and result), the pattern
    assert "my key is [REDACTED], code [REDACTED]" in text
    assert "latte" in text and "their-model" in text  # what is not a secret is still shown
    assert recording.read_text() == _keyed_file(tmp_path / "again.jsonl").read_text()  # the file is left alone


def test_without_the_pattern_in_the_environment_handed_in_its_text_is_shown(tmp_path: Path) -> None:
    recording = _keyed_file(tmp_path / "theirs.jsonl")
    page = tmp_path / "theirs.html"
    assert _run(["view", str(recording), "-o", str(page)], {})[0] == 0
    text = page.read_text()
    assert CUSTOM in text and OPENAI_KEY not in text


def test_a_bad_scrub_pattern_stops_the_page_before_it_is_written(tmp_path: Path) -> None:
    recording = _keyed_file(tmp_path / "theirs.jsonl")
    page = tmp_path / "theirs.html"
    code, out, err = _run(["view", str(recording), "-o", str(page)], {"CAFE_SCRUB_PATTERNS": "a|"})
    assert code == 30 and out == "" and err.count("\n") == 1, err
    assert "matches an empty text" in err and not page.exists()


def test_an_ordinary_cafe_recording_gives_the_same_page_as_before(tmp_path: Path) -> None:
    ours = tmp_path / "ours.jsonl"
    record_shift(ScriptedClient(), list(DEFAULT_SCRIPT), ours, responder=make_responder(DEFAULT_DECISIONS),
                 tracer=Tracer(), decisions=list(DEFAULT_DECISIONS))
    for recording in (ours, SEED):
        page = tmp_path / f"{recording.stem}.html"
        assert _run(["view", str(recording), "-o", str(page)], {})[0] == 0
        loaded = load_recording(recording)
        unscrubbed = shift_page(timeline(loaded, words_for(loaded)), source=str(recording))
        assert page.read_text() == unscrubbed


def test_scrubbing_a_cafe_recording_gives_back_equal_calls() -> None:
    recording = load_recording(SEED)
    again = scrubbed(recording, Scrubber.from_environment({}))
    assert again.header == recording.header and again.ending == recording.ending
    assert [(c.request, c.response, c.model) for c in again.calls] == \
        [(c.request, c.response, c.model) for c in recording.calls]


def test_the_mismatch_page_shows_the_recorded_side_scrubbed(tmp_path: Path) -> None:
    recording = _keyed_file(tmp_path / "theirs.jsonl")
    report = tmp_path / "mismatch.html"
    code, out, err = _run(["replay", str(recording), "--report", str(report)],
                          {"CAFE_SCRUB_PATTERNS": CUSTOM_PATTERN})
    assert code == 41 and report.exists(), err  # the café's prompt is not their first request
    text = report.read_text()
    for secret in (OPENAI_KEY, BEARER, FIELD_SECRET, CUSTOM):
        assert secret not in text + out + err
    assert "my key is [REDACTED], code [REDACTED]" in text


_KEYS = st.from_regex(r"sk-[A-Za-z0-9_\-]{12,40}", fullmatch=True)
_WHERE = st.sampled_from(["user", "reply", "argument", "model"])


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=_KEYS, where=_WHERE, around=st.sampled_from(["{}", "key {} here", "({})", "{}."]))
def test_no_key_shaped_value_anywhere_reaches_the_page(tmp_path: Path, key: str, where: str, around: str) -> None:
    placed = around.format(key)
    lines = _third_party_lines(
        user=placed if where == "user" else "A latte, please.",
        reply=placed if where == "reply" else "Done.",
        arguments={"item": placed if where == "argument" else "latte"},
        model=placed if where == "model" else "their-model",
    )
    recording = tmp_path / f"{uuid.uuid4().hex}.jsonl"
    recording.write_text(lines)
    page = shift_page(timeline(scrubbed(load_recording(recording), Scrubber.from_environment({}))),
                      source="theirs.jsonl")
    assert key not in page and key[3:] not in page and REDACTED in page


# A page shows object keys and the recording's file name, and a recording's scrubbing leaves
# both alone (keys are structure; the name is not in the file), so each page scrubs them
# itself: a key another harness wrote as an object key (a content part's, a usage entry's), a
# secret-bearing file name, and a protocol value the mismatch line quotes from an unscrubbed
# recorded side.

KEY = "sk-proj-Kq72PageKeyCanary0123"


def _run_in_empty_environ(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, environ={}, out=out, err=err, load_plugins=lambda warn: [COUNTER])
    return code, out.getvalue(), err.getvalue()


def _plain_line(request: dict[str, Any], reply: dict[str, Any]) -> str:
    response = {"model": "their-model", "usage": {"prompt_tokens": 3, "completion_tokens": 1, KEY: 1},
                "choices": [{"index": 0, "message": reply, "finish_reason": "stop"}]}
    return json.dumps({"request": request, "response": response}) + "\n"


def _mismatch(replay: ReplayClient, messages: list[dict[str, Any]], **options: Any) -> ReplayMismatch:
    """The mismatch a request that differs from the recorded one raises."""
    with pytest.raises(ReplayMismatch) as raised:
        replay.chat(messages, **options)
    return raised.value


def test_a_key_that_is_a_secret_and_a_secret_file_name_are_scrubbed_on_the_shift_page(tmp_path: Path) -> None:
    request = {"messages": [{"role": "user", "content": [{"type": "text", "text": "A latte.", KEY: "x"}]}]}
    recording = tmp_path / f"theirs-{KEY}.jsonl"
    recording.write_text(_plain_line(request, {"role": "assistant", "content": "Coming up."}))
    page = tmp_path / "page.html"
    code, out, err = _run_in_empty_environ(["view", str(recording), "-o", str(page)])
    assert code == 0 and KEY not in out, err
    text = page.read_text()
    assert KEY not in text and KEY[3:] not in text
    assert "A latte." in text and "theirs-[REDACTED].jsonl" in text  # what is no secret is still shown


def test_the_mismatch_report_scrubs_keys_the_file_name_and_the_quoted_protocol_values(tmp_path: Path) -> None:
    # Recorded by a harness that did not scrub: a role holding a key, which the mismatch line
    # quotes (roles are protocol values), and a key holding one.
    recorded = {"messages": [{"role": KEY, "content": "Hello.", "metadata": {KEY: True}}]}
    recording = tmp_path / f"theirs-{KEY}.jsonl"
    recording.write_text(_plain_line(recorded, {"role": "assistant", "content": "Hi."}))
    replay = ReplayClient(load_recording(recording), scrubber=Scrubber.from_environment({}))
    failure = _mismatch(replay, [{"role": "user", "content": "Hello."}])
    page = write_mismatch_report(tmp_path / "report.html", replay.recording, failure, Scrubber.from_environment({}))
    text = page.read_text()
    assert KEY not in text and KEY[3:] not in text
    assert REDACTED in text and "Hello." in text


def test_the_incoming_side_of_the_report_has_its_keys_scrubbed(tmp_path: Path) -> None:
    recording = tmp_path / "theirs.jsonl"
    recording.write_text(_plain_line({"messages": [{"role": "user", "content": "Hello."}]},
                                     {"role": "assistant", "content": "Hi."}))
    replay = ReplayClient(load_recording(recording), scrubber=Scrubber.from_environment({}))
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"properties": {KEY: {}}}}}]
    failure = _mismatch(replay, [{"role": "user", "content": "Hello."}], tools=tools)
    text = write_mismatch_report(tmp_path / "report.html", replay.recording, failure,
                                 Scrubber.from_environment({})).read_text()
    assert KEY not in text and "lookup" in text


def test_a_broad_configured_pattern_leaves_the_reports_keys_and_highlight(tmp_path: Path) -> None:
    recording = tmp_path / "theirs.jsonl"
    recording.write_text(_plain_line({"messages": [{"role": "user", "content": "Hello there."}]},
                                     {"role": "assistant", "content": "Hi."}))
    broad = Scrubber.from_environment({"CAFE_SCRUB_PATTERNS": r"\w{8}"})
    replay = ReplayClient(load_recording(recording), scrubber=broad)
    failure = _mismatch(replay, [{"role": "user", "content": "Hello."}])
    text = write_mismatch_report(tmp_path / "report.html", replay.recording, failure, broad).read_text()
    assert '"messages"' in html.unescape(text)
    # both sides highlighted
    assert text.count('class="diff" id="diff-recorded" data-path="$.messages[0].content">') == 1
    assert text.count('class="diff" id="diff-incoming" data-path="$.messages[0].content">') == 1


def test_the_report_line_scrubs_the_file_name_as_its_header_does(tmp_path: Path) -> None:
    # A name only a configured pattern finds: the structure patterns alone left it on the line.
    recording = tmp_path / "till-ORDER-PIN-493817.jsonl"
    recording.write_text(_plain_line({"messages": [{"role": "user", "content": "Hello there."}]},
                                     {"role": "assistant", "content": "Hi."}))
    configured = Scrubber.from_environment({"CAFE_SCRUB_PATTERNS": r"ORDER-PIN-\d{6}"})
    replay = ReplayClient(load_recording(recording), scrubber=configured)
    failure = _mismatch(replay, [{"role": "user", "content": "Hello."}])
    text = write_mismatch_report(tmp_path / "report.html", replay.recording, failure, configured).read_text()
    assert "493817" not in text
    error_line = next(line for line in text.splitlines() if line.startswith('<p class="error">'))
    assert "till-[REDACTED].jsonl: call 1" in html.unescape(error_line)
