"""`cafe export --out` with OTEL_SDK_DISABLED=true: a one-line answer and exit 0, as the
--otlp path gives, not an internal error (mypy found the None provider it dereferenced)."""

from __future__ import annotations

import io
from pathlib import Path

from cafe.cli import main
from cafe.counter.cli import plugin as COUNTER
from cafe_otel._cli.plugin import plugin


def _cli(argv: list[str], environ: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, environ=environ, out=out, err=err, load_plugins=lambda warn: [COUNTER, plugin])
    return code, out.getvalue(), err.getvalue()


def test_export_to_a_file_with_the_sdk_disabled_writes_nothing_and_says_so(tmp_path: Path) -> None:
    recording, target = tmp_path / "shift.jsonl", tmp_path / "shift.otlp"
    assert _cli(["shift", "--seed", "1", "--record", str(recording)], {})[0] == 0
    code, out, err = _cli(["export", str(recording), "--out", str(target)], {"OTEL_SDK_DISABLED": "true"})
    assert (code, err) == (0, "")
    assert out == "telemetry disabled (OTEL_SDK_DISABLED=true): nothing written\n"
    assert not target.exists()
    code, out, err = _cli(["export", str(recording), "--out", str(target)], {})
    assert code == 0 and target.stat().st_size > 0, err
