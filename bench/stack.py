"""The built Collector (and Jaeger behind it) as subprocesses on 127.0.0.1, for figures 3 and 4.

Binaries: $CAFE_OTELCOL_BIN / $CAFE_JAEGER_BIN, else
${CAFE_OTEL_BIN_CACHE:-~/.cache/cafe-otel/bin}/current/{otelcol-cafe,jaeger}, as
`bash scripts/build-otel-binaries.sh` (`make binaries`) leaves them. The Collector runs the
shipped collector-config/collector.yaml unchanged, on free ports, with its persistent queue
in a temporary directory and Jaeger (collector-config/jaeger.yaml) as its upstream.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COLLECTOR_CONFIG = REPO / "collector-config" / "collector.yaml"
JAEGER_CONFIG = REPO / "collector-config" / "jaeger.yaml"
HOST = "127.0.0.1"


class StackUnavailable(RuntimeError):
    """A binary is missing or a program did not come up: the figure is reported as blocked."""


def binary(env_var: str, name: str) -> Path:
    explicit = os.environ.get(env_var)
    cache = Path(os.environ.get("CAFE_OTEL_BIN_CACHE") or Path.home() / ".cache" / "cafe-otel" / "bin")
    path = Path(explicit) if explicit else cache / "current" / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise StackUnavailable(f"{name} not found at {path}: run `make binaries` (or set {env_var})")
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound a moment ago, then released)."""
    return free_port()


def get(url: str, timeout: float = 2.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""
    except (OSError, urllib.error.URLError):
        return 0, ""


@dataclass
class Program:
    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    health: str
    process: subprocess.Popen | None = field(default=None, repr=False)

    def start(self, timeout: float = 60.0) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(self.argv, env={**os.environ, **self.env}, stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while get(self.health, 1.0)[0] != 200:
            if self.process.poll() is not None:
                raise StackUnavailable(f"{self.name} exited with {self.process.returncode}; see {self.log}")
            if time.monotonic() > deadline:
                self.stop()
                raise StackUnavailable(f"{self.name} not healthy within {timeout:.0f}s; see {self.log}")
            time.sleep(0.2)

    def stop(self, grace: float = 15.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


@dataclass
class Stack:
    """Jaeger, and the Collector exporting to it. `otlp_grpc` is where spans go."""

    workdir: Path
    jaeger: Program | None = None
    collector: Program | None = None
    ports: dict[str, int] = field(default_factory=dict)

    def start(self) -> Stack:
        self.workdir.mkdir(parents=True, exist_ok=True)
        otelcol, jaeger = binary("CAFE_OTELCOL_BIN", "otelcol-cafe"), binary("CAFE_JAEGER_BIN", "jaeger")
        names = ("j_grpc", "j_http", "j_query", "j_query_grpc", "j_health",
                 "grpc", "http", "health", "metrics")
        self.ports = {name: free_port() for name in names}
        p = self.ports
        self.jaeger = Program("jaeger", [str(jaeger), f"--config={JAEGER_CONFIG}"], {
            "CAFE_JAEGER_OTLP_GRPC_ENDPOINT": f"{HOST}:{p['j_grpc']}",
            "CAFE_JAEGER_OTLP_HTTP_ENDPOINT": f"{HOST}:{p['j_http']}",
            "CAFE_JAEGER_QUERY_HTTP_ENDPOINT": f"{HOST}:{p['j_query']}",
            "CAFE_JAEGER_QUERY_GRPC_ENDPOINT": f"{HOST}:{p['j_query_grpc']}",
            "CAFE_JAEGER_HEALTH_ENDPOINT": f"{HOST}:{p['j_health']}",
        }, self.workdir / "jaeger.log", f"http://{HOST}:{p['j_health']}/status")
        self.collector = Program("otelcol", [str(otelcol), f"--config={COLLECTOR_CONFIG}"], {
            "CAFE_OTLP_GRPC_ENDPOINT": f"{HOST}:{p['grpc']}",
            "CAFE_OTLP_HTTP_ENDPOINT": f"{HOST}:{p['http']}",
            "CAFE_OTELCOL_HEALTH_ENDPOINT": f"{HOST}:{p['health']}",
            "CAFE_OTELCOL_METRICS_HOST": HOST,
            "CAFE_OTELCOL_METRICS_PORT": str(p["metrics"]),
            "CAFE_OTELCOL_QUEUE_DIR": str(self.workdir / "queue"),
            "CAFE_UPSTREAM_OTLP_ENDPOINT": f"{HOST}:{p['j_grpc']}",
            "CAFE_UPSTREAM_TLS_INSECURE": "true",
        }, self.workdir / "otelcol.log", f"http://{HOST}:{p['health']}/")
        self.jaeger.start()
        try:
            self.collector.start()
        except BaseException:
            self.jaeger.stop()
            raise
        return self

    def stop(self) -> None:
        for program in (self.collector, self.jaeger):
            if program is not None:
                program.stop()

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def otlp_grpc(self) -> str:
        return f"http://{HOST}:{self.ports['grpc']}"

    def metrics(self) -> dict[str, float]:
        """The Collector's own metrics (Prometheus text), summed over labels."""
        status, body = get(f"http://{HOST}:{self.ports['metrics']}/metrics", 5.0)
        if status != 200:
            raise StackUnavailable(f"collector metrics endpoint answered {status}")
        totals: dict[str, float] = {}
        for line in body.splitlines():
            if not line or line.startswith("#"):
                continue
            name_labels, _, value = line.rpartition(" ")
            name = name_labels.split("{", 1)[0]
            totals[name] = totals.get(name, 0.0) + float(value)
        return totals

    def metric(self, name: str) -> float:
        values = self.metrics()
        return values.get(f"{name}_total", values.get(name, 0.0))
