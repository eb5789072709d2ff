"""Figure 4: how many spans a second one process can send into the built Collector with
none lost, and exactly what is lost past that rate.

The Collector is the shipped collector-config/collector.yaml (memory_limiter, redaction,
persistent fsync'd queue, OTLP/gRPC to Jaeger), on 127.0.0.1 (bench/stack.py). The sender
is a fresh process (`python -m bench.throughput child ...`) emitting GenAI `chat` spans
(the attributes of one model call) with the OTel tracer of a provider, paced to a target
rate, through cafe_otel's chain (BoundedBatchSpanProcessor, the metadata-only check on its
worker and the fail-soft boundary included, -> OTLP/gRPC) as `cafe_otel.configure` builds it, with the queue,
batch size and delay of each trial. At the end the child flushes with `shutdown(30)`.

"Sent" is every span the process made. Lost = made - the Collector's own
`otelcol_receiver_accepted_spans` increase (scraped from its Prometheus endpoint once it
stops moving); the account's dropped count must say the same. Steps:
1. each processor setting runs unpaced for a short trial; the one delivering most wins;
2. a search for the highest paced rate with zero lost (short trials);
3. that rate for the full duration (the figure), and the unpaced rate for the full
   duration (what is lost past it, exactly counted);
4. for reference, cafe's built-in shift (a fresh OTelTracer per shift, 17 spans a shift)
   unpaced: the realistic emission, whose own CPU cost is the limit.
Bare spans are used for 1-3 because a shift costs the sender so much CPU that it can never
outrun the pipeline, and the figure is about the pipeline.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from bench.table import Figure

SETTINGS = (  # (max_queue_size, max_export_batch_size, schedule_delay seconds)
    (2048, 512, 1.0),  # configure()'s defaults
    (8192, 512, 0.2),
    (8192, 2048, 0.5),
    (32768, 4096, 0.5),
)


GEN_START = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
             "gen_ai.request.model": "gpt-4o-mini"}
GEN_END = {"gen_ai.request.temperature": 0.0, "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
           "gen_ai.response.id": "chatcmpl-bench", "gen_ai.response.finish_reasons": ("stop",),
           "gen_ai.usage.input_tokens": 741, "gen_ai.usage.output_tokens": 31}


def child(endpoint: str, rate: float, seconds: float, queue: int, batch: int, delay: float,
          mode: str = "spans") -> None:
    import logging

    import cafe_otel
    from cafe.counter import ScriptedClient, make_responder, run_shift
    from cafe.counter.demo import DEFAULT_DECISIONS, DEFAULT_SCRIPT

    logging.disable(logging.CRITICAL)
    handle = cafe_otel.configure("bench-throughput", endpoint=endpoint, protocol="grpc", environ={},
                                 batch=cafe_otel.BatchOptions(max_queue_size=queue, max_export_batch_size=batch,
                                                              schedule_delay=delay, shutdown_timeout=30.0))
    provider, account = handle.provider, handle.account

    from opentelemetry.trace import SpanKind

    bare = provider.get_tracer("bench.throughput")

    def emit_shift() -> int:
        tracer = handle.tracer()
        run_shift(ScriptedClient(), DEFAULT_SCRIPT, make_responder(DEFAULT_DECISIONS), tracer=tracer)
        return len(tracer.nodes())

    def emit_spans(count: int = 20) -> int:
        for _ in range(count):
            with bare.start_as_current_span("chat gpt-4o-mini", kind=SpanKind.CLIENT, attributes=GEN_START) as span:
                span.set_attributes(GEN_END)
        return count

    emit = emit_shift if mode == "shifts" else emit_spans
    made = 0
    start = time.monotonic()
    while True:
        elapsed = time.monotonic() - start
        if elapsed >= seconds:
            break
        if rate > 0 and made >= rate * elapsed:
            time.sleep(min(0.005, (made - rate * elapsed) / rate + 0.0002))
            continue
        made += emit()
    elapsed = time.monotonic() - start
    flush_started = time.monotonic()
    handle.shutdown(30.0)
    snap = account.snapshot()
    print(json.dumps({
        "made": made, "seconds": elapsed, "flush": time.monotonic() - flush_started,
        "exported": snap.exported, "dropped": snap.dropped, "queue_full": snap.dropped_queue_full,
        "export_failed": snap.dropped_export_failed, "unflushed": snap.dropped_unflushed,
    }), flush=True)


def trial(stack, rate: float, seconds: float, setting: tuple[int, int, float], mode: str = "spans") -> dict:
    before = stack.metric("otelcol_receiver_accepted_spans")
    refused_before = stack.metric("otelcol_receiver_refused_spans")
    queue, batch, delay = setting
    argv = [sys.executable, "-m", "bench.throughput", "child", stack.otlp_grpc, str(rate), str(seconds),
            str(queue), str(batch), str(delay), mode]
    process = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 120)
    if process.returncode != 0:
        raise RuntimeError(f"throughput child failed ({process.returncode}): {process.stderr[-500:]}")
    report = json.loads(process.stdout.strip().splitlines()[-1])
    # Wait for the receiver's counter to settle (it counts as requests complete).
    accepted, steady_since = stack.metric("otelcol_receiver_accepted_spans"), time.monotonic()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = stack.metric("otelcol_receiver_accepted_spans")
        if now != accepted:
            accepted, steady_since = now, time.monotonic()
        elif accepted - before >= report["exported"] or time.monotonic() - steady_since > 2:
            break
    report["accepted"] = int(accepted - before)
    report["refused"] = int(stack.metric("otelcol_receiver_refused_spans") - refused_before)
    report["lost"] = report["made"] - report["accepted"]
    report["rate_made"] = report["made"] / report["seconds"]
    report["rate_delivered"] = report["accepted"] / report["seconds"]
    report["setting"] = setting
    return report


def run(workdir: Path, smoke: bool = False) -> list[Figure]:
    from bench.stack import Stack, StackUnavailable

    full = 3.0 if smoke else 30.0
    short = 1.5 if smoke else 6.0
    try:
        stack = Stack(workdir / "stack-throughput").start()
    except StackUnavailable as error:
        return [Figure(4, "spans/s into the Collector, zero lost", None, "spans/s", "zero lost", None,
                       f"blocked: {error}")]
    log: list[str] = []
    try:
        settings = SETTINGS[1:2] if smoke else SETTINGS
        probes = [trial(stack, 0, short, setting) for setting in settings]
        log += [f"{p['setting']}: unpaced {p['rate_made']:,.0f}/s for {short:g}s, lost {p['lost']:,}"
                for p in probes]
        best = max(probes, key=lambda r: (r["lost"] == 0, r["rate_delivered"]))
        setting = best["setting"]
        unpaced = trial(stack, 0, full, setting)
        log.append(f"best {setting} unpaced for {full:g}s: {unpaced['rate_made']:,.0f}/s, lost {unpaced['lost']:,}")
        if unpaced["lost"] == 0:
            # The sender's own CPU is the limit: nothing this process can emit is lost.
            confirmed, target_rate = unpaced, unpaced["rate_made"]
        else:
            low, high = 0.0, unpaced["rate_delivered"]
            for _ in range(1 if smoke else 3):
                mid = (low + high) / 2 if low else high * 0.8
                probe = trial(stack, mid, short, setting)
                log.append(f"paced {mid:,.0f}/s: lost {probe['lost']:,}")
                if probe["lost"] == 0:
                    low = mid
                else:
                    high = mid
            target_rate = low or high * 0.5
            confirmed = trial(stack, target_rate, full, setting)
            if confirmed["lost"]:
                log.append(f"paced {target_rate:,.0f}/s for {full:g}s lost {confirmed['lost']:,}; retried at 80%")
                target_rate *= 0.8
                confirmed = trial(stack, target_rate, full, setting)
        # Past the rate: the unpaced sender where it loses; with the defaults if the best never does.
        if unpaced["lost"]:
            past, past_setting = unpaced, setting
        else:
            past_setting = SETTINGS[0]
            past = trial(stack, 0, full, past_setting)
        shifts = None if smoke else trial(stack, 0, short, setting, mode="shifts")
    finally:
        stack.stop()

    queue, batch, delay = setting
    clean = confirmed["lost"] == 0 and confirmed["dropped"] == 0
    counted = past["made"] - past["exported"] == past["dropped"] and past["exported"] == past["accepted"]
    return [
        Figure(4, f"spans/s into the Collector for {full:g} s, zero lost", confirmed["rate_made"], "spans/s",
               "zero lost", clean,
               f"made {confirmed['made']:,} = accepted {confirmed['accepted']:,} (otelcol_receiver_accepted_spans); "
               f"queue {queue}, batch {batch}, delay {delay:g}s"
               + ("; unpaced: the sender's CPU is the limit" if confirmed is unpaced
                  else f"; paced at {target_rate:,.0f}/s")),
        Figure(4, "past it: spans lost, exactly counted", past["lost"], "spans", "exactly counted", counted,
               f"unpaced with queue {past_setting[0]}, batch {past_setting[1]}, delay {past_setting[2]:g}s: "
               f"made {past['made']:,} at {past['rate_made']:,.0f}/s, accepted {past['accepted']:,}; account "
               f"dropped {past['dropped']:,} (queue full {past['queue_full']:,}, export failed "
               f"{past['export_failed']:,}, unflushed {past['unflushed']:,}); "
               f"refused by the collector {past['refused']:,}"),
        Figure(4, "cafe shifts, unpaced, same settings", shifts["rate_made"] if shifts else None, "spans/s", "",
               note=f"the realistic mix (17 spans a shift, OTelTracer): made {shifts['made']:,}, "
                    f"lost {shifts['lost']:,}" if shifts else "skipped in a smoke run"),
        Figure(4, "settings tried", None, "", "", note="; ".join(log)),
    ]


if __name__ == "__main__":
    if len(sys.argv) == 9 and sys.argv[1] == "child":
        child(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]),
              float(sys.argv[7]), sys.argv[8])
    else:
        raise SystemExit("usage: python -m bench.throughput child ENDPOINT RATE SECONDS QUEUE BATCH DELAY MODE")
