"""GenAI metrics through the real Collector's metrics pipeline: what the backend receives adds
up to the shift, carries no customer text, and says which call failed.

The backend here is a small OTLP/HTTP receiver on 127.0.0.1 (locally, compose puts
Prometheus's OTLP receiver there): the Collector in the middle is the built one, with the
shipped collector.yaml (memory limit, the metrics allowlist, the persistent queue).
"""

from __future__ import annotations

import gzip
import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

import cafe
from cafe import counter
from cafe.counter.clients.canned import CannedClient, CannedRepliesExhausted
from cafe_otel import BatchOptions, configure
from otelstack import Collector, Jaeger

pytestmark = pytest.mark.e2e

CANARY = "CANARY-metric-text-51c2"


class MetricsBackend:
    """Keeps every OTLP/HTTP metrics request it is sent."""

    def __init__(self) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []
        self.raw: list[bytes] = []
        backend = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                backend.raw.append(body)
                backend.requests.append(ExportMetricsServiceRequest.FromString(body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def points(self, name: str) -> list[Any]:
        return [point for request in self.requests for rm in request.resource_metrics for sm in rm.scope_metrics
                for metric in sm.metrics if metric.name == name
                for point in getattr(metric, metric.WhichOneof("data")).data_points]


@pytest.fixture
def backend() -> Iterator[MetricsBackend]:
    found = MetricsBackend()
    yield found
    found.server.shutdown()
    found.server.server_close()


def _attributes(point: Any) -> dict[str, Any]:
    return {kv.key: kv.value.string_value or kv.value.int_value for kv in point.attributes}


def _latest(points: list[Any]) -> dict[tuple[tuple[str, Any], ...], Any]:
    """The last point of each attribute set (cumulative points repeat at every export)."""
    found: dict[tuple[tuple[str, Any], ...], Any] = {}
    for point in points:
        found[tuple(sorted(_attributes(point).items()))] = point
    return found


def _wait_for(what: str, check: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def test_metrics_through_the_collector_add_up_to_the_shift(
    otelcol_bin: Path, jaeger: Jaeger, tmp_path: Path, procs: list, backend: MetricsBackend,
) -> None:
    collector = Collector.create(otelcol_bin, tmp_path, upstream=jaeger.otlp_grpc, queue_dir=tmp_path / "queue",
                                 metrics_upstream=backend.url)
    procs.append(collector)
    collector.start()
    handle = configure("e2e-metrics", endpoint=f"http://{collector.otlp_grpc}", protocol="grpc", environ={})

    tracer = handle.tracer()
    run = counter.run_shift(counter.ScriptedClient(), [f"A latte and a chocolate croissant, please. {CANARY}",
                                                f"Nothing else, thanks. {CANARY}"],
                         counter.make_responder([]), tracer=tracer)
    failing = handle.tracer()
    with pytest.raises(CannedRepliesExhausted):  # the second call fails
        counter.run_shift(CannedClient([{"content": f"Hello {CANARY}"}]), ["Hi.", f"And? {CANARY}"],
                       counter.make_responder([]), tracer=failing)
    handle.shutdown(5.0)
    assert handle.account.snapshot().metric_points_dropped == 0, handle.account.summary()

    usage = cafe.usage_of(tracer)
    tokens = _wait_for("token usage points at the backend", lambda: _latest(
        backend.points("gen_ai.client.token.usage")))
    scripted = {dict(key)["gen_ai.token.type"]: point.sum for key, point in tokens.items()
                if dict(key)["gen_ai.request.model"] == "scripted-barista-1"}
    assert scripted == {"input": usage.input_tokens, "output": usage.output_tokens}

    durations = _latest(backend.points("gen_ai.client.operation.duration"))
    ok = [p for key, p in durations.items() if dict(key)["gen_ai.request.model"] == "scripted-barista-1"]
    assert [p.count for p in ok] == [usage.calls] == [run.model_calls]
    failed = [dict(key) for key in durations if "error.type" in dict(key)]
    assert failed == [{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "cafe.canned",
                       "gen_ai.request.model": "canned-barista-1", "error.type": "CannedRepliesExhausted"}]

    shifts = {dict(key).get("cafe.stop_reason"): p.as_int for key, p in _latest(backend.points("cafe.shifts")).items()}
    assert shifts[run.stop_reason] == 1

    assert all(CANARY.encode() not in raw for raw in backend.raw)  # no customer text on any metric
    assert all(b"shift-" not in raw for raw in backend.raw)  # nor the conversation id


def test_a_dead_metrics_backend_costs_the_shift_nothing_and_is_counted(tmp_path: Path) -> None:
    handle = configure("e2e-metrics", endpoint="http://127.0.0.1:9", protocol="grpc", environ={},
                       batch=BatchOptions(export_timeout=0.5))
    started = time.monotonic()
    run = counter.run_shift(counter.ScriptedClient(), list(counter.DEFAULT_SCRIPT), counter.make_responder([]),
                         tracer=handle.tracer())
    shift_seconds = time.monotonic() - started
    handle.shutdown(0.5)
    assert run.stop_reason == "answered" and shift_seconds < 1.0
    snapshot = handle.account.snapshot()
    assert snapshot.metric_points_exported == 0 and snapshot.metric_points_dropped == 7  # the order rejected: 4 calls
