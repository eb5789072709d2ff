"""`make up` / `make down` (`python -m otelstack up|down --dir DIR`): the local stack without
Docker, on ports the test picks (`--port`), and `cafe shift --otlp` naming the trace it sent
and where Jaeger shows it, whatever else listens on the machine."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from otelstack import REPO, free_ports, http_get, wait_for
from otelstack.local import PORTS

pytestmark = pytest.mark.e2e


def _free(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def _stack(command: str, directory: Path, env: dict[str, str], *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "otelstack", command, "--dir", str(directory), *options],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False, env=env)


@contextmanager
def _held(*ports: int) -> Iterator[None]:
    """Listeners on those of `ports` that are free: the machine as busy as another stack makes it."""
    held: list[socket.socket] = []
    try:
        for port in ports:
            listener = socket.socket()
            try:
                listener.bind(("127.0.0.1", port))
                listener.listen()
            except OSError:  # already someone else's: busy either way
                listener.close()
                continue
            held.append(listener)
        yield
    finally:
        for listener in held:
            listener.close()


def test_up_shift_trace_url_down(otelcol_bin: Path, jaeger_bin: Path, tmp_path: Path) -> None:
    with _held(PORTS["collector"]["otlp_http"], PORTS["jaeger"]["otlp_grpc"]):
        _up_shift_trace_url_down(otelcol_bin, jaeger_bin, tmp_path)


def _up_shift_trace_url_down(otelcol_bin: Path, jaeger_bin: Path, tmp_path: Path) -> None:
    # Ports the test picks, every one of them moved: another program on the machine (another
    # stack on the usual 4317, 14317, 16686) is no reason for this one to fail.
    names = [f"{program}.{label}" for program, labels in PORTS.items() for label in labels]
    picked = free_ports(*names)
    ports = list(picked.values())
    collector_grpc, jaeger_query = picked["collector.otlp_grpc"], picked["jaeger.query_http"]
    jaeger_url = f"http://127.0.0.1:{jaeger_query}"
    env = {**os.environ, "CAFE_OTELCOL_BIN": str(otelcol_bin), "CAFE_JAEGER_BIN": str(jaeger_bin)}
    up = _stack("up", tmp_path, env, *(f"--port={name}={port}" for name, port in picked.items()))
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"http://127.0.0.1:{collector_grpc}" in up.stdout and f"CAFE_JAEGER_URL={jaeger_url}" in up.stdout
        recorded = json.loads((tmp_path / "stack.json").read_text())["processes"]
        assert set(recorded) == {"collector", "jaeger"}

        shift = subprocess.run(
            [sys.executable, "-m", "cafe.cli", "shift", "--seed", "7", "--otlp", f"http://127.0.0.1:{collector_grpc}"],
            cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
            env={**env, "CAFE_JAEGER_URL": jaeger_url})
        assert shift.returncode == 0, shift.stderr
        (line,) = [line for line in shift.stdout.splitlines() if line.startswith("trace: ")]
        _, trace_id, url = line.split()
        assert url == f"{jaeger_url}/trace/{trace_id}" and len(trace_id) == 32

        def spans() -> list[str] | None:
            status, body = http_get(f"{jaeger_url}/api/traces/{trace_id}")
            found = json.loads(body)["data"][0]["spans"] if status == 200 else []
            return [span["operationName"] for span in found] if len(found) == 17 else None

        names_seen = wait_for("the shift's 17 spans in Jaeger", spans, 30)
        assert sorted(names_seen).count("chat scripted-barista-1") == 5 and "invoke_agent cafe-counter" in names_seen
    finally:
        down = _stack("down", tmp_path, env)
    assert down.returncode == 0 and "2 process(es) stopped" in down.stdout
    deadline = time.monotonic() + 10
    while not all(_free(port) for port in ports) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert all(_free(port) for port in ports)
    assert not (tmp_path / "stack.json").exists()
