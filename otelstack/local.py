"""`python -m otelstack up|down --dir DIR`: the local stack without Docker (`make up`, `make down`).

The built Collector (collector.yaml, one tier) and Jaeger (Badger storage under DIR, so a
restart keeps the traces), each bound to 127.0.0.1 on the usual ports: OTLP 4317/4318 into
the Collector, Jaeger's query API on 16686. Both run in their own sessions, so they outlive
the command that started them; DIR holds their logs, pids, the Collector's queue and
Jaeger's data, and `down` stops what `up` started (SIGTERM, then SIGKILL after a grace).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from otelstack.binaries import BUILD_HINT, binary_path, usable
from otelstack.layout import COLLECTOR_CONFIG, JAEGER_CONFIG
from otelstack.procs import LOOPBACK, http_get

STATE = "stack.json"
JAEGER_UI = f"http://{LOOPBACK}:16686"
PORTS = {
    "collector": {"otlp_grpc": 4317, "otlp_http": 4318, "health": 13133, "metrics": 8888},
    "jaeger": {"otlp_grpc": 14317, "otlp_http": 14318, "query_http": 16686, "query_grpc": 16685, "health": 13134},
}


def _programs(directory: Path) -> dict[str, tuple[list[str], dict[str, str], str]]:
    c, j = PORTS["collector"], PORTS["jaeger"]
    collector, _ = binary_path("CAFE_OTELCOL_BIN", "otelcol-cafe")
    jaeger, _ = binary_path("CAFE_JAEGER_BIN", "jaeger")
    for path in (collector, jaeger):
        if not usable(path):
            raise SystemExit(f"otelstack: {path.name} is not built ({BUILD_HINT})")
    return {
        "jaeger": ([str(jaeger), f"--config={JAEGER_CONFIG}"], {
            "CAFE_JAEGER_OTLP_GRPC_ENDPOINT": f"{LOOPBACK}:{j['otlp_grpc']}",
            "CAFE_JAEGER_OTLP_HTTP_ENDPOINT": f"{LOOPBACK}:{j['otlp_http']}",
            "CAFE_JAEGER_QUERY_HTTP_ENDPOINT": f"{LOOPBACK}:{j['query_http']}",
            "CAFE_JAEGER_QUERY_GRPC_ENDPOINT": f"{LOOPBACK}:{j['query_grpc']}",
            "CAFE_JAEGER_HEALTH_ENDPOINT": f"{LOOPBACK}:{j['health']}",
            "CAFE_JAEGER_DATA_DIR": str(directory / "jaeger"),
        }, f"http://{LOOPBACK}:{j['health']}/status"),
        "collector": ([str(collector), f"--config={COLLECTOR_CONFIG}"], {
            "CAFE_OTLP_GRPC_ENDPOINT": f"{LOOPBACK}:{c['otlp_grpc']}",
            "CAFE_OTLP_HTTP_ENDPOINT": f"{LOOPBACK}:{c['otlp_http']}",
            "CAFE_OTELCOL_HEALTH_ENDPOINT": f"{LOOPBACK}:{c['health']}",
            "CAFE_OTELCOL_METRICS_HOST": LOOPBACK,
            "CAFE_OTELCOL_METRICS_PORT": str(c["metrics"]),
            "CAFE_OTELCOL_QUEUE_DIR": str(directory / "queue"),
            "CAFE_UPSTREAM_OTLP_ENDPOINT": f"{LOOPBACK}:{j['otlp_grpc']}",
            "CAFE_UPSTREAM_TLS_INSECURE": "true",
            # No metrics backend runs without Docker (compose has Prometheus): the metrics
            # wait in the Collector's queue, on a loopback port nothing listens on.
            "CAFE_METRICS_UPSTREAM_ENDPOINT": f"http://{LOOPBACK}:9",
        }, f"http://{LOOPBACK}:{c['health']}/"),
    }


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _state(directory: Path) -> dict[str, int]:
    path = directory / STATE
    if not path.exists():
        return {}
    found: dict[str, int] = json.loads(path.read_text())
    return {name: pid for name, pid in found.items() if _alive(pid)}


def up(directory: Path, timeout: float = 60.0) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    running = _state(directory)
    if running:
        print(f"otelstack: already up ({', '.join(f'{n} pid {p}' for n, p in running.items())}); "
              f"`python -m otelstack down --dir {directory}` first")
        return 1
    started: dict[str, int] = {}
    for name, (argv, env, health) in _programs(directory).items():
        log = (directory / f"{name}.log").open("ab")
        process = subprocess.Popen(argv, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        started[name] = process.pid
        (directory / STATE).write_text(json.dumps(started))
        deadline = time.monotonic() + timeout
        while http_get(health, timeout=1.0)[0] != 200:
            if process.poll() is not None or time.monotonic() > deadline:
                down(directory)
                print(f"otelstack: {name} did not become healthy; see {directory / (name + '.log')}")
                return 1
            time.sleep(0.25)
    print(f"""stack up (logs, queue and Jaeger's Badger data in {directory}):
  OTLP into the Collector   grpc http://{LOOPBACK}:4317   http http://{LOOPBACK}:4318
  Collector health, metrics http://{LOOPBACK}:13133/      http://{LOOPBACK}:8888/metrics
  Jaeger (query API)        {JAEGER_UI}/api/traces/<trace id>   (the web UI is not built here)
then:
  CAFE_JAEGER_URL={JAEGER_UI} .venv/bin/cafe shift --otlp http://{LOOPBACK}:4317
  make down""")
    return 0


def down(directory: Path, grace: float = 15.0) -> int:
    running = _state(directory)
    for pid in running.values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(_alive(pid) for pid in running.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in running.values():
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    (directory / STATE).unlink(missing_ok=True)
    print(f"stack down ({len(running)} process(es) stopped)" if running else "stack was not running")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m otelstack", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["up", "down"])
    parser.add_argument("--dir", type=Path, required=True, help="where the stack keeps logs, pids and data")
    args = parser.parse_args(argv)
    return up(args.dir) if args.command == "up" else down(args.dir)


if __name__ == "__main__":
    sys.exit(main())
