"""A page shows object keys and the recording's file name, and a recording's scrubbing leaves
both alone (keys are structure; the name is not in the file): a key another harness wrote as
an object key (a content part's, a usage entry's), a secret-bearing file name, or a protocol
value the mismatch line quotes from an unscrubbed recorded side reached `cafe view`'s page and
the mismatch report as they were."""

from __future__ import annotations

import html
import io
import json
from pathlib import Path
from typing import Any

import pytest

from cafe.cli import main
from cafe.recording import ReplayClient, ReplayMismatch, load_recording
from cafe.recording.scrub import REDACTED, Scrubber
from cafe.view import write_mismatch_report

KEY = "sk-proj-Kq72PageKeyCanary0123"


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, environ={}, out=out, err=err, load_plugins=lambda warn: [])
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
    code, out, err = _run(["view", str(recording), "-o", str(page)])
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
