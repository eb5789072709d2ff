"""An empty path given to an option that names a file is a usage error: `--script ""` was
taken for no --script (the default order, or the recording's lines, ran instead and the
shift succeeded), and `cafe view -o ""` was refused as "it exists" (Path("") is ".")."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from cafe.cli import main


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), environ={}, out=out, err=err, load_plugins=lambda warn: [])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("empty", ["", " "])
def test_an_empty_script_path_for_a_shift_is_a_usage_error(empty: str) -> None:
    code, out, err = _run("shift", "--seed", "1", "--script", empty)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "argument --script: needs a file of customer lines" in err


def test_an_empty_script_path_for_a_replay_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    assert _run("shift", "--seed", "1", "--record", str(path))[0] == 0
    code, _, err = _run("replay", str(path), "--script", "")
    assert code == 2 and "argument --script: needs a file of customer lines" in err


def test_an_empty_page_path_for_view_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    assert _run("shift", "--seed", "1", "--record", str(path))[0] == 0
    code, _, err = _run("view", str(path), "-o", "")
    assert code == 2 and "argument -o/--out: needs a file path for the page" in err
    assert "exists" not in err
