"""Figure 11: the wire (`cafe.wire`, issue 21) through the `openai` SDK.

(a) Replay per SDK call, plain and streamed, at 100, 1,000 and 10,000 calls: a wire
recording of the synthetic calls (bench/synthetic.py) made by `RecordingTransport` over an
`httpx2.MockTransport` answering each with its synthetic completion (or the same as SSE
chunks), then replayed with `ReplayTransport` under `client.chat.completions.create`; the
cost per call is (load + every call) / calls. VCR.py replays the same plain calls from a
cassette it recorded itself (bench/vcr_baseline.py), sampled as in figure 2; streamed calls
are not compared with VCR.py (it keeps an SSE body as one response body).

(b) What the transport adds to a bare SDK call on `httpx2.MockTransport` (and, as its `httpx`
rows, to Groq's SDK on `httpx.MockTransport`, the same request on httpx): the same calls
through `ObservedTransport` with a `WireRecorder` (recording), and served by `ReplayTransport`
(replaying), paired with the bare call in the same repeats; the overhead is the median of the
per-repeat ratios, minus 1. The bare call is a realistic agent call, bench/synthetic.py's:
13 messages and 5 tool schemas, about 4.7 KB of JSON. Most of its cost is the SDK's own
(`maybe_transform` walks every message against every member of the message-type union);
the mock's JSON encoding of the answer is about 10 µs of it.

VCR.py at 10,000 calls runs in a child process within `VCR_BOUND_S` (recording the
cassette, loading it, a sample of calls); past the bound it is reported as not measured.

(c) Overlapping calls: N synthetic calls in flight together (`openai.AsyncOpenAI` under
`asyncio.gather`), recorded by `AsyncRecordingTransport` over an `httpx2.MockTransport` that
answers none until all N have arrived, so every recorded call overlaps every other; then
replayed with the requests in the reverse of their recorded order, so that each is the last
of those in flight (the most a replay may have to compare it with). The cost per call is
(load + the whole gather) / N at N = 100, 1,000 and 10,000, and the figure is its ratio
from one N to the next: 1 when matching is linear in N, about 10 when it compares each
request with every call still in flight.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import itertools
import json
import multiprocessing
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import openai

from bench import vcr_baseline
from bench.stats import interleaved
from bench.synthetic import SyntheticCall, synthetic_calls
from bench.table import Figure
from cafe.recording.reader import load_recording
from cafe.wire import AsyncRecordingTransport, RecordingTransport, ReplayTransport, WireRecorder

FULL_SIZES = (100, 1_000, 10_000)
SMOKE_SIZES = (100,)
KEY = "sk-bench-wire-not-a-real-key-0000"
BASE_URL = "http://bench.invalid/v1"
VCR_BOUND_S = 300.0


def _completion(call: SyntheticCall) -> dict[str, Any]:
    return vcr_baseline._completion(call.response)


def _sse(call: SyntheticCall) -> bytes:
    body = _completion(call)
    message = body["choices"][0]["message"]
    head = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"], "model": body["model"]}
    events = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                    "finish_reason": None}]}]
    for word in (message.get("content") or "ok").split(" "):
        events.append({**head, "choices": [{"index": 0, "delta": {"content": word + " "}, "finish_reason": None}]})
    events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return b"".join(b"data: " + json.dumps(event).encode() + b"\n\n" for event in events) + b"data: [DONE]\n\n"


def _mock(calls: list[SyntheticCall], stream: bool) -> httpx2.MockTransport:
    position = [0]

    def answer(request: httpx2.Request) -> httpx2.Response:
        call = calls[position[0] % len(calls)]
        position[0] += 1
        if stream:
            return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=_sse(call))
        return httpx2.Response(200, json=_completion(call))

    return httpx2.MockTransport(answer)


def _client(transport: httpx2.BaseTransport) -> openai.OpenAI:
    return openai.OpenAI(api_key=KEY, base_url=BASE_URL, max_retries=0,
                         http_client=httpx2.Client(transport=transport))


def _make(client: openai.OpenAI, call: SyntheticCall, stream: bool) -> None:
    if stream:
        for _ in client.chat.completions.create(model="gpt-4o-mini", messages=call.messages, tools=call.tools,
                                                temperature=call.temperature, stream=True):
            pass
    else:
        client.chat.completions.create(model="gpt-4o-mini", messages=call.messages, tools=call.tools,
                                       temperature=call.temperature)


def record(path: Path, calls: list[SyntheticCall], stream: bool) -> Path:
    client = _client(RecordingTransport(path, _mock(calls, stream)))
    for call in calls:
        _make(client, call, stream)
    client.close()
    return path


def replay_seconds(path: Path, calls: list[SyntheticCall], stream: bool) -> float:
    """Seconds per call of one full replay: load + every call, through the SDK."""
    start = time.perf_counter()
    source = ReplayTransport(load_recording(path))
    client = _client(source)
    for call in calls:
        _make(client, call, stream)
    source.assert_exhausted()
    return (time.perf_counter() - start) / len(calls)


def _async_client(transport: httpx2.AsyncBaseTransport) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=KEY, base_url=BASE_URL, max_retries=0,
                              http_client=httpx2.AsyncClient(transport=transport))


async def _gathered(client: openai.AsyncOpenAI, calls: list[SyntheticCall]) -> None:
    await asyncio.gather(*(client.chat.completions.create(model="gpt-4o-mini", messages=call.messages,
                                                          tools=call.tools, temperature=call.temperature)
                           for call in calls))
    await client.close()


def record_overlapping(path: Path, calls: list[SyntheticCall]) -> Path:
    """`calls` recorded all in flight together: the mock answers none before all have arrived."""
    by_body = {json.dumps(call.messages, sort_keys=True): call for call in calls}
    arrived = [0]
    everyone: asyncio.Event | None = None

    async def answer(request: httpx2.Request) -> httpx2.Response:
        nonlocal everyone
        everyone = everyone or asyncio.Event()
        arrived[0] += 1
        if arrived[0] == len(calls):
            everyone.set()
        await everyone.wait()
        call = by_body[json.dumps(json.loads(request.content)["messages"], sort_keys=True)]
        return httpx2.Response(200, json=_completion(call))

    asyncio.run(_gathered(_async_client(AsyncRecordingTransport(path, httpx2.MockTransport(answer))), calls))
    return path


def replay_overlapping_seconds(path: Path, calls: list[SyntheticCall]) -> float:
    """Seconds per call of one replay of `path` (load + the gather), the requests reversed."""
    start = time.perf_counter()
    source = ReplayTransport(load_recording(path))
    asyncio.run(_gathered(_async_client(source), calls[::-1]))
    source.assert_exhausted()
    return (time.perf_counter() - start) / len(calls)


def _overlapping(workdir: Path, sizes: tuple[int, ...], repeats: int) -> list[Figure]:
    """Each size with the next in the same repeats: `repeats` of them, one only with 10,000
    calls (a pass of 10,000 calls takes minutes)."""
    measures: dict[int, Callable[[], float]] = {}
    for n in sizes:
        calls = synthetic_calls(n)
        path = record_overlapping(workdir / f"wire-overlapping-{n}.jsonl", calls)
        measures[n] = (lambda p=path, c=calls: replay_overlapping_seconds(p, c))
    figures, seconds = [], {}
    for smaller, larger in itertools.pairwise(sizes):
        times = 1 if larger >= 10_000 else repeats
        pair = interleaved({str(smaller): measures[smaller], str(larger): measures[larger]}, times)
        seconds.setdefault(smaller, pair.median(str(smaller)))
        seconds[larger] = pair.median(str(larger))
        ratio = pair.ratio(str(larger), str(smaller))
        figures.append(Figure(11, f"wire replay of overlapping calls, per call, {larger:,} vs {smaller:,}", ratio,
                              "x", "<= 1.5", ratio <= 1.5,
                              f"{'median of ' + str(times) + ' paired ratios' if times > 1 else 'one paired pass'}; "
                              f"1 is linear in the calls, about {larger // smaller} quadratic"))
    if len(sizes) == 1:
        seconds[sizes[0]] = measures[sizes[0]]()
    return [Figure(11, f"wire replay of {n:,} overlapping calls, per call", seconds[n] * 1e6, "µs",
                   note="load + asyncio.gather of AsyncOpenAI calls, all recorded in flight together, "
                        "arriving in reverse order") for n in sizes] + figures


@dataclass(frozen=True)
class _Sdk:
    """A bare SDK call on one client library, for what the wire adds to it: the library's
    module, cafe's transports for it, and a client sending through a given transport."""

    library: str
    label: str
    client: Callable[[Any], Any]

    def http(self) -> Any:
        return importlib.import_module(self.library)

    def wire(self) -> Any:
        return importlib.import_module(f"cafe.wire.{self.library}")


def _groq_client(transport: Any) -> Any:
    import groq
    import httpx

    return groq.Groq(api_key=KEY, base_url="http://bench.invalid", max_retries=0,
                     http_client=httpx.Client(transport=transport))


def _sdks() -> list[_Sdk]:
    """The installed openai on its library (httpx2 for 3.x), and an SDK on httpx beside it: Groq's
    (the same Chat Completions request) when openai itself is not on httpx."""
    on = "httpx" if openai.__version__.startswith(("1.", "2.")) else "httpx2"
    sdks = [_Sdk(on, "", lambda transport: openai.OpenAI(
        api_key=KEY, base_url=BASE_URL, max_retries=0,
        http_client=importlib.import_module(on).Client(transport=transport)))]
    if on != "httpx" and importlib.util.find_spec("groq") is not None:
        sdks.append(_Sdk("httpx", " (httpx: groq)", _groq_client))
    return sdks


def _library_mock(http: Any, calls: list[SyntheticCall]) -> Any:
    position = [0]

    def answer(request: Any) -> Any:
        call = calls[position[0] % len(calls)]
        position[0] += 1
        return http.Response(200, json=_completion(call))

    return http.MockTransport(answer)


def _overhead(workdir: Path, calls: list[SyntheticCall], repeats: int, sdk: _Sdk) -> list[Figure]:
    http, wire = sdk.http(), sdk.wire()
    recorded = workdir / f"overhead-{sdk.library}.jsonl"
    recorder_client = sdk.client(wire.RecordingTransport(recorded, _library_mock(http, calls)))
    for call in calls:
        _make(recorder_client, call, False)
    recorder_client.close()
    counter = [0]

    def bare() -> float:
        client = sdk.client(_library_mock(http, calls))
        start = time.perf_counter()
        for call in calls:
            _make(client, call, False)
        return (time.perf_counter() - start) / len(calls)

    def recording() -> float:
        counter[0] += 1
        recorder = WireRecorder(workdir / f"overhead-{sdk.library}-{counter[0]}.jsonl", mode="all")
        client = sdk.client(wire.ObservedTransport(_library_mock(http, calls), [recorder]))
        start = time.perf_counter()
        for call in calls:
            _make(client, call, False)
        spent = (time.perf_counter() - start) / len(calls)
        recorder.close()
        return spent

    def replaying() -> float:
        source = wire.ReplayTransport(load_recording(recorded))
        client = sdk.client(source)
        start = time.perf_counter()
        for call in calls:
            _make(client, call, False)
        return (time.perf_counter() - start) / len(calls)

    pair = interleaved({"bare": bare, "recording": recording, "replaying": replaying}, repeats)
    figures = []
    for name in ("recording", "replaying"):
        added = pair.ratio(name, "bare") - 1
        low, high = pair.spread(name, "bare")
        figures.append(Figure(
            11, f"wire {name} adds to a bare SDK call{sdk.label}", added * 100, "%", "<= 5%", added <= 0.05,
            f"{name} {pair.median(name) * 1e6:.0f} µs vs bare SDK on {sdk.library}.MockTransport "
            f"{pair.median('bare') * 1e6:.0f} µs a call (+{(pair.median(name) - pair.median('bare')) * 1e6:.0f} µs "
            f"by medians); median of {repeats} paired ratios ({low:.2f}-{high:.2f}), {len(calls)} calls a repeat"))
    return figures


def run(workdir: Path, smoke: bool = False) -> list[Figure]:
    sizes = SMOKE_SIZES if smoke else FULL_SIZES
    repeats = 1 if smoke else 3
    vcr_plan = {100: 5} if smoke else {100: 100, 1_000: 25}
    calls = {n: synthetic_calls(n) for n in sizes}
    figures: list[Figure] = []
    measures: dict[str, Callable[[], float]] = {}
    for n in sizes:
        for stream in (False, True):
            kind = "streamed" if stream else "plain"
            path = record(workdir / f"wire-{kind}-{n}.jsonl", calls[n], stream)
            measures[f"{kind}@{n}"] = (lambda p=path, c=calls[n], s=stream: replay_seconds(p, c, s))
    growth = interleaved(measures, repeats)
    for kind in ("plain", "streamed"):
        for n in sizes:
            figures.append(Figure(11, f"wire replay per SDK call, {kind}, {n:,} calls",
                                  growth.median(f"{kind}@{n}") * 1e6, "µs", "",
                                  note="load + ReplayTransport under openai's chat.completions.create"))
        top = sizes[-1]
        if top != sizes[0]:
            flat = growth.ratio(f"{kind}@{top}", f"{kind}@{sizes[0]}")
            figures.append(Figure(11, f"wire replay growth, {kind}, {top:,} vs {sizes[0]} calls", flat, "x",
                                  "<= 1.2", flat <= 1.2, f"median of {repeats} paired ratios"))
    for n, sample in vcr_plan.items():
        if n not in calls:
            continue
        cassette = workdir / f"vcr-{n}.yaml"
        base_url = vcr_baseline.record_cassette(cassette, calls[n])
        step = max(1, n // sample)
        picked = calls[n][step - 1::step][:sample]

        def vcr_variant(n: int = n, cassette: Path = cassette, base_url: str = base_url,
                        picked: list[SyntheticCall] = picked) -> float:
            load, replay = vcr_baseline.replay_seconds(cassette, base_url, picked)
            return load / n + replay / len(picked)

        pair = interleaved({"wire": measures[f"plain@{n}"], "vcr": vcr_variant}, repeats)
        speedup = pair.ratio("vcr", "wire")
        how = "every call" if len(picked) == n else f"sample of {len(picked)} calls, every {step}th"
        target = ">= 100x" if n == 1_000 else ""
        figures.append(Figure(
            11, f"wire replay vs VCR.py, plain, {n:,} calls", speedup, "x faster", target,
            (speedup >= 100) if target else None,
            f"VCR.py {pair.median('vcr') * 1e3:.1f} ms a call ({how}), wire {pair.median('wire') * 1e6:.0f} µs; "
            f"median of {repeats} paired ratios"))
    if 1_000 not in calls:
        figures.append(Figure(11, "wire replay vs VCR.py, plain, 1,000 calls", None, "x faster", ">= 100x", None,
                              "smoke run: 100 calls only"))
    if 10_000 in calls:
        figures.append(_vcr_bounded(workdir, calls[10_000], growth.median("plain@10000")))
    for sdk in _sdks():
        figures += _overhead(workdir, calls[sizes[0]] if smoke else calls[1_000][:300], 3 if smoke else 15, sdk)
    from bench import peers

    figures += peers.wire_figures(smoke)
    figures += _overlapping(workdir, sizes, repeats)
    return figures


def _vcr_child(cassette: Path, calls: list[SyntheticCall], sample: int, out: Any) -> None:
    started = time.perf_counter()
    base_url = vcr_baseline.record_cassette(cassette, calls)
    recorded = time.perf_counter() - started
    step = max(1, len(calls) // sample)
    load, replay = vcr_baseline.replay_seconds(cassette, base_url, calls[step - 1::step][:sample])
    out.put((recorded, load, replay / sample))


def _vcr_bounded(workdir: Path, calls: list[SyntheticCall], wire_seconds: float, sample: int = 3) -> Figure:
    """VCR.py at 10,000 calls in a child process (forked: it inherits the calls), given
    `VCR_BOUND_S` in all; ended, by its own id, when it runs past the bound."""
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_vcr_child, args=(workdir / "vcr-10000.yaml", calls, sample, out))
    started = time.perf_counter()
    child.start()
    child.join(VCR_BOUND_S)
    spent = time.perf_counter() - started
    if child.is_alive():
        child.terminate()
        child.join()
        return Figure(11, "wire replay vs VCR.py, plain, 10,000 calls", None, "x faster", "", None,
                      f"not measured: VCR.py's recording, load and {sample} sampled calls took more than "
                      f"{VCR_BOUND_S:.0f} s (ended at {spent:.0f} s)")
    recorded, load, per_call = out.get(timeout=10)
    vcr_seconds = load / len(calls) + per_call
    return Figure(11, "wire replay vs VCR.py, plain, 10,000 calls", vcr_seconds / wire_seconds, "x faster", "",
                  note=f"VCR.py {vcr_seconds * 1e3:.1f} ms a call (sample of {sample}, load {load:.1f} s "
                       f"spread over the calls; recording the cassette took {recorded:.0f} s), wire "
                       f"{wire_seconds * 1e6:.0f} µs; one pass, within {VCR_BOUND_S:.0f} s")
