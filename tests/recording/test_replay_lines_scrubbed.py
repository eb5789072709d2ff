"""The one-line replay errors quote protocol values (roles, ids, names) and keys of the recorded
request, which is scrubbed only if cafe wrote it: a plain file of another harness holding a key
in a role put it on stderr (and in CI logs) through the mismatch and unused-calls lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cafe.recording import ReplayClient, ReplayMismatch, UnusedCalls, load_recording
from cafe.recording.scrub import REDACTED, Scrubber

KEY = "sk-proj-Lw30LineCanary0123456"


def _plain(path: Path, *requests: dict[str, Any]) -> ReplayClient:
    reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi."}, "finish_reason": "stop"}]}
    path.write_text("".join(json.dumps({"request": r, "response": reply}) + "\n" for r in requests))
    return ReplayClient(load_recording(path), scrubber=Scrubber.from_environment({}))


@pytest.mark.parametrize(("message", "shown_as"), [
    ({"role": KEY, "content": "Hello."}, REDACTED),  # a quoted protocol value
    ({"role": "user", "content": "Hello.", KEY: "x"}, "<a key of 10 characters>"),  # a key the path names
    ({"role": "user", "content": "Hello.", "tool_call_id": f"call {KEY}"}, REDACTED),
])
def test_the_mismatch_line_quotes_the_recorded_side_scrubbed(tmp_path: Path, message: dict[str, Any],
                                                             shown_as: str) -> None:
    replay = _plain(tmp_path / "theirs.jsonl", {"messages": [message]})
    with pytest.raises(ReplayMismatch) as caught:
        replay.chat([{"role": "user", "content": "Hello."}])
    assert KEY not in str(caught.value) and KEY[8:] not in str(caught.value)
    assert shown_as in str(caught.value)


def test_the_unused_calls_line_names_the_recorded_role_scrubbed(tmp_path: Path) -> None:
    first = {"messages": [{"role": "user", "content": "Hello."}], "tools": None, "temperature": 0.0,
             "tool_choice": None}
    replay = _plain(tmp_path / "theirs.jsonl", first, {"messages": [{"role": KEY, "content": "Bye."}]})
    replay.chat([{"role": "user", "content": "Hello."}])
    with pytest.raises(UnusedCalls) as caught:
        replay.assert_exhausted()
    assert KEY not in str(caught.value) and "the last from [REDACTED]" in str(caught.value)


def test_an_ordinary_mismatch_line_is_unchanged(tmp_path: Path) -> None:
    replay = _plain(tmp_path / "theirs.jsonl", {"messages": [{"role": "system", "content": "Hello."}]})
    with pytest.raises(ReplayMismatch) as caught:
        replay.chat([{"role": "user", "content": "Hello."}])
    assert str(caught.value).endswith("at $.messages[0].role: recorded 'system', incoming 'user'")


def test_a_broad_configured_pattern_leaves_the_path_and_the_digests_readable(tmp_path: Path) -> None:
    # `\w{8}` matches `messages`, `[0-9a-f]{8}` a digest: only quoted values are scrubbed with it.
    replay = _plain(tmp_path / "theirs.jsonl", {"messages": [{"role": "user", "content": "Hello there."}]})
    replay._scrubber = Scrubber(extra_patterns=[r"\w{8}", r"[0-9a-f]{8}"])
    with pytest.raises(ReplayMismatch) as caught:
        replay.chat([{"role": "user", "content": "Hello."}])
    line = str(caught.value)
    assert "at $.messages[0].content: recorded text(12 chars, sha256 " in line and REDACTED not in line
