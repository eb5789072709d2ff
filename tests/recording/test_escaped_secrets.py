"""A secret spelled with escapes a JSON text need not make (`\\u0073k-...`, `Bearer\\u0020...`),
as a model may write it in the JSON text of its tool-call arguments, was invisible to every
pattern: the recorder wrote it, `cafe view` showed it and `cafe check-recording` passed it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cafe.recording import RecordingClient, ReplayClient, load_recording
from cafe.recording.check import check_file
from cafe.recording.scrub import REDACTED, Scrubber

KEY = "sk-proj-Ej44EscapedCanary0123"


def _escaped(text: str, which: list[bool]) -> str:
    return "".join(f"\\u{ord(c):04x}" if escape else c for c, escape in zip(text, which, strict=True))


def _read(text: str) -> str:
    """What a JSON reader makes of every `\\u00XX` escape, at any depth."""
    return re.sub(r"\\+u00([0-9a-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


@settings(max_examples=100, deadline=None)
@given(which=st.lists(st.booleans(), min_size=len(KEY), max_size=len(KEY)), depth=st.sampled_from([1, 2]))
def test_a_key_spelled_with_escapes_is_scrubbed(which: list[bool], depth: int) -> None:
    spelled = _escaped(KEY, which).replace("\\", "\\" * depth)
    arguments = f'{{"item": "latte", "note": "{spelled}"}}'
    scrubbed = Scrubber().scrub(arguments)
    assert REDACTED in scrubbed
    assert KEY[8:] not in _read(scrubbed)
    assert "latte" in scrubbed


def test_text_with_escapes_and_no_secret_is_kept_as_it_was() -> None:
    for text in ('{"item": "\\u006catte"}', "caf\\u00e9 \\u0041", '{"a": "\\u0022sk-\\u0022"}'):
        assert Scrubber().scrub(text) == text


def test_a_bearer_token_behind_an_escaped_space_is_scrubbed() -> None:
    assert Scrubber().scrub("Bearer\\u0020abcdefgh12345678") == f"Bearer {REDACTED}"


class _OneReply:
    model, provider = "m", "test"

    def __init__(self, arguments: str) -> None:
        self.arguments = arguments

    def chat(self, messages: list[dict[str, Any]], tools: Any = None, temperature: float = 0.0,
             tool_choice: Any = None) -> dict[str, Any]:
        call = {"id": "call_1", "type": "function", "function": {"name": "price_check", "arguments": self.arguments}}
        return {"id": "r1", "model": "m", "usage": None,
                "choices": [{"index": 0, "finish_reason": "tool_calls",
                             "message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}


def test_the_recording_holds_no_escaped_key_and_check_recording_finds_one(tmp_path: Path) -> None:
    arguments = '{"item": "latte", "note": "\\u0073' + KEY[1:] + '"}'
    path = tmp_path / "shift.jsonl"
    client = RecordingClient(_OneReply(arguments), path, scrubber=Scrubber())
    client.chat([{"role": "user", "content": "A latte."}])
    client.close()
    text = path.read_text()
    assert KEY[1:] not in text and REDACTED in text
    recorded = load_recording(path).calls[0].response["choices"][0]["message"]["tool_calls"][0]
    assert json.loads(recorded["function"]["arguments"]) == {"item": "latte", "note": REDACTED}
    replay = ReplayClient(path, scrubber=Scrubber())
    replay.chat([{"role": "user", "content": "A latte."}])
    replay.assert_exhausted()

    theirs = tmp_path / "theirs.jsonl"
    request = {"messages": [{"role": "user", "content": "A latte."}]}
    reply = _OneReply(arguments).chat([])
    theirs.write_text(json.dumps({"request": request, "response": reply}) + "\n")
    assert [finding.kind for finding in check_file(theirs, Scrubber())] == ["secret (openai-style key)"]
