"""Figure 5: resident memory while spans keep coming and the backend is dead.

A fresh process (`python -m bench.outage_memory child ...`) configures telemetry towards a
closed 127.0.0.1 port and runs cafe's built-in shift (scripted model, a fresh OTelTracer
per shift, 17 spans a shift) paced to `rate` spans a second for `seconds`. A sampler thread
reads VmRSS from /proc/self/status every 0.25 s. Growth is the peak minus the RSS after a
warm-up (configure + 2 s of emission, by which time the exporter has failed and retried).
After shutdown the account must settle every span made: exported + dropped = made.

The stock SDK (BatchSpanProcessor + OTLPSpanExporter defaults) runs the same emission as
the side-by-side reference; its drops cannot be counted (it keeps no public counter).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from bench.table import Figure

WARMUP = 2.0


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child(mode: str, endpoint: str, rate: float, seconds: float) -> None:
    import logging

    from cafe.counter import ScriptedClient, make_responder, run_shift
    from cafe.counter.demo import DEFAULT_DECISIONS, DEFAULT_SCRIPT

    logging.disable(logging.CRITICAL)
    handle = None
    if mode == "ours":
        import cafe_otel

        handle = cafe_otel.configure("bench-outage", endpoint=endpoint, protocol="grpc", environ={})
        make_tracer = handle.tracer
    else:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from cafe_otel import OTelTracer

        provider = TracerProvider(resource=Resource({"service.name": "bench-outage"}), shutdown_on_exit=False)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True)))

        def make_tracer():
            return OTelTracer(provider)

    samples: list[tuple[float, float]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append((time.monotonic(), rss_mb()))
            stop.wait(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    start = time.monotonic()
    sampler.start()
    made = 0
    while True:
        elapsed = time.monotonic() - start
        if elapsed >= seconds + WARMUP:
            break
        if made >= rate * elapsed:
            time.sleep(min(0.005, (made - rate * elapsed) / rate + 0.0005))
            continue
        tracer = make_tracer()
        run_shift(ScriptedClient(), DEFAULT_SCRIPT, make_responder(DEFAULT_DECISIONS), tracer=tracer)
        made += len(tracer.nodes())
    elapsed = time.monotonic() - start
    stop.set()
    sampler.join()
    after_warmup = [mb for at, mb in samples if at - start >= WARMUP]
    report = {
        "made": made, "rate": made / elapsed, "baseline_mb": after_warmup[0] if after_warmup else None,
        "peak_mb": max(after_warmup) if after_warmup else None, "end_mb": after_warmup[-1] if after_warmup else None,
    }
    if handle is not None:
        handle.shutdown(1.0)
        snap = handle.account.snapshot()
        report.update(exported=snap.exported, dropped=snap.dropped, queue_full=snap.dropped_queue_full,
                      export_failed=snap.dropped_export_failed, unflushed=snap.dropped_unflushed)
    print(json.dumps(report), flush=True)
    os._exit(0)  # the stock exporter's atexit flush against a dead port is not part of this figure


def run_child(mode: str, endpoint: str, rate: float, seconds: float) -> dict:
    argv = [sys.executable, "-m", "bench.outage_memory", "child", mode, endpoint, str(rate), str(seconds)]
    process = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 300)
    if process.returncode != 0:
        raise RuntimeError(f"child {mode} failed ({process.returncode}): {process.stderr[-500:]}")
    return json.loads(process.stdout.strip().splitlines()[-1])


def run(smoke: bool = False) -> list[Figure]:
    from bench.stack import closed_port

    seconds = 3.0 if smoke else 60.0
    rate = 1_000.0
    dead = f"http://127.0.0.1:{closed_port()}"
    ours = run_child("ours", dead, rate, seconds)
    growth = ours["peak_mb"] - ours["baseline_mb"]
    stock = None if smoke else run_child("stock", dead, rate, seconds)
    settled = ours["exported"] + ours["dropped"] == ours["made"]
    return [
        Figure(5, f"RSS growth, {rate:,.0f} spans/s for {seconds:g} s, dead backend", growth, "MB", "<= 50 MB",
               growth <= 50, f"ours: {ours['baseline_mb']:.1f} -> peak {ours['peak_mb']:.1f} MB; "
                             f"achieved {ours['rate']:,.0f} spans/s"),
        Figure(5, "dropped spans counted in the account", ours["dropped"], "spans", "all counted", settled,
               f"made {ours['made']:,}, exported {ours['exported']}, dropped {ours['dropped']:,} "
               f"(export failed {ours['export_failed']:,}, queue full {ours['queue_full']:,}, "
               f"unflushed {ours['unflushed']:,})"),
        Figure(5, "RSS growth, stock SDK, same emission",
               stock["peak_mb"] - stock["baseline_mb"] if stock else None, "MB", "",
               note=(f"reference: {stock['baseline_mb']:.1f} -> peak {stock['peak_mb']:.1f} MB; "
                     f"achieved {stock['rate']:,.0f} spans/s; its drops are not counted anywhere")
               if stock else "reference, skipped in a smoke run"),
    ]


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "child":
        child(sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]))
    else:
        raise SystemExit("usage: python -m bench.outage_memory child MODE ENDPOINT RATE SECONDS")
