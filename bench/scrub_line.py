"""Figure 7: scrubbing one recorded line, before and after the one-pass scrubber.

The lines are the call lines of a recorded offline shift (system prompt, tool schemas and
the conversation so far: 3-5 kB each). The baseline is the scrubber as it was: every
pattern run over the serialised line one after another, then the line parsed again to
check that no replacement broke its JSON. The candidate is what `RecordingWriter` does
now: one search for the patterns' keywords in the serialised line, and a walk of the
string values with one combined pattern only when that search finds one. Both are given
the live client's key as a known secret, as the recorder is. The floor, in the same repeats:
serialising the line as the writer does (`json.dumps`, sorted keys), which any scrubber
that writes the line pays; the candidate's time over it is what scrubbing adds.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bench.stats import interleaved, time_per_op
from bench.table import Figure
from cafe.counter import record_shift
from cafe.counter.clients.scripted import ScriptedClient
from cafe.counter.consent import make_responder
from cafe.privacy import DEFAULT_SECRET_PATTERNS, Scrubber
from cafe.recording import load_recording

KEY = "sk-bench-0123456789abcdef0123"


class _Sequential:
    """The previous algorithm, kept here as the baseline."""

    def __init__(self, literal: str) -> None:
        forms = sorted({literal, json.dumps(literal)[1:-1]}, key=len, reverse=True)
        self._patterns = [re.compile(re.escape(form)) for form in forms] + [
            re.compile(pattern, re.DOTALL) if name == "private key" else re.compile(pattern)
            for name, pattern in DEFAULT_SECRET_PATTERNS
        ]

    def line(self, obj: dict[str, Any]) -> str:
        text = json.dumps(obj, ensure_ascii=False, sort_keys=True, allow_nan=False)
        for pattern in self._patterns:
            text = pattern.sub(_replace, text)
        json.loads(text)
        return text


def _replace(match: re.Match[str]) -> str:
    if match.lastindex:
        offset = match.start()
        start, end = match.span(1)
        whole = match.group(0)
        return whole[: start - offset] + "[REDACTED]" + whole[end - offset :]
    return "[REDACTED]"


def _one_pass(scrubber: Scrubber, obj: dict[str, Any]) -> str:
    text = json.dumps(obj, ensure_ascii=False, sort_keys=True, allow_nan=False)
    if scrubber.may_need_scrubbing(text):
        text = json.dumps(scrubber.scrub_json(obj), ensure_ascii=False, sort_keys=True, allow_nan=False)
    return text


def _lines(workdir: Path) -> list[dict[str, Any]]:
    path = workdir / "shift.jsonl"
    script = ["A latte and a chocolate croissant, please.", "What is in the croissant?", "Nothing else."]
    record_shift(ScriptedClient(), script, path, responder=make_responder([("approve", None)]), seed=7)
    return [call.to_json() for call in load_recording(path).calls]


def run(workdir: Path, smoke: bool = False) -> list[Figure]:
    lines = _lines(workdir)
    leaky = json.loads(json.dumps(lines[-1]))
    leaky["request"]["messages"].append({"role": "user", "content": f"my key is {KEY}, Authorization: Basic abcdEFGH"})
    before, after = _Sequential(KEY), Scrubber().with_literals([KEY])
    assert _one_pass(after, leaky).count("[REDACTED]") >= 2  # the candidate does scrub
    count, repeats = (20, 3) if smoke else (300, 15)

    def per_line(scrub) -> float:
        return time_per_op(lambda: [scrub(line) for line in lines], count) / len(lines)

    def serialised(line: dict[str, Any]) -> str:
        return json.dumps(line, ensure_ascii=False, sort_keys=True, allow_nan=False)

    paired = interleaved({
        "floor": lambda: per_line(serialised),
        "before": lambda: per_line(before.line),
        "after": lambda: per_line(lambda line: _one_pass(after, line)),
        "after, leaky": lambda: time_per_op(lambda: _one_pass(after, leaky), count),
        "before, leaky": lambda: time_per_op(lambda: before.line(leaky), count),
    }, repeats)
    size = sum(len(json.dumps(line)) for line in lines) // len(lines)
    speedup = 1 / paired.ratio("after", "before")
    return [
        Figure(7, "scrub per written line, before (sequential patterns + re-parse)",
               paired.median("before") * 1e6, "µs", note=f"{len(lines)} call lines of a recorded shift, "
               f"{size:,} B on average; median of {repeats} paired repeats of {count}"),
        Figure(7, "scrub per written line, after (keyword search, one-pass walk when needed)",
               paired.median("after") * 1e6, "µs"),
        Figure(7, "scrub speed-up per line", speedup, "x", ">= 5", speedup >= 5,
               note="median of the per-repeat ratios"),
        Figure(7, "scrub per written line / its floor", paired.ratio("after", "floor"), "x",
               note=f"floor: serialising the line alone, {paired.median('floor') * 1e6:.1f} µs; "
                    "median of the per-repeat ratios"),
        Figure(7, "scrub of a line that holds secrets, before / after",
               paired.median("before, leaky") * 1e6, "µs",
               note=f"after: {paired.median('after, leaky') * 1e6:.0f} µs (the walk with the combined pattern)"),
    ]
