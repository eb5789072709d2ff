"""A recording is refused before anything is written when its header would be out of the
reader's ranges (a seed beyond 64 bits, a turn cap over 1,000,000): such a recording was
written, announced as recorded, and then refused by every replay (exit 33)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cafe.clients.scripted import ScriptedClient
from cafe.consent import make_responder
from cafe.recording import RecordingError, record_shift, replay_shift
from tests.recording.helpers import run_cli

SCRIPT = ["A latte, please.", "That's all."]


@pytest.mark.parametrize(("options", "field"), [
    ({"seed": 2**63}, "seed"), ({"seed": -(2**63) - 1}, "seed"), ({"max_turns": 1_000_001}, "max_turns"),
    ({"seed": 10**30}, "seed"),
])
def test_a_header_the_reader_would_refuse_is_not_recorded(tmp_path: Path, options: dict, field: str) -> None:
    path = tmp_path / "shift.jsonl"
    with pytest.raises(RecordingError, match=rf"nothing recorded: {field}: a recording's header holds an integer"):
        record_shift(ScriptedClient(), SCRIPT, path, responder=make_responder([("approve", None)]), **options)
    assert list(tmp_path.iterdir()) == []


def test_the_command_line_says_so_with_exit_30_and_the_extremes_in_range_replay(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    code, out, err = run_cli("shift", "--seed", str(2**63), "--record", str(path))
    assert code == 30 and err.count("\n") == 1 and "recorded" not in out, (out, err)
    assert list(tmp_path.iterdir()) == []
    code, _, err = run_cli("shift", "--max-turns", "1000001", "--record", str(path))
    assert code == 30 and "max_turns" in err
    for seed in (-(2**63), 2**63 - 1):
        path = tmp_path / f"{seed}.jsonl"
        assert run_cli("shift", "--seed", str(seed), "--max-turns", "1000000", "--record", str(path))[0] == 0
        replay_shift(path)
        assert run_cli("replay", str(path))[0] == 0
