"""Figure 10's recorded conversation prices what it says: the recorder writes what each turn
adds, while the SDK resends the whole conversation."""

from __future__ import annotations

from pathlib import Path

from bench import wire_conversation
from cafe.recording import load_recording


def test_a_recorded_conversation_writes_what_each_turn_adds(tmp_path: Path) -> None:
    _, short_line, short_request = wire_conversation.conversation(tmp_path / "short.jsonl", 4)
    _, long_line, long_request = wire_conversation.conversation(tmp_path / "long.jsonl", 40)
    assert long_request > 5 * short_request  # the SDK resends the whole conversation
    assert long_line < 1.2 * short_line
    recording = load_recording(tmp_path / "long.jsonl")
    assert len(recording.calls) == 40 and len(recording.calls[-1].request["messages"]) == 80
