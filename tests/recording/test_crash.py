"""Acceptance: a recorder killed with SIGKILL mid-shift leaves `PATH.partial`, whose
complete lines all load and replay, and leaves `PATH` as it was."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cafe.recording import RecordingUnwritable, TruncatedRecording, load_recording
from cafe.recording.writer import partial_path
from tests.recording.helpers import run_cli, valid_bytes

RECORDER = textwrap.dedent(
    """
    import sys, time
    from cafe.counter.clients.scripted import ScriptedClient
    from cafe.counter.consent import make_responder
    from cafe.recording import record_shift

    class SlowClient(ScriptedClient):
        def chat(self, *args, **kwargs):
            time.sleep(0.02)
            return super().chat(*args, **kwargs)

    script = ["What do you have?"] * 400
    record_shift(SlowClient(), script, sys.argv[1], max_turns=10_000, mode=sys.argv[2],
                 responder=make_responder([("approve", None)]), seed=1)
    """
)


def _record_and_kill(path: Path, at_least_lines: int, mode: str = "once") -> Path:
    """Kill the recorder once `at_least_lines` lines are written; return where they are."""
    partial = partial_path(path)
    process = subprocess.Popen(
        [sys.executable, "-c", RECORDER, str(path), mode],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if partial.exists() and partial.read_bytes().count(b"\n") >= at_least_lines:
                break
            if process.poll() is not None:
                pytest.fail(f"the recorder exited early: {process.stderr.read().decode()[-500:]}")
            time.sleep(0.01)
        else:
            pytest.fail("the recorder wrote too few lines within 30 s")
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    return partial


def test_sigkill_under_mode_all_keeps_the_previous_recording_whole(tmp_path: Path):
    path = tmp_path / "kept.jsonl"
    path.write_bytes(valid_bytes(calls=2))
    before = path.read_bytes()
    partial = _record_and_kill(path, at_least_lines=4, mode="all")
    assert path.read_bytes() == before and len(load_recording(path).calls) == 2
    assert len(load_recording(partial, allow_truncated=True).calls) >= 3
    # The next recording is refused until the partial is dealt with, and says how.
    code, _, err = run_cli("shift", "--record", str(path), "--record-mode", "all", "--seed", "1")
    assert code == RecordingUnwritable.exit_code and err.count("\n") == 1
    assert f"cafe view {partial} --allow-truncated -o calls.html" in err
    assert f"cafe replay-run {partial} --allow-truncated -- <program>" in err
    assert path.read_bytes() == before
    # Following the remedy works: the kept calls are drawn (up to the last complete one)...
    page = tmp_path / "calls.html"
    code, out, err = run_cli("view", str(partial), "--allow-truncated", "-o", str(page))
    assert code == 0, err
    assert page.stat().st_size > 0 and page.stat().st_mode & 0o777 == 0o600
    # ...the café's own replay reads them too...
    code, out, err = run_cli("replay", str(partial), "--allow-truncated")
    assert code == 0, err
    assert "with 0 model calls" in out
    # ...and once it is removed, recording works again.
    partial.unlink()
    code, _, err = run_cli("shift", "--record", str(path), "--record-mode", "all", "--seed", "1")
    assert code == 0, err
    assert load_recording(path).ending is not None and not partial.exists()


def test_sigkill_mid_shift_leaves_complete_lines_that_load(tmp_path: Path):
    target = tmp_path / "killed.jsonl"
    path = _record_and_kill(target, at_least_lines=6)
    assert not target.exists(), "only a finished recording is moved into place"
    assert path.stat().st_mode & 0o777 == 0o600
    data = path.read_bytes()
    complete = data.count(b"\n") - 1  # complete call lines after the header

    recording = load_recording(path, allow_truncated=True)
    assert recording.ending is None, "a killed shift has no end line"
    assert len(recording.calls) == complete >= 5
    assert [c.index for c in recording.calls] == list(range(1, complete + 1))
    assert recording.truncated == (not data.endswith(b"\n"))
    if not data.endswith(b"\n"):
        with pytest.raises(TruncatedRecording):
            load_recording(path)
    else:
        assert len(load_recording(path).calls) == complete
    assert path.read_bytes() == data

    # Whatever byte the kill lands on, the complete lines before it load.
    lines = data[: data.rindex(b"\n") + 1].splitlines(keepends=True)
    last = lines[-1]
    before = b"".join(lines[:-1])
    for cut in sorted({1, 2, len(last) // 3, len(last) // 2, len(last) - 2}):
        partial = tmp_path / f"cut-{cut}.jsonl"
        partial.write_bytes(before + last[:cut])
        with pytest.raises(TruncatedRecording) as caught:
            load_recording(partial)
        assert caught.value.line == len(lines) and caught.value.complete_calls == len(lines) - 2
        assert len(load_recording(partial, allow_truncated=True).calls) == len(lines) - 2
    # Cut just before its newline, the last line is whole JSON: it is complete, not truncated.
    whole = tmp_path / "no-newline.jsonl"
    whole.write_bytes(before + last[:-1])
    assert len(load_recording(whole).calls) == len(lines) - 1
