"""The pages show recordings scrubbed as the recorder and `cafe export` scrub them: a plain file
cafe did not write (another harness's `{request, response}` lines) may hold a key, and before,
`cafe view` and `cafe replay --report` put it on the page as it was."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cafe import Tracer, make_responder, record_shift
from cafe.cli import main
from cafe.clients.scripted import ScriptedClient
from cafe.demo import DEFAULT_DECISIONS, DEFAULT_SCRIPT
from cafe.recording import load_recording
from cafe.recording.scrub import REDACTED, Scrubber
from cafe.view import scrubbed, shift_page, timeline

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
    code = main(argv, environ=environ, out=out, err=err, load_plugins=lambda warn: [])
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
        unscrubbed = shift_page(timeline(load_recording(recording)), source=str(recording))
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
