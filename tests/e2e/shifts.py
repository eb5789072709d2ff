"""The span source of the end-to-end tests: café shifts exported through `cafe_otel`.

`run_shifts` runs N shifts with `cafe.counter.run_shift` under `cafe_otel.configure(...)`'s
tracer (OTLP/gRPC, `environ={}` so no OTEL_* variable of the machine leaks in), shuts
the handle down within a bound and returns what a test needs to count and look up:
the trace id of each shift, how many spans the shifts made (counted on the cafe side,
independently of cafe_otel), how long each shift and the shutdown took, and a
snapshot of the handle's account.

The plain-SDK `emit_spans` (spans.py) stays only for content cafe_otel never sends:
canary text under keys that are on no allowlist, to show the Collector's own redaction.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

import cafe
import cafe.counter
from cafe_otel import AdvancedOptions, BatchOptions, configure
from cafe_otel._export.account import AccountSnapshot

AGENT = "cafe-counter"
SCRIPTED_MODEL = "scripted-barista-1"
TOOL = "price_check"
# The seed shift (cafe.counter.DEFAULT_SCRIPT, ScriptedClient, approved once): agent, setup, five
# turns with a chat each, two price checks in turn 1, the proposal in turn 3, the fired
# ticket in turn 4, wrapup.
SPANS_PER_SHIFT = 17
# Enough for an export to the Collector on 127.0.0.1 with room for a loaded CI machine.
SHUTDOWN_BOUND = 10.0
# A shift takes milliseconds; one still running after this is stuck (on its telemetry,
# most likely), and the test fails instead of waiting for it.
SHIFT_DEADLINE = 10.0


class _IdRecorder(SpanProcessor):
    """Remembers (trace id, span id) of every span that ends; reads ids, nothing else."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ended: list[tuple[int, int]] = []

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            self.ended.append((span.context.trace_id, span.context.span_id))


@dataclass
class Shifts:
    """What a run of shifts produced and what the handle's account says became of it."""

    service: str
    endpoint: str
    trace_ids: list[str]  # one per shift, 32 hex digits, in run order
    spans: int  # spans the shifts made (cafe Tracer nodes)
    runs: list[cafe.counter.ShiftRun]
    tracers: list[cafe.Tracer]
    shift_seconds: list[float]  # wall time of each run_shift call
    shutdown_seconds: float  # measured around handle.shutdown(bound)
    shutdown_bound: float
    account: AccountSnapshot
    summary: str  # account.summary() after shutdown
    span_ids: set[int] = field(default_factory=set)  # every span the shifts made


def _within(call: Callable[[], Any], deadline: float, what: str) -> tuple[Any, float]:
    """`call()` on a daemon thread: (its result, its wall time); fails after `deadline` s."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        started = time.monotonic()
        try:
            outcome["value"] = call()
        except BaseException as error:  # re-raised on the test's thread
            outcome["error"] = error
        outcome["seconds"] = time.monotonic() - started

    worker = threading.Thread(target=run, name="e2e-shift", daemon=True)
    worker.start()
    worker.join(deadline)
    if worker.is_alive():
        raise AssertionError(f"{what} still running after {deadline:g}s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"], outcome["seconds"]


def run_shifts(
    endpoint: str,
    service: str,
    n: int,
    *,
    client: Callable[[int], Any] = lambda _: cafe.counter.ScriptedClient(),
    lines: Sequence[str] = cafe.counter.DEFAULT_SCRIPT,
    decisions: Sequence[tuple[str, Any]] = cafe.counter.DEFAULT_DECISIONS,
    system_prompt: str | None = None,
    capture_content: bool = False,
    export_timeout: float = 5.0,
    schedule_delay: float = 1.0,
    shutdown_bound: float = SHUTDOWN_BOUND,
    between: Callable[[int], None] | None = None,
    after_shifts: Callable[[], None] | None = None,
    shift_deadline: float = SHIFT_DEADLINE,
) -> Shifts:
    """Run `n` shifts exported to the OTLP/gRPC `endpoint` (host:port) as `service`.

    `client(i)` makes shift i's model client; `between(i)` runs after shift i (pauses,
    outages); `after_shifts()` runs after the last shift, before the shutdown. Each
    shift gets conversation id `{service}-{i}`. Each shift runs on a thread of its own
    and must finish within `shift_deadline` seconds. Returns after `handle.shutdown(shutdown_bound)`.
    """
    recorder = _IdRecorder()
    handle = configure(service, endpoint=f"http://{endpoint}", protocol="grpc", environ={},
                       capture_content=capture_content,
                       batch=BatchOptions(export_timeout=export_timeout, schedule_delay=schedule_delay),
                       advanced=AdvancedOptions(extra_processors=(recorder,)))
    runs, tracers, seconds = [], [], []
    options = {} if system_prompt is None else {"system_prompt": system_prompt}
    try:
        for i in range(n):
            tracer = handle.tracer()
            shift = functools.partial(
                cafe.counter.run_shift,
                client(i),
                list(lines),
                cafe.counter.make_responder(decisions),
                tracer=tracer,
                conversation_id=f"{service}-{i}",
                **options,
            )
            run, took = _within(shift, shift_deadline, f"shift {i} of {service}")
            seconds.append(took)
            runs.append(run)
            tracers.append(tracer)
            if between is not None:
                between(i)
        if after_shifts is not None:
            after_shifts()
    finally:
        started = time.monotonic()
        handle.shutdown(shutdown_bound)
        shutdown_seconds = time.monotonic() - started

    made = sum(len(tracer.nodes()) for tracer in tracers)
    roots = [tracer.roots for tracer in tracers]
    assert all(len(r) == 1 for r in roots), "a shift made more than one root span"
    # The ids seen by the provider: one trace per shift (shifts run one after another),
    # every span once.
    trace_of_shift: list[str] = []
    for trace_id, _ in recorder.ended:
        if format(trace_id, "032x") not in trace_of_shift:
            trace_of_shift.append(format(trace_id, "032x"))
    span_ids = [span_id for _, span_id in recorder.ended]
    assert len(span_ids) == made, f"the provider saw {len(span_ids)} spans end, the shifts made {made}"
    assert len(set(span_ids)) == made, "a span id was used twice"
    assert len(trace_of_shift) == n, f"{n} shifts made {len(trace_of_shift)} traces"
    return Shifts(
        service=service,
        endpoint=endpoint,
        trace_ids=trace_of_shift,
        spans=made,
        runs=runs,
        tracers=tracers,
        shift_seconds=seconds,
        shutdown_seconds=shutdown_seconds,
        shutdown_bound=shutdown_bound,
        account=handle.account.snapshot(),
        summary=handle.account.summary(),
        span_ids=set(span_ids),
    )
