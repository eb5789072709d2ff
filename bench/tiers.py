"""Figure 8: what a Collector of each tier costs, in spans accepted per second of its own CPU.

Three Collectors, each measured alone, the built otelcol-cafe on the shipped configs:
- the agent, one tier (collector.yaml: redaction, fsync'd persistent queue, OTLP out);
- the agent, two tiers (the same file with CAFE_AGENT_EXPORTER=load_balancing);
- one gateway (gateway.yaml: redaction, tail sampling at the shipped defaults, OTLP out).
Each exports to a sink (bench/sink.yaml: another otelcol-cafe that logs one line per
thousand batches and keeps nothing), so no backend's writes share the two cores.

The sender is another process (`python -m bench.tiers send ...`): shift-shaped traces
(11 spans: the agent span with cafe.stop_reason, setup, three turns, three chats, two
tool calls, wrapup; 2 in 100 end in turn_cap) written as OTLP protobuf once and re-sent
with fresh trace ids, over 4 gRPC streams, paced at one rate for all three. Python's SDK tops out near 5,000
spans/s here (figure 4), far below what one Collector takes, so it is not the sender.

The count is the Collector's own `otelcol_receiver_accepted_spans`; the cost is its
process's CPU time (utime + stime from /proc) from before the first span until it has
finished with the last (queue drained; for the gateway, every trace decided and the
kept ones sent). spans / CPU-second = spans per second per core, whatever else the
machine was doing. Peak RSS is sampled every 0.2 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.table import Figure

SHIFTS_PER_REQUEST = 50  # 550 spans a request, about what an SDK batch of 512 is
STREAMS = 4
FAILED_EVERY = 50  # 1 shift in 50 ends in turn_cap: kept by the gateway whatever the rate
SINK_CONFIG = Path(__file__).with_name("sink.yaml")


# ---- the sender (child process) ---------------------------------------------------------

def _request_template():  # -> (ExportTraceServiceRequest, list of (span, shift index))
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

    def attrs(**values: object) -> list:
        out = []
        for key, value in values.items():
            key = key.replace("__", ".")
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                out.append(KeyValue(key=key, value=AnyValue(string_value=str(value))))
            elif isinstance(value, int):
                out.append(KeyValue(key=key, value=AnyValue(int_value=value)))
            else:
                out.append(KeyValue(key=key, value=AnyValue(double_value=value)))
        return out

    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    resource.resource.attributes.extend(attrs(service__name="bench-tiers", service__version="bench"))
    scope = resource.scope_spans.add()
    scope.scope.name = "cafe_otel"
    scope.schema_url = "https://opentelemetry.io/schemas/1.41.1"
    now = time.time_ns()
    chat = dict(gen_ai__operation__name="chat", gen_ai__provider__name="openai",
                gen_ai__request__model="gpt-4o-mini", gen_ai__response__model="gpt-4o-mini-2024-07-18",
                gen_ai__response__id="chatcmpl-bench", gen_ai__usage__input_tokens=741,
                gen_ai__usage__output_tokens=31, gen_ai__request__temperature=0.0)
    tool = dict(gen_ai__operation__name="execute_tool", gen_ai__tool__name="price_check",
                gen_ai__tool__call__id="call_1", gen_ai__tool__type="function", cafe__tool__status="ok")
    members = []
    for shift in range(SHIFTS_PER_REQUEST):
        stop = "turn_cap" if shift % FAILED_EVERY == 0 else "answered"
        shape = [  # (name, parent index, kind, attributes)
            ("invoke_agent cafe-counter", None, Span.SPAN_KIND_INTERNAL,
             dict(gen_ai__operation__name="invoke_agent", gen_ai__agent__name="cafe-counter",
                  gen_ai__provider__name="openai", gen_ai__conversation__id="shift-1",
                  cafe__stop_reason=stop, cafe__shift__turns=3, cafe__shift__tickets=0)),
            ("setup", 0, Span.SPAN_KIND_INTERNAL, dict(cafe__phase="setup")),
            ("turn 1", 0, Span.SPAN_KIND_INTERNAL, dict(cafe__phase="turn", cafe__turn=1)),
            ("chat gpt-4o-mini", 2, Span.SPAN_KIND_CLIENT, chat),
            ("execute_tool price_check", 2, Span.SPAN_KIND_INTERNAL, tool),
            ("execute_tool price_check", 2, Span.SPAN_KIND_INTERNAL, tool),
            ("turn 2", 0, Span.SPAN_KIND_INTERNAL, dict(cafe__phase="turn", cafe__turn=2)),
            ("chat gpt-4o-mini", 6, Span.SPAN_KIND_CLIENT, chat),
            ("turn 3", 0, Span.SPAN_KIND_INTERNAL, dict(cafe__phase="turn", cafe__turn=3)),
            ("chat gpt-4o-mini", 8, Span.SPAN_KIND_CLIENT, chat),
            ("wrapup", 0, Span.SPAN_KIND_INTERNAL, dict(cafe__phase="wrapup")),
        ]
        ids = [(shift * 16 + n + 1).to_bytes(8, "big") for n in range(len(shape))]
        # Children first, the root last: the order in which a shift's spans end and are sent.
        for n in [*range(1, len(shape)), 0]:
            name, parent, kind, values = shape[n]
            span = scope.spans.add(name=name, span_id=ids[n], kind=kind,
                                   start_time_unix_nano=now + n * 1_000_000,
                                   end_time_unix_nano=now + n * 1_000_000 + 500_000,
                                   status=Status(code=Status.STATUS_CODE_UNSET))
            if parent is not None:
                span.parent_span_id = ids[parent]
            span.attributes.extend(attrs(**values))
            members.append((span, shift))
    return request, members


def send(endpoint: str, seconds: float, rate: float) -> None:
    """Send for `seconds` at `rate` spans/s in all (0: as fast as the streams go)."""
    import grpc

    template, members = _request_template()
    lock = threading.Lock()
    totals = {"spans": 0, "failed": 0}
    deadline = time.monotonic() + seconds

    def stream() -> None:
        request = type(template)()
        request.CopyFrom(template)
        spans = [(request.resource_spans[0].scope_spans[0].spans[i], shift)
                 for i, (_, shift) in enumerate(members)]
        channel = grpc.insecure_channel(endpoint)
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        sent = failed = 0
        began = time.monotonic()
        while time.monotonic() < deadline:
            if rate and (sent + failed) > rate / STREAMS * (time.monotonic() - began):
                time.sleep(0.002)
                continue
            trace_ids = [os.urandom(16) for _ in range(SHIFTS_PER_REQUEST)]
            for span, shift in spans:
                span.trace_id = trace_ids[shift]
            try:
                export(request.SerializeToString(), timeout=10)
                sent += len(spans)
            except grpc.RpcError:
                failed += len(spans)
        channel.close()
        with lock:
            totals["spans"] += sent
            totals["failed"] += failed

    started = time.monotonic()
    workers = [threading.Thread(target=stream) for _ in range(STREAMS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    print(json.dumps({**totals, "seconds": time.monotonic() - started}), flush=True)


# ---- the parent: programs, trials, figures ----------------------------------------------

def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _sink(binary: Path, workdir: Path):
    from otelstack import LOOPBACK, Proc, free_ports

    ports = free_ports("otlp_grpc", "health")
    return Proc("sink", [str(binary), f"--config={SINK_CONFIG}"],
                {"CAFE_OTLP_GRPC_ENDPOINT": f"{LOOPBACK}:{ports['otlp_grpc']}",
                 "CAFE_OTELCOL_HEALTH_ENDPOINT": f"{LOOPBACK}:{ports['health']}"},
                workdir / "sink.log", f"http://{LOOPBACK}:{ports['health']}/", ports)


def _held_traces(program) -> float:
    return program.metric("otelcol_processor_tail_sampling_sampling_traces_on_memory")


def _trial(program, seconds: float, rate: float, finished) -> dict:
    """Send for `seconds` into `program`; CPU and accepted spans until `finished(program)`."""
    from otelstack import Gateway, wait_for

    pid = program.popen.pid
    accepted0, cpu0 = program.metric("otelcol_receiver_accepted_spans"), _cpu_seconds(pid)
    refused0 = program.metric("otelcol_receiver_refused_spans")
    base_rss = _rss_mb(pid)
    argv = [sys.executable, "-m", "bench.tiers", "send", program.otlp_grpc, str(seconds), str(rate)]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = held = 0.0
    while child.poll() is None:
        peak = max(peak, _rss_mb(pid))
        if isinstance(program, Gateway):
            held = max(held, _held_traces(program))
        time.sleep(0.5)
    out, err = child.communicate(timeout=30)
    if child.returncode != 0:
        raise RuntimeError(f"sender failed ({child.returncode}): {err[-500:]}")
    report = json.loads(out.strip().splitlines()[-1])
    wait_for(f"{program.name} to finish its work", lambda: finished(program) or None, 120, interval=0.5)
    report["accepted"] = program.metric("otelcol_receiver_accepted_spans") - accepted0
    report["cpu"] = _cpu_seconds(pid) - cpu0
    report["per_core"] = report["accepted"] / report["cpu"] if report["cpu"] else None
    report["rate"] = report["accepted"] / report["seconds"]
    report["refused"] = program.metric("otelcol_receiver_refused_spans") - refused0
    report["peak_rss_mb"] = peak
    report["base_rss_mb"] = base_rss
    report["held_traces"] = held
    return report


def _queue_empty(program) -> bool:
    return program.metric("otelcol_exporter_queue_size") == 0


def _gateway_done(program) -> bool:
    return program.undecided() == 0 and _queue_empty(program)


def run(workdir: Path, smoke: bool = False) -> list[Figure]:
    from bench.stack import StackUnavailable, _binary
    from otelstack import Collector, Gateway

    seconds = 2.0 if smoke else 15.0
    # Paced at what each tier sustains here without refusing (unpaced, the agent's disk
    # queue fills and it refuses; the gateway takes ~150K/s and ~2 GB): cost per span at
    # a steady load, not at overload.
    rate = 20_000.0 if smoke else 40_000.0
    try:
        binary = _binary("CAFE_OTELCOL_BIN", "otelcol-cafe")
    except StackUnavailable as error:
        return [Figure(8, "Collector spans/s per core", None, "spans/s/core", note=f"blocked: {error}")]
    workdir.mkdir(parents=True, exist_ok=True)
    sink = _sink(binary, workdir)
    results: dict[str, dict] = {}
    programs = []
    try:
        sink.start(timeout=60)
        sink_address = f"127.0.0.1:{sink.ports['otlp_grpc']}"
        cases = [
            ("agent, one tier", lambda: Collector.create(binary, workdir / "a1", sink_address, workdir / "q1"),
             _queue_empty),
            ("agent, two tiers", lambda: Collector.create(binary, workdir / "a2", "unused:1", workdir / "q2",
                                                          gateways=[sink_address]), _queue_empty),
            ("gateway, tail sampling", lambda: Gateway.create(binary, workdir / "g", sink_address, "gateway"),
             _gateway_done),
        ]
        for name, make, finished in cases:
            program = make()
            program.log_path.parent.mkdir(parents=True, exist_ok=True)
            programs.append(program)
            program.start(timeout=60)
            results[name] = _trial(program, seconds, rate, finished)
            if name.startswith("gateway"):
                kept = sum(v for labels, v in program.samples(
                    "otelcol_processor_tail_sampling_global_count_traces_sampled") if labels.get("sampled") == "true")
                decided = program.metric("otelcol_processor_tail_sampling_global_count_traces_sampled")
                results[name]["kept"] = kept / decided if decided else None
            program.stop()
    finally:
        for program in [*programs, sink]:
            program.stop()

    figures = []
    for name, r in results.items():
        note = (f"accepted {r['accepted']:,.0f} spans in {r['seconds']:.1f} s ({r['rate']:,.0f}/s, paced at "
                f"{rate:,.0f}) for {r['cpu']:.1f} CPU-s; refused {r['refused']:,.0f}; "
                f"peak RSS {r['peak_rss_mb']:.0f} MB")
        if r.get("kept") is not None:
            note += f"; kept {100 * r['kept']:.1f}% of traces (10% + 1 in {FAILED_EVERY} failed)"
        if r["held_traces"]:
            per_span = (r["peak_rss_mb"] - r["base_rss_mb"]) * 2**20 / (r["held_traces"] * 11)
            note += (f"; up to {r['held_traces']:,.0f} traces awaiting a decision, "
                     f"~{per_span:,.0f} bytes of RSS per span held")
        figures.append(Figure(8, f"{name}: spans/s per core", r["per_core"], "spans/s/core", note=note))
    figures.append(Figure(8, "reference: plain OTLP in, OTLP out", None, "", note=(
        "the Collector project's published figure is about 10-12K spans/s per core; bench/README.md compares")))
    return figures


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "send":
        send(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]))
    else:
        raise SystemExit("usage: python -m bench.tiers send ENDPOINT SECONDS RATE")
