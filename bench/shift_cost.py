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

Recorded: the same shift through `record_shift`, and replayed from that recording through
`replay_shift`, with the bytes written per call. A call line holds what is new in its
request (format version 4: the rest by reference to the call before), so writing, reading
and replaying a call cost the same at any length of shift; the growth figures, 1,000 turns
against 10, are medians of paired ratios.

And any agent's conversation recorded on the wire (bench/wire_conversation.py).
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from bench.stats import interleaved
from bench.table import Figure
from cafe.counter import record_shift, replay_shift
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


def _recorded(workdir: Path, turns: int) -> tuple[float, float, float]:
    """(CPU seconds to record, bytes written, CPU seconds to replay) per call of one shift."""
    path = workdir / f"shift-{turns}.jsonl"
    shifts = max(1, CALLS_PER_SAMPLE // 10 // turns)
    recorded = replayed = 0.0
    calls = 0
    for _ in range(shifts):
        path.unlink(missing_ok=True)
        start = time.process_time()
        run, _ = record_shift(ScriptedClient(), _script(turns), path, responder=make_responder([]),
                              max_turns=turns)
        recorded += time.process_time() - start
        start = time.process_time()
        replay_shift(path)
        replayed += time.process_time() - start
        calls += run.model_calls
    size = path.stat().st_size * shifts
    path.unlink()
    return recorded / calls, size / calls, replayed / calls


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

    shown_sizes = sizes[:2] if smoke else sizes
    samples: dict[int, list[tuple[float, float, float]]] = {n: [] for n in shown_sizes}
    for repeat in range(1 if smoke else 5):  # the sizes in turn, the order rotating
        order = shown_sizes[repeat % len(shown_sizes):] + shown_sizes[:repeat % len(shown_sizes)]
        for n in order:
            samples[n].append(_recorded(workdir, n))
    for n in shown_sizes:
        record_us = sorted(sample[0] for sample in samples[n])[len(samples[n]) // 2] * 1e6
        replay_us = sorted(sample[2] for sample in samples[n])[len(samples[n]) // 2] * 1e6
        figures.append(Figure(10, f"recorded shift per call, {n:,} turns", record_us, "µs", "",
                              note=f"record_shift, median of {len(samples[n])}; {samples[n][0][1] / 1024:,.2f} KiB "
                                   f"written a call; its replay_shift {replay_us:,.0f} µs a call"))
    top_shown = shown_sizes[-1]
    for what, at in (("recorded", 0), ("replayed", 2)):
        ratios = sorted(high[at] / low[at] for high, low in zip(samples[top_shown], samples[bottom], strict=True))
        growth = ratios[len(ratios) // 2]
        figures.append(Figure(10, f"{what} shift per call, {top_shown:,} vs {bottom} turns", growth, "x", "<= 1.5",
                              growth <= 1.5, f"median of {len(ratios)} paired ratios, range "
                                             f"{ratios[0]:.2f}-{ratios[-1]:.2f}; bytes a call "
                                             f"{samples[top_shown][0][1] / samples[bottom][0][1]:.2f}x"))
    from bench import wire_conversation

    return figures + wire_conversation.run(workdir, smoke=smoke)
