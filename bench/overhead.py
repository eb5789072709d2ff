"""Figure 1: what our instrumentation costs per model call, against the bare OTel SDK.

Candidate (the full cafe_otel path for one generation, spans and metrics on, content off):
`cafe_otel.configure(exporter=a do-nothing exporter, metric_exporter=a do-nothing one)` ->
`handle.tracer(tree=False)` (a cafe Tracer whose listeners are the SpanListener and the
handle's MetricsListener, recording into its in-process streams) -> cafe's `TracingClient`
around a local client that answers at once. One `chat` = the generation's two typed events
(no copy of the input: content is off), the current-span stand-in attached and detached,
the OTel span made at the end in one `start_span` with the GenAI start and end attributes,
the MetadataOnlySpanProcessor's check, the enqueue into cafe_otel's batch processor (whose
worker hands batches to the exporter through the fail-soft boundary), and the three GenAI
histogram records (input and output tokens, duration). Also measured: spans only; a client
that reports a network endpoint (its span is started, made current and ended the usual
way); the MetricsListener on an SDK MeterProvider's instruments instead of our streams;
the in-memory tree (`handle.tracer()`, what the CLI uses to render the shift); content on.

Baseline (the bare SDK doing the same span): a `TracerProvider` with the SDK's stock
`BatchSpanProcessor` over the same do-nothing exporter; `start_as_current_span` with the
same name, kind and start attributes, `set_attributes` with the same end attributes, end.
The attributes are the ones our path really exported for the same call (captured once
through an in-memory exporter), so both spans carry identical data.

Each variant runs `ops` calls per sample, all variants interleaved per repeat; the ratio
is the median of the per-repeat ratios. Two costs are figures, each against the bare SDK:
what the calling thread pays (wall time of the loop, what the application feels on its
request path) and what the whole process pays (the CPU time of every thread over the loop
and a flush that lets the export worker finish the sample's spans: the metadata-only check
runs there). Both are also counted in CPU instructions by callgrind (`bench/instructions.py`),
which the machine's load cannot move: those give the verdicts.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from bench import instructions
from bench.nothing import NothingExporter
from bench.stats import Paired, interleaved
from bench.table import Figure
from bench.workload import (
    InstantClient,
    InstantNetworkClient,
    _call,
    _configure,
    exported_shape,
)
from cafe.counter.clients.tracing import TracingClient
from cafe.trace.tracer import NullTracer


def _meter_provider():
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    # Collected never during the run: what is timed is the recording, as on a live shift.
    return MeterProvider(metric_readers=[InMemoryMetricReader()], shutdown_on_exit=False)


def run(workdir: Path, smoke: bool = False) -> list[Figure]:
    ops = 300 if smoke else 3_000
    repeats = 3 if smoke else 15
    call = _call()
    name, kind, start_attrs, end_attrs = exported_shape(False)
    _, _, c_start, c_end = exported_shape(True)

    handles = []
    # Seconds of CPU a call over every thread, loop and flush, by variant, one per repeat.
    process: dict[str, list[float]] = {}

    from cafe_otel._metrics.listener import MetricsListener

    meters = _meter_provider()

    def ours(capture: bool, metadata_only: bool = True, *, tree: bool = False, metrics: bool = True,
             sdk_metrics: bool = False, client: type[InstantClient] = InstantClient, key: str = ""):
        handle = _configure(capture, NothingExporter(), metadata_only, metrics=metrics and not sdk_metrics)
        handles.append(handle)
        listener = MetricsListener(meters.get_meter(f"bench.{len(handles)}")) if sdk_metrics else None

        def sample() -> float:
            # A tracer holds one shift: a fresh one per sample, as per shift.
            tracer = handle.tracer(tree=tree)
            if listener is not None:
                tracer.add_listener(listener)
            chat = TracingClient(client(call.response), tracer).chat
            handle.force_flush(30.0)  # the previous sample's spans are not this one's work
            cpu = time.process_time()
            begin = time.perf_counter()
            for _ in range(ops):
                chat(call.messages, call.tools, call.temperature)
            elapsed = time.perf_counter() - begin
            if key:
                handle.force_flush(30.0)
                process.setdefault(key, []).append((time.process_time() - cpu) / ops)
            return elapsed / ops
        return sample, handle

    def bare(processor_factory, start: dict[str, Any], end: dict[str, Any], key: str = ""):
        provider = TracerProvider(shutdown_on_exit=False)
        provider.add_span_processor(processor_factory())
        tracer = provider.get_tracer("bench.bare")
        handles.append(provider)

        def sample() -> float:
            provider.force_flush()
            cpu = time.process_time()
            begin = time.perf_counter()
            for _ in range(ops):
                with tracer.start_as_current_span(name, kind=kind, attributes=start) as span:
                    span.set_attributes(end)
            elapsed = time.perf_counter() - begin
            if key:
                provider.force_flush()
                process.setdefault(key, []).append((time.process_time() - cpu) / ops)
            return elapsed / ops
        return sample

    def noop_otel():
        tracer = trace_api.NoOpTracerProvider().get_tracer("bench.noop")

        def sample() -> float:
            begin = time.perf_counter()
            for _ in range(ops):
                with tracer.start_as_current_span(name, kind=kind, attributes=start_attrs) as span:
                    span.set_attributes(end_attrs)
            return (time.perf_counter() - begin) / ops
        return sample

    def input_copy_only():
        from cafe.jsondata import copy_json

        def sample() -> float:
            begin = time.perf_counter()
            for _ in range(ops):
                copy_json(call.messages)
            return (time.perf_counter() - begin) / ops
        return sample

    def null_cafe():
        def sample() -> float:
            client = TracingClient(InstantClient(call.response), NullTracer())
            begin = time.perf_counter()
            for _ in range(ops):
                client.chat(call.messages, call.tools, call.temperature)
            return (time.perf_counter() - begin) / ops
        return sample

    from cafe_otel._export.batch import BoundedBatchSpanProcessor

    ours_off, handle_off = ours(False, key="ours")
    ours_on, handle_on = ours(True)
    ours_unfiltered, _ = ours(False, metadata_only=False)
    ours_spans, _ = ours(False, metrics=False, key="ours_spans")
    ours_network, _ = ours(False, client=InstantNetworkClient)
    ours_sdk_metrics, _ = ours(False, sdk_metrics=True)
    ours_tree, _ = ours(False, tree=True)
    variants = {
        "sdk": bare(lambda: BatchSpanProcessor(NothingExporter()), start_attrs, end_attrs, key="sdk"),
        "sdk_content": bare(lambda: BatchSpanProcessor(NothingExporter()), c_start, c_end),
        "sdk_our_batch": bare(lambda: BoundedBatchSpanProcessor(NothingExporter()), start_attrs, end_attrs),
        "ours": ours_off,
        "ours_content": ours_on,
        "ours_unfiltered": ours_unfiltered,
        "ours_spans": ours_spans,
        "ours_network": ours_network,
        "ours_sdk_metrics": ours_sdk_metrics,
        "ours_tree": ours_tree,
        "noop_otel": noop_otel(),
        "null_cafe": null_cafe(),
        "input_copy": input_copy_only(),
    }
    paired = interleaved(variants, repeats)
    dropped = handle_off.account.dropped + handle_on.account.dropped
    for handle in handles:
        (handle.shutdown(2.0) if hasattr(handle, "account") else handle.shutdown())
    meters.shutdown()

    ratio = paired.ratio("ours", "sdk")
    low, high = paired.spread("ours", "sdk")
    content = paired.ratio("ours_content", "sdk_content")
    same = paired.ratio("ours", "sdk_our_batch")
    us = {k: paired.median(k) * 1e6 for k in variants}
    cpu = Paired(process)
    whole = cpu.ratio("ours", "sdk")
    whole_low, whole_high = cpu.spread("ours", "sdk")
    cpu_us = {k: cpu.median(k) * 1e6 for k in process}
    note_drop = f"; {dropped} spans dropped by a full queue during the run" if dropped else ""
    figures = _counted_figures(workdir, smoke)
    return [
        *figures,
        Figure(1, "calling thread, spans + metrics, content off (ours / bare SDK), wall time", ratio, "x",
               "<= 1.25", ratio <= 1.25,
               f"ours {us['ours']:.1f} µs, bare SDK {us['sdk']:.1f} µs a call on the calling thread; "
               f"{repeats} paired repeats of {ops}, range {low:.2f}-{high:.2f}{note_drop}"),
        Figure(1, "whole process, spans + metrics, content off (ours / bare SDK), CPU time", whole, "x",
               "<= 1.5", whole <= 1.5,
               f"ours {cpu_us['ours']:.1f} µs, bare SDK {cpu_us['sdk']:.1f} µs of CPU a call over every thread "
               f"(loop + flush); range {whole_low:.2f}-{whole_high:.2f}"),
        Figure(1, "whole process, spans only, CPU time", cpu.ratio("ours_spans", "sdk"), "x", "",
               note=f"ours without the MetricsListener {cpu_us['ours_spans']:.1f} µs of CPU a call"),
        Figure(1, "calling thread, spans only (no metrics listener), wall time", paired.ratio("ours_spans", "sdk"),
               "x", "",
               note=f"ours without the MetricsListener {us['ours_spans']:.1f} µs: the metrics cost "
                    f"{us['ours'] - us['ours_spans']:.1f} µs a call"),
        Figure(1, "overhead ratio, a client with a network endpoint", paired.ratio("ours_network", "sdk"), "x", "",
               note=f"{us['ours_network']:.1f} µs: its span started, made current and ended as usual "
                    f"(a live client's, where an HTTP instrumentation may nest under it)"),
        Figure(1, "overhead ratio, metrics through the SDK's instruments", paired.ratio("ours_sdk_metrics", "sdk"),
               "x", "", note=f"{us['ours_sdk_metrics']:.1f} µs: MetricsListener on a MeterProvider's histograms "
                             "instead of our in-process streams"),
        Figure(1, "overhead ratio, with the in-memory tree too", paired.ratio("ours_tree", "sdk"), "x", "",
               note=f"handle.tracer() (ShiftTree listener first, as the CLI renders it) {us['ours_tree']:.1f} µs"),
        Figure(1, "overhead ratio, content on (SPAN_ONLY)", content, "x", "",
               note=f"ours {us['ours_content']:.1f} µs vs bare SDK with the same content attributes "
                    f"{us['sdk_content']:.1f} µs"),
        Figure(1, "overhead ratio vs bare SDK on our batch processor", same, "x", "",
               note=f"bare SDK through BoundedBatchSpanProcessor {us['sdk_our_batch']:.1f} µs"),
        Figure(1, "diagnosis: ours without the metadata-only processor", paired.ratio("ours_unfiltered", "sdk"),
               "x", "", note=f"configure(metadata_only=False) {us['ours_unfiltered']:.1f} µs, vs the bare SDK"),
        Figure(1, "no-op OTel tracer, same span", us["noop_otel"], "µs", "",
               note="reference: NoOpTracerProvider, same name and attributes"),
        Figure(1, "cafe NullTracer generation", us["null_cafe"], "µs", "",
               note="reference: TracingClient over NullTracer (no listeners: no events built)"),
        Figure(1, "copy of one call's input messages", us["input_copy"], "µs", "",
               note=f"what a content-keeping tracer adds ({paired.ratio('input_copy', 'ours'):.0%} of ours, "
                    "paired); a tracer with content off copies nothing"),
    ]


def _counted_figures(workdir: Path, smoke: bool) -> list[Figure]:
    """The verdicts' figures, in callgrind's instruction counts (minutes under valgrind: not
    in a smoke run)."""
    caller_name = "calling thread, spans + metrics, content off (ours / bare SDK), instructions"
    process_name = "whole process, spans + metrics, content off (ours / bare SDK), instructions"
    why = ("smoke run" if smoke else "valgrind is not installed (apt-get install valgrind)"
           if not instructions.available() else "")
    if why:
        return [Figure(1, caller_name, None, "x", "<= 1.25", None, f"not counted: {why}"),
                Figure(1, process_name, None, "x", "<= 1.5", None, f"not counted: {why}")]
    counts = instructions.count_all(["sdk", "ours", "ours_spans"], workdir / "callgrind")
    sdk, ours, spans = counts["sdk"], counts["ours"], counts["ours_spans"]
    caller, whole = ours.caller / sdk.caller, ours.process / sdk.process
    how = (f"callgrind, (instructions after {instructions.WARMUP + instructions.CALLS:,} calls - after "
           f"{instructions.WARMUP}) / {instructions.CALLS:,}, PYTHONHASHSEED=0")
    return [
        Figure(1, caller_name, caller, "x", "<= 1.25", caller <= 1.25,
               f"ours {ours.caller / 1e3:.1f}k, bare SDK {sdk.caller / 1e3:.1f}k instructions a call on the "
               f"calling thread; {how}"),
        Figure(1, process_name, whole, "x", "<= 1.5", whole <= 1.5,
               f"ours {ours.process / 1e3:.1f}k, bare SDK {sdk.process / 1e3:.1f}k instructions a call over "
               "every thread (the export worker's check and export included)"),
        Figure(1, "spans only (no metrics listener), instructions", spans.caller / sdk.caller, "x", "",
               note=f"calling thread {spans.caller / 1e3:.1f}k ({spans.caller / sdk.caller:.2f}x), whole process "
                    f"{spans.process / 1e3:.1f}k ({spans.process / sdk.process:.2f}x)"),
    ]
