"""`cafe replay --report ""` asked for a page and, on a failed replay, silently wrote none."""

from __future__ import annotations

import io
from pathlib import Path

from cafe.cli import main


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), environ={}, out=out, err=err, load_plugins=lambda warn: [])
    return code, out.getvalue(), err.getvalue()


def test_an_empty_report_path_is_a_usage_error_not_a_silently_missing_page(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    assert _run("shift", "--seed", "1", "--record", str(path))[0] == 0
    code, _, err = _run("replay", str(path), "--report", " ")
    assert code == 2 and "argument --report: needs a file path for the page" in err
