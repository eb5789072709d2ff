"""Figure 2: what replaying one model call costs, how that grows with the recording, and the
same calls replayed by VCR.py through the `openai` SDK.

cafe: `load_recording` + `ReplayClient.chat` for every call, in order (the matching is the
strict one: the whole request must be the recorded one, compared as bytes where that provably
gives the same verdict, else scrubbed as the recorder scrubbed it and compared structurally).
The cost per call is (load + all calls) / calls. The requests come from bench/synthetic.py
(bounded by a sliding window: see there).

The floor, measured in the same repeats on the same file: what any replay of these lines must
do at least, done by the fastest means at hand (orjson): read the file, decode every line,
re-encode each call's response (a replay hands back a copy) and compare each incoming
request with the recorded one (Python's `==` on the decoded objects). The target is on the
ratio replay / floor: a slow moment of a shared VM slows both alike.

VCR.py, like with like: cafe's wire replay (`load_recording` + `ReplayTransport`) and VCR.py
(entering the cassette, which loads the YAML), each under `client.chat.completions.create` for
the calls, matching on method, path and body; and the recording of the calls by each, through
the same SDK, paired. VCR.py scans the cassette from the start on
every request (twice: once to ask whether it can play, once to play), so the call at
position i costs about i matcher evaluations, each parsing two JSON bodies. Where a full pass
would take too long, the calls replayed are an evenly spaced sample of the cassette (every
k-th call, in order, against the whole cassette loaded), which estimates the mean cost per
call of a full pass without bias; the cassette load is still amortised over all its calls.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from bench import vcr_baseline, wire_replay
from bench.stats import interleaved, median
from bench.synthetic import SyntheticCall, synthetic_calls, write_recording
from bench.table import Figure
from cafe.counter import ReplayClient
from cafe.recording import Scrubber, load_recording

FULL_SIZES = (100, 1_000, 10_000)
SMOKE_SIZES = (100, 1_000)


def cafe_seconds(path: Path, calls: list[SyntheticCall]) -> tuple[float, float]:
    """(load seconds, replay seconds) for one full replay of `path`."""
    start = time.perf_counter()
    recording = load_recording(path)
    loaded = time.perf_counter()
    client = ReplayClient(recording)
    for call in calls:
        client.chat(call.messages, call.tools, call.temperature)
    done = time.perf_counter()
    client.assert_exhausted()
    return loaded - start, done - loaded


def floor_seconds(path: Path, requests: list[dict[str, object]]) -> float:
    """Seconds to read `path`, decode its lines, re-encode each call's response and compare
    each request with the recorded one: the least a replay of it can do. One line at a time
    (nothing decoded is kept: a list of every decoded line would be the cyclic GC's work)."""
    start = time.perf_counter()
    calls = same = 0
    for line in path.read_bytes().splitlines():
        decoded = orjson.loads(line)
        if isinstance(decoded, dict) and "request" in decoded:
            orjson.dumps(decoded["response"])
            same += decoded["request"] == requests[calls]
            calls += 1
    elapsed = time.perf_counter() - start
    if same != len(requests):
        raise RuntimeError(f"{path}: {same} of {len(requests)} recorded requests are the calls'")
    return elapsed


def _scrub_seconds(calls: list[SyntheticCall]) -> float:
    """Seconds a call spends only scrubbing its serialised request (for the diagnosis note:
    ReplayClient scrubs every incoming request before it compares it)."""
    scrubber = Scrubber()
    start = time.perf_counter()
    for call in calls:
        scrubber.scrub_json(call.request)
    return (time.perf_counter() - start) / len(calls)


def run(workdir: Path, smoke: bool = False) -> list[Figure]:
    sizes = SMOKE_SIZES if smoke else FULL_SIZES
    repeats = 1 if smoke else 3
    # size -> calls replayed per pass (a smoke run records a 100-call cassette, replays 5 of them)
    vcr_plan = {100: 5} if smoke else {100: 100, 1_000: 25}
    vcr_repeats = 1 if smoke else 3

    calls = {n: synthetic_calls(n) for n in sizes}
    paths = {n: write_recording(workdir / f"replay-{n}.jsonl", calls[n]) for n in sizes}
    sizes_bytes = [len(json.dumps(c.request)) for c in calls[sizes[-1]]]

    per_call: dict[int, list[float]] = {n: [] for n in sizes}
    chat_only: dict[int, list[float]] = {n: [] for n in sizes}

    def cafe_variant(n: int):
        def measure() -> float:
            load, replay = cafe_seconds(paths[n], calls[n])
            chat_only[n].append(replay / n)
            per_call[n].append((load + replay) / n)
            return (load + replay) / n
        return measure

    variants: dict[str, Callable[[], float]] = {f"cafe@{n}": cafe_variant(n) for n in sizes}
    requests = {n: [call.request for call in calls[n]] for n in sizes}
    for n in sizes:
        variants[f"floor@{n}"] = lambda n=n: floor_seconds(paths[n], requests[n]) / n
    variants["scrub@100"] = lambda: _scrub_seconds(calls[100])
    growth = interleaved(variants, repeats)
    figures: list[Figure] = []
    for n in sizes:
        us = growth.median(f"cafe@{n}") * 1e6
        floor_us = growth.median(f"floor@{n}") * 1e6
        ratio = growth.ratio(f"cafe@{n}", f"floor@{n}")
        low, high = growth.spread(f"cafe@{n}", f"floor@{n}")
        target = "<= 4" if n >= 1_000 else ""
        figures.append(Figure(
            2, f"replay per call / its floor, {n:,} calls", ratio, "x", target,
            ratio <= 4 if target else None,
            f"replay {us:.0f} µs a call with loading (ReplayClient.chat alone {median(chat_only[n]) * 1e6:.0f} µs), "
            f"floor {floor_us:.1f} µs (decode each line, re-encode its response, compare the request); "
            f"median of {repeats} paired ratios, range {low:.2f}-{high:.2f}",
        ))
    top = sizes[-1]
    flat = growth.ratio(f"cafe@{top}", "cafe@100")
    figures.append(Figure(
        2, f"replay growth {top:,} vs 100 calls", flat, "x", "<= 1.2", flat <= 1.2,
        f"median of {repeats} paired ratios; requests {min(sizes_bytes):,}-{max(sizes_bytes):,} B "
        f"(sliding window of {2} exchanges)",
    ))
    scrub_us = growth.median("scrub@100") * 1e6
    share = median([s / c for s, c in zip(growth.samples["scrub@100"], chat_only[100], strict=True)])
    figures.append(Figure(
        2, "of which: scrubbing the incoming request", scrub_us, "µs", "",
        note=f"Scrubber.scrub of the serialised request alone, {share:.0%} of a ReplayClient.chat "
             "(median of paired repeats, 100 calls)",
    ))

    for n, sample in vcr_plan.items():
        if n not in calls:
            continue
        # Like with like: both through the openai SDK, cafe by its wire replay (load +
        # ReplayTransport), VCR.py by its cassette; and the recording of each, paired.
        cassette = workdir / f"vcr-{n}.yaml"
        wire_path = workdir / f"wire-{n}.jsonl"
        urls: list[str] = []

        def record_cafe(n: int = n, wire_path: Path = wire_path) -> float:
            wire_path.unlink(missing_ok=True)
            start = time.perf_counter()
            wire_replay.record(wire_path, calls[n], stream=False)
            return (time.perf_counter() - start) / n

        def record_vcr(n: int = n, cassette: Path = cassette, urls: list[str] = urls) -> float:
            cassette.unlink(missing_ok=True)
            start = time.perf_counter()
            urls.append(vcr_baseline.record_cassette(cassette, calls[n]))
            return (time.perf_counter() - start) / n

        # VCR.py's recording of 1,000 calls takes minutes: recorded once a run at that size.
        recording = interleaved({"cafe": record_cafe, "vcr": record_vcr}, vcr_repeats if n < 1_000 else 1)
        base_url = urls[-1]
        step = max(1, n // sample)
        picked = calls[n][step - 1::step][:sample]

        def vcr_variant(n: int = n, cassette: Path = cassette, base_url: str = base_url,
                        picked: list[SyntheticCall] = picked) -> float:
            # The load (entering the cassette) is amortised over the whole cassette.
            load, replay = vcr_baseline.replay_seconds(cassette, base_url, picked)
            return load / n + replay / len(picked)

        def wire_variant(n: int = n, wire_path: Path = wire_path) -> float:
            return wire_replay.replay_seconds(wire_path, calls[n], stream=False)

        pair = interleaved({"cafe": wire_variant, "vcr": vcr_variant}, vcr_repeats)
        ms = pair.median("vcr") * 1e3
        how = "every call" if len(picked) == n else f"sample of {len(picked)} calls, every {step}th"
        figures.append(Figure(2, f"VCR.py replay per call, {n:,} calls", ms, "ms", "",
                              note=f"openai SDK + vcrpy on httpx2, match method/path/body; {how}; cafe's wire "
                                   f"replay through the same SDK {pair.median('cafe') * 1e6:,.0f} µs"))
        speedup = pair.ratio("vcr", "cafe")
        target = ">= 100x" if n == 1_000 else ""
        figures.append(Figure(
            2, f"cafe replay vs VCR.py, both through the SDK, {n:,} calls", speedup, "x faster", target,
            (speedup >= 100) if target else None, f"median of {vcr_repeats} paired ratios",
        ))
        figures.append(Figure(
            2, f"VCR.py recording per call, {n:,} calls", recording.median("vcr") * 1e3, "ms", "",
            note=f"recording through the SDK against a local server; cafe's wire recording "
                 f"{recording.median('cafe') * 1e6:,.0f} µs a call, {recording.ratio('vcr', 'cafe'):,.1f}x less "
                 f"(median of {vcr_repeats} paired ratios)",
        ))
    if 1_000 not in vcr_plan or 1_000 not in calls:
        figures.append(Figure(2, "cafe replay vs VCR.py, 1,000 calls", None, "x faster", ">= 100x",
                              None, "smoke run: VCR.py only at 100 calls"))
    if top == 10_000:
        figures.append(Figure(2, "VCR.py per call, 10,000 calls", None, "ms", "",
                              note="skipped: a pass scans ~50M matcher pairs (hours); see README"))
    return figures

