"""Figure 10, on the wire: what recording one call of a growing conversation costs, at 10,
100 and 1,000 turns.

A conversation of T turns goes through the `openai` SDK (`chat.completions.create`, the
whole conversation sent each turn, as every agent does) to an `httpx2.MockTransport` that
answers each at once, through `RecordingTransport`. Each turn adds a user line and the
assistant's reply, so the request grows by about 110 bytes a turn: 1.4 KB at 10 turns,
110 KB at 1,000. Measured: the calling thread's CPU time inside the recorder (`WireRecorder`
from the call's start to its line written: the request decoded, compared with the call
before, the line made, scrubbed and written), per call; and the bytes written a call,
against the request's own size. A line holds what is new in its request (format version 5),
so what it writes does not grow; what still grows is decoding the request the SDK sent and
comparing the conversation it resends with the one recorded (C code, linear in the request).
The sizes are interleaved in each repeat; the growth is the median of paired ratios.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import openai

from bench.stats import interleaved
from bench.table import Figure
from cafe.wire import RecordingTransport, WireRecorder

SIZES = (10, 100, 1_000)
SMOKE_SIZES = (10, 100)
KEY = "sk-bench-wire-not-a-real-key-0000"
SYSTEM = "You take orders at a café counter. Be brief and name each item's allergens."


def _answer(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, json={
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 1_767_225_600, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": "One latte, oat milk; that is 3.80.",
                                 "refusal": None}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21}})


class _TimedRecorder:
    """The CPU time the calling thread spends inside `recorder`'s start and finish."""

    def __init__(self, recorder: WireRecorder) -> None:
        self.seconds = 0.0
        start, finish = recorder.start, recorder._finish

        def timed_start(request: Any) -> Any:
            began = time.thread_time()
            try:
                return start(request)
            finally:
                self.seconds += time.thread_time() - began

        def timed_finish(call: Any, outcome: Any) -> None:
            began = time.thread_time()
            try:
                finish(call, outcome)
            finally:
                self.seconds += time.thread_time() - began

        recorder.start = timed_start  # type: ignore[method-assign]
        recorder._finish = timed_finish  # type: ignore[method-assign]


def conversation(path: Path, turns: int) -> tuple[float, int, int]:
    """(recorder CPU seconds a call, bytes written a call, request bytes a call) for one
    conversation of `turns` turns recorded to `path`."""
    path.unlink(missing_ok=True)
    sent = [0]

    def counting(request: httpx2.Request) -> httpx2.Response:
        sent[0] += len(request.content)
        return _answer(request)

    transport = RecordingTransport(path, httpx2.MockTransport(counting))
    timed = _TimedRecorder(transport.recorder)
    client = openai.OpenAI(api_key=KEY, base_url="http://bench.invalid/v1", max_retries=0,
                           http_client=httpx2.Client(transport=transport))
    messages: list[Any] = [{"role": "system", "content": SYSTEM}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"And one more latte for table {turn}, please."})
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages, temperature=0)
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})
    client.close()
    header = len(path.read_bytes().split(b"\n", 1)[0]) + 1
    return timed.seconds / turns, (path.stat().st_size - header) // turns, sent[0] // turns


def run(workdir: Path, smoke: bool = False) -> list[Figure]:
    sizes = SMOKE_SIZES if smoke else SIZES
    repeats = 1 if smoke else 3
    written: dict[int, tuple[int, int]] = {}

    def measure(turns: int) -> Callable[[], float]:
        def one() -> float:
            seconds, line_bytes, request_bytes = conversation(workdir / f"conversation-{turns}.jsonl", turns)
            written[turns] = (line_bytes, request_bytes)
            return seconds
        return one

    results = interleaved({str(n): measure(n) for n in sizes}, repeats)
    lines = " / ".join(f"{written[n][0]:,}" for n in sizes)
    requests = " / ".join(f"{written[n][1] / 1e3:,.1f}" for n in sizes)
    top, bottom = sizes[-1], sizes[0]
    growth = results.ratio(str(top), str(bottom))
    size_growth = written[top][0] / written[bottom][0]
    return [
        *(Figure(10, f"wire-recorded conversation, the recorder per call, {n:,} turns",
                 results.median(str(n)) * 1e6, "µs", "",
                 note="calling thread's CPU inside WireRecorder; openai SDK on httpx2.MockTransport")
          for n in sizes),
        Figure(10, f"wire recording per call, {top:,} vs {bottom} turns", growth, "x", "<= 1.5", growth <= 1.5,
               f"median of {repeats} paired ratios; the request decoded and its conversation compared, in C"),
        Figure(10, f"wire recording's bytes a call, {top:,} vs {bottom} turns", size_growth, "x", "<= 1.5",
               size_growth <= 1.5, f"{lines} B written a call; the requests {requests} KB (format 5)"),
    ]
