"""Real GenAI consumers (MLflow, Phoenix) for the end-to-end tests: where their cached venvs
are, and one server process started in its own session and stopped by that session only.

Each consumer has its own venv, built by scripts/<name>-venv.sh under
~/.cache/cafe-otel/<name>/<hash of tests/e2e/<name>-requirements.txt> (CAFE_<NAME>_CACHE moves
the cache, CAFE_<NAME>_BIN names the command). Missing, a test skips with the command that
installs it, or fails when CAFE_E2E_STRICT=1 or the path was given explicitly.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def consumer_command(name: str) -> Path:
    """The consumer's command (`mlflow`, `phoenix`) from its cached venv."""
    upper = name.upper()
    hint = f"bash scripts/{name}-venv.sh (installs {name} into its own cached venv)"
    explicit = os.environ.get(f"CAFE_{upper}_BIN")
    if explicit:
        path = Path(explicit)
    else:
        requirements = ROOT / "tests" / "e2e" / f"{name}-requirements.txt"
        key = hashlib.sha256(requirements.read_bytes()).hexdigest()[:16]
        cache = Path(os.environ.get(f"CAFE_{upper}_CACHE", Path.home() / ".cache" / "cafe-otel" / name))
        path = cache / key / "bin" / name
        if not (cache / key / ".complete").is_file():
            path = cache / key / ".incomplete"
    if path.is_file() and os.access(path, os.X_OK):
        return path
    message = f"{name} not found at {path} ({hint})"
    if explicit or os.environ.get("CAFE_E2E_STRICT") == "1":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def call_json(url: str, body: dict[str, Any] | None = None, timeout: float = 10.0) -> dict[str, Any]:
    """GET (no body) or POST a JSON body; the decoded JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"},
                                     method="GET" if body is None else "POST")
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        found: dict[str, Any] = json.loads(answer.read() or b"{}")
        return found


class ConsumerServer:
    """One server process, output in `log`, in its own session: stopping it stops the
    server's workers too, and nothing else."""

    def __init__(self, name: str, argv: Sequence[str], workdir: Path, environ: Mapping[str, str]) -> None:
        self.name = name
        self.log = workdir / f"{name}.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, cwd=workdir, env=dict(environ))

    def wait_ready(self, health_url: str, timeout: float) -> None:
        """Poll `health_url` until it answers 200, the process exits, or `timeout` passes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited ({self.proc.returncode}): {self.tail()}")
            try:
                with urllib.request.urlopen(health_url, timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        raise AssertionError(f"{self.name} not ready in {timeout:.0f} s: {self.tail()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        else:  # the server left; its workers may not have
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def tail(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-3000:]
