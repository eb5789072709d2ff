"""The built Collector (and Jaeger behind it) for figures 3 and 4: the same `otelstack`
the end-to-end tests run (collector-config/collector.yaml unchanged, free 127.0.0.1 ports,
the persistent queue in a temporary directory), with a missing binary or a program that
does not come up reported as `StackUnavailable`, so that the figure shows as blocked."""

from __future__ import annotations

import socket
from pathlib import Path

from otelstack import BUILD_HINT, LOOPBACK, Collector, Jaeger, binary_path, usable


class StackUnavailable(RuntimeError):
    """A binary is missing or a program did not come up: the figure is reported as blocked."""


def _binary(env_var: str, name: str) -> Path:
    path, _ = binary_path(env_var, name)
    if not usable(path):
        raise StackUnavailable(f"{name} not found at {path}: {BUILD_HINT} (or set {env_var})")
    return path


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound a moment ago, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


class Stack:
    """Jaeger, and the Collector exporting to it. `otlp_grpc` is where spans go."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.jaeger: Jaeger | None = None
        self.collector: Collector | None = None

    def start(self) -> Stack:
        self.workdir.mkdir(parents=True, exist_ok=True)
        otelcol, jaeger = _binary("CAFE_OTELCOL_BIN", "otelcol-cafe"), _binary("CAFE_JAEGER_BIN", "jaeger")
        try:
            self.jaeger = Jaeger.create(jaeger, self.workdir)
            self.jaeger.start(timeout=60)
            self.collector = Collector.create(otelcol, self.workdir, upstream=self.jaeger.otlp_grpc,
                                              queue_dir=self.workdir / "queue")
            self.collector.start(timeout=60)
        except AssertionError as error:  # otelstack's waits fail as assertions (for pytest)
            self.stop()
            raise StackUnavailable(str(error).splitlines()[0]) from None
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
        assert self.collector is not None, "the stack is not started"
        return f"http://{self.collector.otlp_grpc}"

    def metric(self, name: str) -> float:
        """One of the Collector's own metrics (Prometheus), summed over labels."""
        assert self.collector is not None, "the stack is not started"
        return self.collector.metric(name)
