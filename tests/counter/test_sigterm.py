"""A `cafe shift --record` stopped with SIGTERM (a CI timeout, `timeout`, `docker stop`) ends
as an interrupted one does: the calls made so far are kept in PATH.partial and the line says
so (exit 143). Python's default ended it at once: no line, and a PATH.partial left even with no
call in it, which refused the next recording of that path (exit 38)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.local_http import QuietHandler, serving

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-sigterm-canary-0123456789"
REPLY = {"id": "r1", "object": "chat.completion", "created": 0, "model": "m",
         "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Noted."}}],
         "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


@contextmanager
def answering(answers: int) -> Iterator[tuple[str, list[str]]]:
    """A chat endpoint on 127.0.0.1 that answers the first `answers` requests and holds the rest."""
    done, seen = threading.Event(), []

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            self.read_body()
            seen.append(self.path)
            if len(seen) > answers:
                done.wait(20)
                self.close_connection = True
                return
            self.answer(200, json.dumps(REPLY).encode())

    with serving(Handler) as port:
        try:
            yield f"http://127.0.0.1:{port}/v1", seen
        finally:
            done.set()  # before the server shuts down: a held request waits on it


def _terminated_shift(tmp_path: Path, answers: int) -> subprocess.CompletedProcess[str]:
    with answering(answers) as (url, seen):
        environ = {**os.environ, "PYTHONPATH": str(ROOT), "COURSE_MODE": "live", "CAFE_BASE_URL": url,
                   "CAFE_API_KEY": KEY, "CAFE_MODEL": "m", "CAFE_TIMEOUT": "30", "CAFE_MAX_RETRIES": "0"}
        for name in ("CAFE_DEBUG", "OTEL_EXPORTER_OTLP_ENDPOINT", "CAFE_MODE"):
            environ.pop(name, None)
        process = subprocess.Popen([sys.executable, "-m", "cafe", "shift", "--seed", "1", "--record", "shift.jsonl"],
                                   cwd=tmp_path, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 90  # a loaded 2-core box took 23 s to start a shift
        while len(seen) <= answers and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.02)
        assert len(seen) == answers + 1, "the shift never reached the held call"
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.mark.parametrize("answers", [0, 1])
def test_a_terminated_recording_keeps_its_calls_and_says_where(tmp_path: Path, answers: int) -> None:
    done = _terminated_shift(tmp_path, answers)
    assert done.returncode == 143, done.stderr
    assert done.stderr.startswith("cafe: terminated (SIGTERM)") and done.stderr.count("\n") == 1, done.stderr
    assert KEY not in done.stderr + done.stdout
    assert not (tmp_path / "shift.jsonl").exists()
    partial = tmp_path / "shift.jsonl.partial"
    if answers:
        assert "1 call(s) recorded before it are kept in shift.jsonl.partial" in done.stderr
        replayed = subprocess.run([sys.executable, "-m", "cafe", "replay", "shift.jsonl.partial", "--allow-truncated"],
                                  cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                                  text=True, timeout=60, check=False)
        assert replayed.returncode == 0, replayed.stderr
    else:
        assert not partial.exists()  # no call: nothing left to block the next recording


def test_a_host_that_handles_sigterm_itself_keeps_its_handler() -> None:
    from cafe.cli.termination import terminated_as_interrupt

    def handler(signum: int, frame: object) -> None:
        return None

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        with terminated_as_interrupt():
            assert signal.getsignal(signal.SIGTERM) is handler
        assert signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, previous)
