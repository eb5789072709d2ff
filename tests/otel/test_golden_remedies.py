"""A golden failure names its remedy, and the remedy works: `--update` (with
`--allow-truncated` when the recording needed it) is named only where it would write the
file; where it could not (the recording itself, a directory, a FIFO, a missing
directory) the line says why instead of naming a command that fails."""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
from pathlib import Path

import pytest

from cafe.cli import main
from cafe_otel._cli.plugin import plugin

RECORDING = Path(__file__).resolve().parents[1] / "recordings" / "seed-shift.jsonl"


def cafe_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), environ={}, out=out, err=err, load_plugins=lambda warn: [plugin])
    return code, out.getvalue(), err.getvalue()


def _named_command(err: str) -> list[str] | None:
    found = re.search(r"`(cafe [^`]*)`", err)
    return shlex.split(found.group(1))[1:] if found else None


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "seed.jsonl"
    shutil.copy(RECORDING, path)
    return path


def _cases(tmp_path: Path, recording: Path) -> dict[str, Path]:
    (tmp_path / "a-directory").mkdir()
    os.mkfifo(tmp_path / "a-fifo")
    return {"the recording": recording, "a directory": tmp_path / "a-directory",
            "a FIFO": tmp_path / "a-fifo", "a missing directory": tmp_path / "nowhere" / "g.otlp"}


def test_no_update_command_is_named_where_update_could_not_write(tmp_path: Path, recording: Path) -> None:
    before = recording.read_bytes()
    for name, golden in _cases(tmp_path, recording).items():
        code, _, err = cafe_cli("golden", str(recording), str(golden))
        assert code in (46, 47) and err.count("\n") == 1, (name, err)
        assert _named_command(err) is None and "--update cannot write it there" in err, (name, err)
        # and indeed it could not:
        code, _, update_err = cafe_cli("golden", str(recording), str(golden), "--update")
        assert code == 38, (name, update_err)
    assert recording.read_bytes() == before


def test_the_named_update_command_works_also_for_a_truncated_recording(tmp_path: Path, recording: Path) -> None:
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(recording.read_bytes()[:-10])  # the end line cut short
    golden = tmp_path / "cut.otlp"
    code, _, err = cafe_cli("golden", str(cut), str(golden), "--allow-truncated")
    assert code == 46
    command = _named_command(err)
    assert command is not None and "--allow-truncated" in command, err
    code, out, err = cafe_cli(*command)
    assert code == 0 and golden.is_file(), err
    code, out, _ = cafe_cli("golden", str(cut), str(golden), "--allow-truncated")
    assert code == 0 and "matches" in out


def test_a_mismatch_names_an_update_command_that_works(tmp_path: Path, recording: Path) -> None:
    golden = tmp_path / "seed.otlp"
    golden.write_bytes(b"not otlp")
    code, _, err = cafe_cli("golden", str(recording), str(golden))
    assert code == 47 and "accept it with" in err
    command = _named_command(err)
    assert command is not None
    assert cafe_cli(*command)[0] == 0
    assert cafe_cli("golden", str(recording), str(golden))[0] == 0
