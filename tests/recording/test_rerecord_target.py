"""Re-recording (mode `all`) replaces a recording, not whatever is at the path: a mistyped
`--record README.md --record-mode all` replaced the file with a recording."""

from __future__ import annotations

from pathlib import Path

import pytest

from cafe.clients.scripted import ScriptedClient
from cafe.recording import RecordingUnwritable, load_recording
from cafe.recording.writer import RecordingClient
from tests.recording.helpers import run_cli, valid_bytes


def test_a_file_that_is_not_a_recording_is_not_replaced(tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# my notes\n", encoding="utf-8")
    code, out, err = run_cli("shift", "--seed", "1", "--record", str(notes), "--record-mode", "all")
    assert code == 38 and "is not a cafe recording" in err and "recorded" not in out
    assert notes.read_text(encoding="utf-8") == "# my notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.md"]
    with pytest.raises(RecordingUnwritable):
        RecordingClient(ScriptedClient(), notes, mode="all")


@pytest.mark.parametrize("before", [valid_bytes(calls=1), b'{"request": {}, "response": {}}\n', b""],
                         ids=["recording", "plain recording", "empty file"])
def test_a_recording_or_an_empty_file_is_still_re_recorded(tmp_path: Path, before: bytes) -> None:
    path = tmp_path / "shift.jsonl"
    path.write_bytes(before)
    code, _, err = run_cli("shift", "--seed", "1", "--record", str(path), "--record-mode", "all")
    assert code == 0, err
    assert load_recording(path).header.seed == 1
