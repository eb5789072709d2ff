"""Scrubbing a scrubbed text changes nothing, with configured patterns too: one that matches
in `[REDACTED]` itself (`[A-Z]{8}`, `\\w{8}`, `ACTED`) made `[[REDACTED]]` of it, again at each
scrub, so a replayed reply that held a scrubbed value, sent back in the next request and
scrubbed there, no longer matched its recording (and `cafe view` changed a cafe recording)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cafe.recording import RecordingClient, ReplayClient
from cafe.recording.scrub import REDACTED, Scrubber

PATTERNS = [r"[A-Z]{8}", r"\w{8}", "ACTED", r"RED[A-Z]+", r"D\]", r"\[\w+"]


@settings(max_examples=100, deadline=None)
@given(pattern=st.sampled_from(PATTERNS),
       text=st.lists(st.sampled_from(["code", REDACTED, "ABCDEFGH", "sk-abcdefghijklmnop", "x[", "]"]),
                     max_size=8).map(" ".join))
def test_scrubbing_twice_is_scrubbing_once(pattern: str, text: str) -> None:
    scrubber = Scrubber(extra_patterns=[pattern])
    once = scrubber.scrub(text)
    assert scrubber.scrub(once) == once


@pytest.mark.parametrize("pattern", [r"[A-Z]{8}", r"\w{8}", "ABCDEFGH|ACTED"])
def test_a_reply_holding_a_scrubbed_value_replays(tmp_path: Path, pattern: str) -> None:
    class Echo:
        model, provider = "m", "test"

        def chat(self, messages: list[dict[str, Any]], tools: Any = None, temperature: float = 0.0,
                 tool_choice: Any = None) -> dict[str, Any]:
            message = {"role": "assistant", "content": f"Noted {messages[0]['content'][-8:]}."}
            return {"id": "r", "model": "m", "usage": None,
                    "choices": [{"index": 0, "finish_reason": "stop", "message": message}]}

    def shift(client: Any) -> None:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "My code is ABCDEFGH"}]
        messages.append(client.chat(list(messages))["choices"][0]["message"])
        messages.append({"role": "user", "content": "Thanks."})
        client.chat(list(messages))

    path = tmp_path / "shift.jsonl"
    recorder = RecordingClient(Echo(), path, scrubber=Scrubber(extra_patterns=[pattern]))
    shift(recorder)
    recorder.close()
    assert "ABCDEFGH" not in path.read_text() and "[[" not in path.read_text()
    replay = ReplayClient(path, scrubber=Scrubber(extra_patterns=[pattern]))
    shift(replay)
    replay.assert_exhausted()
