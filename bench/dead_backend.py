"""Figure 3: what a dead backend does to a batch of shifts and to process exit.

Each run is a fresh process (`python -m bench.dead_backend child ...`) that runs the same
batch of shifts (cafe's built-in shift, the scripted model answering after `latency`
seconds, one OTelTracer per shift), reports the wall time of the batch, then shuts
telemetry down and exits. The parent measures from the child's "last shift done"
timestamp to the moment the process has exited (its pipes closed).

Variants, interleaved pair by pair:
- ours, live: `cafe_otel.configure(endpoint=<the built Collector>)`, then
  `handle.shutdown()` (the library's default bound);
- ours, dead: the same with the endpoint on a closed 127.0.0.1 port;
- stock, dead (reference): the SDK's own `BatchSpanProcessor` + `OTLPSpanExporter` with
  their defaults, shut down by the provider's atexit hook as a default setup would be.
The lost spans are what the child's account says was dropped, against the spans made.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.stats import Paired, median
from bench.table import Figure

LATENCY = 0.005  # seconds a model call takes: a fast local model
SHORT_BOUND = 0.5  # an explicit handle.shutdown(timeout) for the second exit figure


def child(mode: str, endpoint: str, shifts: int, latency: float, bound: str = "default") -> None:
    import logging

    from cafe.counter import ScriptedClient, make_responder, run_shift
    from cafe.counter.demo import DEFAULT_DECISIONS, DEFAULT_SCRIPT

    logging.disable(logging.CRITICAL)  # the exporters' retry warnings are not the point here

    class SlowScripted(ScriptedClient):
        def chat(self, *args, **kwargs):
            time.sleep(latency)
            return super().chat(*args, **kwargs)

    handle = None
    if mode == "ours":
        import cafe_otel

        handle = cafe_otel.configure("bench-shifts", endpoint=endpoint, protocol="grpc", environ={})
        make_tracer = handle.tracer
    else:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from cafe_otel import OTelTracer

        provider = TracerProvider(resource=Resource({"service.name": "bench-shifts"}))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True)))

        def make_tracer():
            return OTelTracer(provider)

    spans = 0
    start = time.perf_counter()
    for index in range(shifts):
        tracer = make_tracer()
        run_shift(SlowScripted(), DEFAULT_SCRIPT, make_responder(DEFAULT_DECISIONS), tracer=tracer,
                  conversation_id=f"shift-{index}")
        spans += len(tracer.nodes())
    wall = time.perf_counter() - start
    done_at = time.time()
    report = {"wall": wall, "done_at": done_at, "spans": spans}
    if handle is not None:
        if bound == "default":
            handle.shutdown()
        else:
            handle.shutdown(float(bound))
        snap = handle.account.snapshot()
        report.update(exported=snap.exported, dropped=snap.dropped, last_error=snap.last_error)
    print(json.dumps(report), flush=True)
    # The stock variant is shut down by the provider's atexit hook, on the way out.


def run_child(mode: str, endpoint: str, shifts: int, latency: float = LATENCY, bound: str = "default") -> dict:
    argv = [sys.executable, "-m", "bench.dead_backend", "child", mode, endpoint, str(shifts), str(latency),
            bound]
    process = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                             env={**os.environ, "PYTHONWARNINGS": "ignore"})
    exited = time.time()
    if process.returncode != 0:
        raise RuntimeError(f"child {mode} failed ({process.returncode}): {process.stderr[-500:]}")
    report = json.loads(process.stdout.strip().splitlines()[-1])
    report["exit"] = exited - report["done_at"]
    return report


def run(workdir: Path, smoke: bool = False) -> list[Figure]:
    from bench.stack import Stack, StackUnavailable, closed_port

    shifts = 20 if smoke else 150
    repeats = 1 if smoke else 5
    dead = f"http://127.0.0.1:{closed_port()}"
    try:
        stack = Stack(workdir / "stack-dead-backend").start()
    except StackUnavailable as error:
        return [Figure(3, "shift wall time, dead / live backend", None, "x", "<= 1.05", None,
                       f"blocked: {error}")]
    reports: dict[str, list[dict]] = {"live": [], "dead": [], "stock_dead": [], "dead_short": []}
    try:
        for repeat in range(repeats):
            order = ["live", "dead"] if repeat % 2 == 0 else ["dead", "live"]
            for name in order:
                reports[name].append(run_child("ours", stack.otlp_grpc if name == "live" else dead, shifts))
            if repeat < 2:
                if not smoke:  # the stock SDK's exit alone takes 6-8 s
                    reports["stock_dead"].append(run_child("stock", dead, shifts))
                reports["dead_short"].append(run_child("ours", dead, shifts, bound=str(SHORT_BOUND)))
    finally:
        stack.stop()

    paired = Paired({name: [r["wall"] for r in reports[name]] for name in ("live", "dead")})
    ratio = paired.ratio("dead", "live")
    low, high = paired.spread("dead", "live")
    exit_dead = median([r["exit"] for r in reports["dead"]])
    exit_live = median([r["exit"] for r in reports["live"]])
    exit_stock = median([r["exit"] for r in reports["stock_dead"]]) if reports["stock_dead"] else None
    exit_short = median([r["exit"] for r in reports["dead_short"]])
    short = reports["dead_short"][-1]
    last = reports["dead"][-1]
    settled = all(r["exported"] + r["dropped"] == r["spans"] for r in reports["dead"] + reports["live"])
    live_lost = sum(r["dropped"] for r in reports["live"])
    return [
        Figure(3, "shift wall time, dead / live backend", ratio, "x", "<= 1.05", ratio <= 1.05,
               f"{shifts} shifts, model {LATENCY * 1000:.0f} ms a call; live "
               f"{paired.median('live'):.2f} s, dead {paired.median('dead'):.2f} s; {repeats} pairs, "
               f"range {low:.2f}-{high:.2f}"),
        Figure(3, "last shift to exit, dead backend (ours)", exit_dead, "s", "<= 1 s", exit_dead <= 1.0,
               f"handle.shutdown() at its default bound; lost {last['dropped']} of {last['spans']} spans, "
               f"all counted (exported+dropped=made in every run: {settled})"),
        Figure(3, f"last shift to exit, dead backend, shutdown({SHORT_BOUND:g})", exit_short, "s", "<= 1 s",
               exit_short <= 1.0, f"explicit bound; lost {short['dropped']} of {short['spans']} spans, counted"),
        Figure(3, "last shift to exit, live backend (ours)", exit_live, "s", "",
               note=f"{live_lost} spans lost over all live runs"),
        Figure(3, "last shift to exit, dead backend (stock SDK)", exit_stock, "s", "",
               note="reference: BatchSpanProcessor + OTLPSpanExporter defaults, atexit shutdown"
                    + ("" if reports["stock_dead"] else "; skipped in a smoke run")),
    ]


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), sys.argv[6])
    else:
        raise SystemExit("usage: python -m bench.dead_backend child MODE ENDPOINT SHIFTS LATENCY BOUND")
