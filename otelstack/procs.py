"""Run the built Collector and Jaeger as subprocesses on 127.0.0.1 and talk to them.

Every wait is a loop with a deadline, so a hung program fails a test instead of
hanging the suite. Logs go to files under the test's tmp_path; their tails are
printed when a test fails (see conftest.py).
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from otelstack.layout import COLLECTOR_CONFIG, GATEWAY_CONFIG, JAEGER_CONFIG

LOOPBACK = "127.0.0.1"


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_ports(*names: str) -> dict[str, int]:
    """Ports that were free a moment ago, one per name, all different.

    They are drawn below the kernel's ephemeral range: a port the kernel picked (bind to
    port 0) is free again once our probe closes, and any outgoing connection on the
    machine may take it before the program we start binds it. Below the range only
    another listener can. The probe sockets stay open until all are picked.
    """
    low = 20000
    high = min(_ephemeral_range()[0], 32768)
    rng = random.Random()
    socks: list[socket.socket] = []
    try:
        for _ in range(200 * len(names)):
            if len(socks) == len(names):
                break
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((LOOPBACK, rng.randrange(low, high)))
            except OSError:
                sock.close()
                continue
            socks.append(sock)
        if len(socks) < len(names):
            raise AssertionError(f"no {len(names)} free ports found between {low} and {high}")
        return {name: sock.getsockname()[1] for name, sock in zip(names, socks, strict=True)}
    finally:
        for sock in socks:
            sock.close()


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    """(status, body); status 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")
    except (OSError, urllib.error.URLError):
        return 0, ""


def wait_for(what: str, check: Callable[[], object], timeout: float, interval: float = 0.25) -> object:
    """Poll `check` until it returns something truthy; fail with `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


@dataclass
class Proc:
    """One long-running program with its log file; can be stopped and started again."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    health_url: str
    ports: dict[str, int] = field(default_factory=dict)
    popen: subprocess.Popen | None = field(default=None, repr=False)

    def start(self, timeout: float = 30.0) -> None:
        assert self.popen is None or self.popen.poll() is not None, f"{self.name} already running"
        with self.log_path.open("ab") as log:
            log.write(f"\n===== start {self.name}: {' '.join(self.argv)}\n".encode())
            log.flush()
            self.popen = subprocess.Popen(
                self.argv,
                env={**os.environ, **self.env},
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        wait_for(f"{self.name} health at {self.health_url}", self._healthy, timeout)

    def _healthy(self) -> bool:
        if self.popen is not None and self.popen.poll() is not None:
            raise AssertionError(f"{self.name} exited with {self.popen.returncode}\n{self.tail()}")
        return http_get(self.health_url, timeout=1.0)[0] == 200

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM, then SIGKILL if it is still there after `grace` seconds."""
        if not self.running:
            return
        self.popen.terminate()
        try:
            self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(5)

    def restart(self) -> None:
        """Graceful stop, then start with the same arguments, ports and directories."""
        self.stop()
        self.start()

    def sigkill(self) -> None:
        """Die like a crash or the OOM killer: no shutdown, no flush."""
        assert self.running, f"{self.name} is not running"
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(5)

    def tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return f"(no log for {self.name})"
        text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return f"--- last {len(text)} lines of {self.log_path}\n" + "\n".join(text)


class Jaeger(Proc):
    @classmethod
    def create(cls, binary: Path, workdir: Path, data_dir: Path | None = None) -> Jaeger:
        """Jaeger on jaeger.yaml, its Badger store in `data_dir` (default workdir/jaeger-data):
        a restart (same object, same env) finds the traces it stored before."""
        ports = free_ports("otlp_grpc", "otlp_http", "query_http", "query_grpc", "health")
        env = {
            "CAFE_JAEGER_DATA_DIR": str(data_dir or workdir / "jaeger-data"),
            "CAFE_JAEGER_OTLP_GRPC_ENDPOINT": f"{LOOPBACK}:{ports['otlp_grpc']}",
            "CAFE_JAEGER_OTLP_HTTP_ENDPOINT": f"{LOOPBACK}:{ports['otlp_http']}",
            "CAFE_JAEGER_QUERY_HTTP_ENDPOINT": f"{LOOPBACK}:{ports['query_http']}",
            "CAFE_JAEGER_QUERY_GRPC_ENDPOINT": f"{LOOPBACK}:{ports['query_grpc']}",
            "CAFE_JAEGER_HEALTH_ENDPOINT": f"{LOOPBACK}:{ports['health']}",
        }
        return cls(
            "jaeger",
            [str(binary), f"--config={JAEGER_CONFIG}"],
            env,
            workdir / "jaeger.log",
            f"http://{LOOPBACK}:{ports['health']}/status",
            ports,
        )

    @property
    def otlp_grpc(self) -> str:
        return f"{LOOPBACK}:{self.ports['otlp_grpc']}"

    def api(self, path: str) -> tuple[dict, str]:
        """GET /api/...; (parsed JSON, raw body). Raw text is what redaction checks search."""
        status, body = http_get(f"http://{LOOPBACK}:{self.ports['query_http']}{path}")
        assert status == 200, f"GET {path}: HTTP {status} {body[:300]}"
        return json.loads(body), body

    def api_status(self, path: str) -> int:
        """Only the HTTP status of GET /api/... (404: Jaeger has no such trace)."""
        return http_get(f"http://{LOOPBACK}:{self.ports['query_http']}{path}")[0]

    def services(self) -> list[str]:
        return self.api("/api/services")[0]["data"] or []

    def traces(self, service: str, limit: int = 1000) -> tuple[list[dict], str]:
        """All traces of `service` from the last hour (list of Jaeger trace JSON, raw body)."""
        if service not in self.services():
            return [], ""
        data, raw = self.api(f"/api/traces?service={service}&limit={limit}&lookback=1h")
        return data["data"] or [], raw

    def trace(self, trace_id: str) -> tuple[dict, str]:
        data, raw = self.api(f"/api/traces/{trace_id}")
        return data["data"][0], raw

    def wait_for_spans(self, service: str, expected: int, timeout: float = 60.0) -> list[dict]:
        """Poll until `service` has at least `expected` spans; then settle briefly and return them.

        Returns every span found (possibly more than expected: callers assert the exact count).
        """

        def count() -> int:
            return sum(len(t["spans"]) for t in self.traces(service)[0])

        wait_for(
            f"{expected} spans of {service!r} in Jaeger", lambda: count() >= expected or None, timeout, interval=0.5
        )
        time.sleep(1.0)  # a late duplicate would arrive now; the exact-count asserts must see it
        return [span for t in self.traces(service)[0] for span in t["spans"]]


class OtelCol(Proc):
    """A running otelcol-cafe (either tier): its OTLP/gRPC address and its own metrics."""

    @property
    def otlp_grpc(self) -> str:
        return f"{LOOPBACK}:{self.ports['otlp_grpc']}"

    def samples(self, name: str) -> list[tuple[dict[str, str], float]]:
        """Every sample of one metric (either name form) with its labels."""
        status, body = http_get(f"http://{LOOPBACK}:{self.ports['metrics']}/metrics")
        assert status == 200, f"metrics endpoint: HTTP {status}"
        found = []
        for line in body.splitlines():
            if not line or line.startswith("#"):
                continue
            name_labels, _, value = line.rpartition(" ")
            metric, _, labels = name_labels.partition("{")
            if metric in (name, f"{name}_total"):
                pairs = (item.split("=", 1) for item in labels.rstrip("}").split(",") if "=" in item)
                found.append(({k: v.strip('"') for k, v in pairs}, float(value)))
        return found

    def metrics(self, data_type: str | None = "traces") -> dict[str, float]:
        """The collector's own metrics, summed over labels: {name: value}. By default only
        the traces pipeline's (a series labelled `data_type` of another signal, such as the
        metrics pipeline's queue, is left out); `data_type=None` sums them all.

        Counter names carry Prometheus' `_total` suffix; `metric()` accepts either form.
        """
        status, body = http_get(f"http://{LOOPBACK}:{self.ports['metrics']}/metrics")
        assert status == 200, f"metrics endpoint: HTTP {status}"
        totals: dict[str, float] = {}
        for line in body.splitlines():
            if not line or line.startswith("#"):
                continue
            name_labels, _, value = line.rpartition(" ")
            if data_type is not None and 'data_type="' in name_labels and f'data_type="{data_type}"' not in name_labels:
                continue
            name = name_labels.split("{", 1)[0]
            totals[name] = totals.get(name, 0.0) + float(value)
        return totals

    def metric(self, name: str, data_type: str | None = "traces") -> float:
        values = self.metrics(data_type)
        return values.get(name, values.get(f"{name}_total", 0.0))


class Collector(OtelCol):
    @classmethod
    def create(
        cls, binary: Path, workdir: Path, upstream: str, queue_dir: Path, *, gateways: list[str] | None = None,
        overlays: tuple[Path, ...] = (), extra_env: dict[str, str] | None = None,
        metrics_upstream: str | None = None, logs_upstream: str | None = None,
    ) -> Collector:
        """collector.yaml: straight to `upstream`, or with `gateways` (host:port each) the
        agent of two tiers, routing by trace id through its load_balancing exporter.
        `overlays` are further --config files merged over it (e.g. a resolver overlay).
        `metrics_upstream` is the OTLP/HTTP base its metrics pipeline exports to; by default
        a loopback port nothing listens on (the metrics wait in the queue, and no name
        outside this machine is ever looked up); `logs_upstream` (host:port, OTLP/gRPC) is
        its logs pipeline's, the same way."""
        ports = free_ports("otlp_grpc", "otlp_http", "health", "metrics", "metrics_upstream", "logs_upstream")
        tier = {}
        if gateways:
            tier = {
                "CAFE_AGENT_EXPORTER": "load_balancing",
                "CAFE_GATEWAYS": "[" + ", ".join(gateways) + "]",
                "CAFE_GATEWAY_TLS_INSECURE": "true",
            }
        env = {
            **tier,
            "CAFE_OTLP_GRPC_ENDPOINT": f"{LOOPBACK}:{ports['otlp_grpc']}",
            "CAFE_OTLP_HTTP_ENDPOINT": f"{LOOPBACK}:{ports['otlp_http']}",
            "CAFE_OTELCOL_HEALTH_ENDPOINT": f"{LOOPBACK}:{ports['health']}",
            "CAFE_OTELCOL_METRICS_HOST": LOOPBACK,
            "CAFE_OTELCOL_METRICS_PORT": str(ports["metrics"]),
            "CAFE_OTELCOL_QUEUE_DIR": str(queue_dir),
            "CAFE_UPSTREAM_OTLP_ENDPOINT": upstream,
            "CAFE_UPSTREAM_TLS_INSECURE": "true",
            "CAFE_METRICS_UPSTREAM_ENDPOINT": metrics_upstream or f"http://{LOOPBACK}:{ports['metrics_upstream']}",
            "CAFE_LOGS_UPSTREAM_OTLP_ENDPOINT": logs_upstream or f"{LOOPBACK}:{ports['logs_upstream']}",
            "CAFE_LOGS_UPSTREAM_TLS_INSECURE": "true",
            **(extra_env or {}),
        }
        return cls(
            "otelcol",
            [str(binary), *(f"--config={c}" for c in (COLLECTOR_CONFIG, *overlays))],
            env,
            workdir / "otelcol.log",
            f"http://{LOOPBACK}:{ports['health']}/",
            ports,
        )


class Gateway(OtelCol):
    """One Collector of the gateway tier (gateway.yaml): OTLP/gRPC in, tail sampling, OTLP/gRPC out."""

    @classmethod
    def create(
        cls,
        binary: Path,
        workdir: Path,
        upstream: str,
        name: str,
        *,
        sample_percent: float = 10.0,
        decision_wait: str = "60s",
        after_root: str = "5s",
        slow_shift_ms: int = 20000,
        logs_upstream: str | None = None,
    ) -> Gateway:
        """gateway.yaml, its traces to `upstream`, its log records to `logs_upstream` (host:port,
        OTLP/gRPC; by default a loopback port nothing listens on)."""
        ports = free_ports("otlp_grpc", "health", "metrics", "logs_upstream")
        env = {
            "CAFE_OTLP_GRPC_ENDPOINT": f"{LOOPBACK}:{ports['otlp_grpc']}",
            "CAFE_LOGS_UPSTREAM_OTLP_ENDPOINT": logs_upstream or f"{LOOPBACK}:{ports['logs_upstream']}",
            "CAFE_LOGS_UPSTREAM_TLS_INSECURE": "true",
            "CAFE_OTELCOL_HEALTH_ENDPOINT": f"{LOOPBACK}:{ports['health']}",
            "CAFE_OTELCOL_METRICS_HOST": LOOPBACK,
            "CAFE_OTELCOL_METRICS_PORT": str(ports["metrics"]),
            "CAFE_UPSTREAM_OTLP_ENDPOINT": upstream,
            "CAFE_UPSTREAM_TLS_INSECURE": "true",
            "CAFE_SAMPLE_PERCENT": f"{sample_percent:g}",
            "CAFE_TAIL_DECISION_WAIT": decision_wait,
            "CAFE_TAIL_DECISION_WAIT_AFTER_ROOT": after_root,
            "CAFE_SLOW_SHIFT_MS": str(slow_shift_ms),
        }
        return cls(
            name,
            [str(binary), f"--config={GATEWAY_CONFIG}"],
            env,
            workdir / f"{name}.log",
            f"http://{LOOPBACK}:{ports['health']}/",
            ports,
        )

    def undecided(self) -> float:
        """Traces received but not yet decided (0 when everything it holds is decided)."""
        received = self.metric("otelcol_processor_tail_sampling_new_trace_id_received")
        decided = self.metric("otelcol_processor_tail_sampling_global_count_traces_sampled")
        return received - decided
