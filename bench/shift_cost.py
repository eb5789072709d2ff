"""Figure 10: what one model call of an offline shift costs, at 10, 100 and 1,000 turns.

The shift is `run_shift` with the scripted model and a `Tracer()` (the in-memory tree, as
the CLI renders it), its script a line naming an item repeated (each line two model calls:
a `price_check` call, then the answer to its result), the turn cap the number of turns. A
sample is the CPU time (`time.process_time`) of enough whole shifts for 1,000 calls (100
shifts of 10 turns, 10 of 100, one of 1,000), divided by the calls; the sizes are
interleaved in each repeat (`bench.stats`). A shift of 10 turns carries its setup and wrapup
over fewer calls, so a flat cost shows as a ratio at or under 1.

Memory is measured apart (tracemalloc slows everything it watches): the peak of one shift
of each size, and what its tracer still holds after it, per turn.

Recorded, for reference: the same shift through `record_shift`. A recording's line holds the
whole request by format, so a call's line, and writing it, grow with the conversation:
O(n) bytes a call by contract, shown here with the bytes written per call.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from bench.stats import interleaved
from bench.table import Figure
from cafe.counter import record_shift
from cafe.counter.clients.scripted import ScriptedClient
from cafe.counter.consent import make_responder
from cafe.counter.loop import run_shift
from cafe.trace.tracer import Tracer

SIZES = (10, 100, 1_000)
CALLS_PER_SAMPLE = 1_000
LINE = "A latte, please."


def _script(turns: int) -> list[str]:
    return [LINE] * (turns // 2)


def _shift(turns: int) -> int:
    run = run_shift(ScriptedClient(), _script(turns), make_responder([]), tracer=Tracer(), max_turns=turns)
    return run.model_calls


def _per_call(turns: int, calls: int) -> Callable[[], float]:
    def measure() -> float:
        shifts = max(1, calls // turns)
        start = time.process_time()
        made = sum(_shift(turns) for _ in range(shifts))
        return (time.process_time() - start) / made
    return measure


def _memory_per_turn(turns: int) -> tuple[float, float]:
    """(peak bytes, bytes the tracer holds after the shift), per turn."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        tracer = Tracer()
        run_shift(ScriptedClient(), _script(turns), make_responder([]), tracer=tracer, max_turns=turns)
        gc.collect()
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return (peak - before) / turns, (held - before) / turns


def _recorded(workdir: Path, turns: int) -> tuple[float, float]:
    """(CPU seconds, bytes written) per call of one recorded shift."""
    path = workdir / f"shift-{turns}.jsonl"
    start = time.process_time()
    run, _ = record_shift(ScriptedClient(), _script(turns), path, responder=make_responder([]),
                          max_turns=turns)
    seconds = time.process_time() - start
    size = path.stat().st_size
    path.unlink()
    return seconds / run.model_calls, size / run.model_calls


def run(workdir: Path, smoke: bool = False, repeats: int | None = None) -> list[Figure]:
    """`repeats` overrides the number of repeats (to measure an older checkout in less time)."""
    repeats = repeats or (1 if smoke else 7)
    calls = 200 if smoke else CALLS_PER_SAMPLE
    sizes = SIZES
    _shift(sizes[0])  # warm: the first shift of a process pays for imports and caches
    paired = interleaved({f"shift@{n}": _per_call(n, calls) for n in sizes}, repeats)
    figures: list[Figure] = []
    for n in sizes:
        us = paired.median(f"shift@{n}") * 1e6
        figures.append(Figure(10, f"offline shift per call, {n:,} turns", us, "µs", "",
                              note=f"CPU time; Tracer() with the tree; median of {repeats} repeats of "
                                   f"{max(1, calls // n)} shift(s)"))
    top, bottom = sizes[-1], sizes[0]
    growth = paired.ratio(f"shift@{top}", f"shift@{bottom}")
    low, high = paired.spread(f"shift@{top}", f"shift@{bottom}")
    figures.append(Figure(10, f"shift cost growth per call, {top:,} vs {bottom} turns", growth, "x", "<= 1.2",
                          growth <= 1.2, f"median of {repeats} paired ratios, range {low:.2f}-{high:.2f}"))

    memory = {n: _memory_per_turn(n) for n in sizes}
    shown = ", ".join(f"{n:,}: {peak / 1024:.1f}/{held / 1024:.1f}" for n, (peak, held) in memory.items())
    held_growth = memory[top][1] / memory[bottom][1]
    figures.append(Figure(10, f"memory held per turn, {top:,} vs {bottom} turns", held_growth, "x", "<= 1.2",
                          held_growth <= 1.2,
                          f"tracemalloc, KiB a turn peak/held after the shift: {shown}"))

    for n in sizes[:2] if smoke else sizes:
        samples = [_recorded(workdir, n) for _ in range(1 if smoke or n == top else 3)]
        seconds = sorted(sample[0] for sample in samples)[len(samples) // 2]
        size = samples[0][1]
        figures.append(Figure(10, f"recorded shift per call, {n:,} turns", seconds * 1e6, "µs", "",
                              note=f"record_shift, median of {len(samples)} shift(s); {size / 1024:,.1f} KiB "
                                   "written a call (a line holds the whole request: O(n) a call by format)"))
    return figures
