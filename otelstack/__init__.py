"""The built Collector and Jaeger, run as subprocesses on 127.0.0.1: the development stack
without Docker that the end-to-end tests and the benchmarks share.

`scripts/build-otel-binaries.sh` builds the binaries; `collector-config/` holds the
configurations they run, parameterised by environment variables (ports, queue directory).
"""

from otelstack.binaries import BUILD_HINT, binary_path, usable
from otelstack.layout import COLLECTOR_CONFIG, GATEWAY_CONFIG, JAEGER_CONFIG, REPO
from otelstack.procs import LOOPBACK, Collector, Gateway, Jaeger, Proc, free_ports, http_get, wait_for

__all__ = [
    "BUILD_HINT",
    "COLLECTOR_CONFIG",
    "GATEWAY_CONFIG",
    "JAEGER_CONFIG",
    "LOOPBACK",
    "REPO",
    "Collector",
    "Gateway",
    "Jaeger",
    "Proc",
    "binary_path",
    "free_ports",
    "http_get",
    "usable",
    "wait_for",
]
