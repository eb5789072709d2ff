"""The reader refuses a line longer than `MAX_LINE_BYTES`; the writer wrote one (a reply that
large, or a long shift whose last request holds every earlier reply), announced the recording
as made, and every replay of it then failed with exit 33. Such a line is refused as it is
written, as a write that fails is: the calls before it are kept in PATH.partial."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cafe import Tracer, make_responder, record_shift
from cafe.recording import RecordingError, load_recording
from cafe.recording import format as _format

LIMIT = 64 * 1024


class _GrowingReplies:
    """A model whose replies are small until `big_from`, then each one `size` characters."""

    model, provider = "m", "test"

    def __init__(self, big_from: int, size: int) -> None:
        self.big_from, self.size, self.calls = big_from, size, 0

    def chat(self, messages: list[dict[str, Any]], tools: Any = None, temperature: float = 0.0,
             tool_choice: Any = None) -> dict[str, Any]:
        self.calls += 1
        text = "x" * self.size if self.calls >= self.big_from else "Noted."
        return {"id": f"r{self.calls}", "model": "m", "usage": None,
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]}


def _record(path: Path, client: _GrowingReplies) -> None:
    record_shift(client, ["A latte.", "A tea.", "That's all."], path, responder=make_responder([("approve", None)]),
                 tracer=Tracer())


@pytest.fixture(autouse=True)
def _small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_format, "MAX_LINE_BYTES", LIMIT)


def test_a_line_the_reader_would_refuse_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    with pytest.raises(RecordingError) as caught:
        _record(path, _GrowingReplies(big_from=2, size=LIMIT))
    message = str(caught.value)
    assert "line 3" in message and f"at most {LIMIT} bytes" in message
    assert any("1 call(s) recorded before it are kept in" in note for note in caught.value.__notes__)
    assert not path.exists()
    kept = load_recording(path.with_name("shift.jsonl.partial"), allow_truncated=True)
    assert len(kept.calls) == 1


def test_a_reply_too_large_for_its_first_line_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    with pytest.raises(RecordingError, match="line 2"):
        _record(path, _GrowingReplies(big_from=1, size=LIMIT))
    assert list(tmp_path.iterdir()) == []


def test_lines_within_the_limit_are_recorded_and_read(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    _record(path, _GrowingReplies(big_from=1, size=LIMIT // 8))
    assert len(load_recording(path).calls) >= 2
