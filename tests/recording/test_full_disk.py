"""A write that fails part way (a full disk, a quota, a file size limit) is a named error,
and what was there before is kept: it was exit 70, and the recording's note of where its
calls were kept was lost with it. The limit is the process's own (RLIMIT_FSIZE), so the
test needs no special file system."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECORDING = ROOT / "tests" / "recordings" / "seed-shift.jsonl"


def _limited(limit_bytes: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    return apply


def _cafe(cwd: Path, limit_bytes: int, *argv: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("CAFE_DEBUG", "OTEL_EXPORTER_OTLP_ENDPOINT", "COURSE_MODE"):
        environ.pop(name, None)
    return subprocess.run([sys.executable, "-m", "cafe", *argv], cwd=cwd, env=environ, capture_output=True,
                          text=True, timeout=120, check=False, preexec_fn=_limited(limit_bytes))


def test_a_recording_cut_by_a_full_disk_keeps_its_calls_and_says_where(tmp_path: Path) -> None:
    done = _cafe(tmp_path, 10_000, "shift", "--seed", "1", "--record", "shift.jsonl")
    assert done.returncode == 30, done.stderr
    assert done.stderr.startswith("cafe: error: shift.jsonl: line ") and done.stderr.count("\n") == 1
    assert "could not be written to shift.jsonl.partial (file too large)" in done.stderr
    assert "call(s) recorded before it are kept in shift.jsonl.partial" in done.stderr
    assert not (tmp_path / "shift.jsonl").exists()
    kept = _cafe(tmp_path, 2**30, "replay", "shift.jsonl.partial", "--allow-truncated")
    assert kept.returncode == 0, kept.stderr


def test_a_recording_whose_first_call_cannot_be_written_leaves_nothing(tmp_path: Path) -> None:
    done = _cafe(tmp_path, 1_000, "shift", "--seed", "1", "--record", "shift.jsonl")
    assert done.returncode == 30 and "line 2 could not be written" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["export", str(RECORDING), "--out", "out.otlp"],
                                  ["view", str(RECORDING), "-o", "out.html"]])
def test_an_output_cut_by_a_full_disk_is_exit_38_and_leaves_nothing_half_written(
    tmp_path: Path, argv: list[str]
) -> None:
    done = _cafe(tmp_path, 2_000, *argv)
    assert done.returncode == 38 and done.stderr.count("\n") == 1, done.stderr
    assert "could not be written (file too large)" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_output_over_an_earlier_one_keeps_it_when_the_new_one_cannot_be_written(tmp_path: Path) -> None:
    earlier = tmp_path / "out.otlp"
    earlier.write_bytes(b"earlier")
    done = _cafe(tmp_path, 2_000, "export", str(RECORDING), "--out", "out.otlp")
    assert done.returncode == 38 and "what was there is unchanged" in done.stderr, done.stderr
    assert earlier.read_bytes() == b"earlier" and sorted(p.name for p in tmp_path.iterdir()) == ["out.otlp"]
