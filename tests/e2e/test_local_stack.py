"""`make up` / `make down` (`python -m otelstack up|down --dir DIR`): the local stack without
Docker, and `cafe shift --otlp` naming the trace it sent and where Jaeger shows it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from otelstack import REPO, http_get, wait_for
from otelstack.local import PORTS

pytestmark = pytest.mark.e2e


def _free(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def _stack(command: str, directory: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "otelstack", command, "--dir", str(directory)], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False, env=env)


def test_up_shift_trace_url_down(otelcol_bin: Path, jaeger_bin: Path, tmp_path: Path) -> None:
    ports = [port for program in PORTS.values() for port in program.values()]
    busy = [port for port in ports if not _free(port)]
    assert not busy, f"the local stack's ports are taken on this machine: {busy}"
    env = {**os.environ, "CAFE_OTELCOL_BIN": str(otelcol_bin), "CAFE_JAEGER_BIN": str(jaeger_bin)}
    up = _stack("up", tmp_path, env)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert "http://127.0.0.1:4317" in up.stdout and "CAFE_JAEGER_URL=http://127.0.0.1:16686" in up.stdout
        recorded = json.loads((tmp_path / "stack.json").read_text())["processes"]
        assert set(recorded) == {"collector", "jaeger"}

        shift = subprocess.run(
            [sys.executable, "-m", "cafe.cli", "shift", "--seed", "7", "--otlp", "http://127.0.0.1:4317"],
            cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
            env={**env, "CAFE_JAEGER_URL": "http://127.0.0.1:16686"})
        assert shift.returncode == 0, shift.stderr
        (line,) = [line for line in shift.stdout.splitlines() if line.startswith("trace: ")]
        _, trace_id, url = line.split()
        assert url == f"http://127.0.0.1:16686/trace/{trace_id}" and len(trace_id) == 32

        def spans() -> list[str] | None:
            status, body = http_get(f"http://127.0.0.1:16686/api/traces/{trace_id}")
            found = json.loads(body)["data"][0]["spans"] if status == 200 else []
            return [span["operationName"] for span in found] if len(found) == 17 else None

        names = wait_for("the shift's 17 spans in Jaeger", spans, 30)
        assert sorted(names).count("chat scripted-barista-1") == 5 and "invoke_agent cafe-counter" in names
    finally:
        down = _stack("down", tmp_path, env)
    assert down.returncode == 0 and "2 process(es) stopped" in down.stdout
    deadline = time.monotonic() + 10
    while not all(_free(port) for port in ports) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert all(_free(port) for port in ports)
    assert not (tmp_path / "stack.json").exists()
