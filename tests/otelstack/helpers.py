"""Processes these tests start themselves, read from /proc directly (not through otelstack,
so the tests judge it by what the kernel says), and `python -m otelstack` run as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BOOT_ID = Path("/proc/sys/kernel/random/boot_id").read_text().strip() if Path("/proc").is_dir() else ""


def stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat from field 3 (state) on; None when gone or a zombie."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return None
    fields = raw[raw.rindex(b")") + 2:].decode().split()
    return None if fields[0] in ("Z", "X") else fields


def record(pid: int, **changes: object) -> dict[str, object]:
    """What `up` records of `pid` (its start time, boot, executable, command line), with `changes`."""
    fields = stat_fields(pid)
    assert fields is not None, f"pid {pid} is gone"
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    found: dict[str, object] = {"pid": pid, "start_time": int(fields[19]), "boot_id": BOOT_ID,
                                "executable": os.readlink(f"/proc/{pid}/exe"),
                                "cmdline": [part.decode() for part in cmdline]}
    return {**found, **changes}


def write_state(directory: Path, processes: dict[str, dict[str, object]]) -> Path:
    directory.mkdir(mode=0o700, exist_ok=True)
    path = directory / "stack.json"
    path.write_text(json.dumps({"version": 1, "processes": processes}))
    return path


def running(process: subprocess.Popen[bytes]) -> bool:
    return process.poll() is None


def gone(pid: int, start_time: int, timeout: float = 30.0) -> bool:
    """Whether the process (pid, start_time) ends within `timeout` seconds (a bound, not a measure)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fields = stat_fields(pid)
        if fields is None or int(fields[19]) != start_time:
            return True
        time.sleep(0.05)
    return False


def stack(command: str, directory: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m otelstack COMMAND --dir DIRECTORY` in its own session: whatever it signals
    by mistake, its own group is no one else's."""
    return subprocess.run([sys.executable, "-m", "otelstack", command, "--dir", str(directory)], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False, start_new_session=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env})


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("otelstack: error: "), result.stderr
    return result.stderr


SLEEPER = """
import os, signal, sys, time
if "ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if "member" in sys.argv:
    member = os.fork()
    if member == 0:
        time.sleep(60)
        os._exit(0)
    with open(sys.argv[-1], "w") as out:
        out.write(str(member))
print("ready", flush=True)
time.sleep(60)
"""

# A stand-in for the Collector or Jaeger: binds the ports its environment names, answers
# 200 on the health port. MODE: serve; exit (at once, code 3); detach (a forked process
# serves, this one exits 0); elsewhere (a forked process serves, this one only sleeps).
FAKE = """#!{python}
import http.server, os, socket, sys, threading, time
KIND, MODE, PIDS = {kind!r}, {mode!r}, {pids!r}
if KIND == "jaeger":
    names = ["CAFE_JAEGER_OTLP_GRPC_ENDPOINT", "CAFE_JAEGER_OTLP_HTTP_ENDPOINT", "CAFE_JAEGER_QUERY_HTTP_ENDPOINT",
             "CAFE_JAEGER_QUERY_GRPC_ENDPOINT"]
    health = os.environ["CAFE_JAEGER_HEALTH_ENDPOINT"]
    extra = []
else:
    names = ["CAFE_OTLP_GRPC_ENDPOINT", "CAFE_OTLP_HTTP_ENDPOINT"]
    health = os.environ["CAFE_OTELCOL_HEALTH_ENDPOINT"]
    extra = [int(os.environ["CAFE_OTELCOL_METRICS_PORT"])]
ports = [int(os.environ[name].rpartition(":")[2]) for name in names] + extra

class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass

def serve():
    listeners = []
    for port in ports:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen()
        listeners.append(sock)
    server = http.server.HTTPServer(("127.0.0.1", int(health.rpartition(":")[2])), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    time.sleep(120)

with open(PIDS, "a") as out:
    out.write(f"{{KIND}} {{os.getpid()}}\\n")
print("fake", KIND, MODE, flush=True)
if MODE == "exit":
    sys.exit(3)
if MODE in ("detach", "elsewhere"):
    if os.fork() == 0:
        with open(PIDS, "a") as out:
            out.write(f"{{KIND}}-served-by {{os.getpid()}}\\n")
        serve()
        os._exit(0)
    if MODE == "detach":
        os._exit(0)
    time.sleep(120)
serve()
"""


def fake_program(directory: Path, kind: str, mode: str = "serve") -> Path:
    """An executable stand-in for `kind` ("collector" or "jaeger"); the pids it and its
    forks had are appended to directory/pids."""
    path = directory / f"fake-{kind}-{mode}"
    path.write_text(FAKE.format(python=sys.executable, kind=kind, mode=mode, pids=str(directory / "pids")))
    path.chmod(0o755)
    return path


def fake_pids(directory: Path) -> dict[str, int]:
    path = directory / "pids"
    if not path.exists():
        return {}
    return {name: int(pid) for name, pid in (line.split() for line in path.read_text().splitlines())}
