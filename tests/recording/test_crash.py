"""Acceptance: a recorder killed with SIGKILL mid-shift leaves a file whose complete lines
all load."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cafe.recording import TruncatedRecording, load_recording

RECORDER = textwrap.dedent(
    """
    import sys, time
    from cafe.clients.scripted import ScriptedClient
    from cafe.consent import make_responder
    from cafe.recording import record_shift

    class SlowClient(ScriptedClient):
        def chat(self, *args, **kwargs):
            time.sleep(0.02)
            return super().chat(*args, **kwargs)

    script = ["What do you have?"] * 400
    record_shift(SlowClient(), script, sys.argv[1], max_turns=10_000,
                 responder=make_responder([("approve", None)]), seed=1)
    """
)


def _record_and_kill(path: Path, at_least_lines: int) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", RECORDER, str(path)],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if path.exists() and path.read_bytes().count(b"\n") >= at_least_lines:
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


def test_sigkill_mid_shift_leaves_complete_lines_that_load(tmp_path: Path):
    path = tmp_path / "killed.jsonl"
    _record_and_kill(path, at_least_lines=6)
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
