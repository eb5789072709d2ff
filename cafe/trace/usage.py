"""Summing what a shift's model calls cost: tokens and seconds, per generation span."""

from __future__ import annotations

from dataclasses import dataclass

from cafe.trace.tracer import Tracer


@dataclass(frozen=True)
class Usage:
    calls: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    seconds: float


def usage_of(tracer: Tracer) -> Usage:
    generations = [node for node in tracer.generations() if node.generation is not None]
    totals = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    for node in generations:
        for key in totals:
            totals[key] += int(node.generation.usage.get(key, 0))  # type: ignore[union-attr]
    return Usage(
        calls=len(generations),
        input_tokens=totals["prompt_tokens"],
        output_tokens=totals["completion_tokens"],
        total_tokens=totals["total_tokens"],
        seconds=round(sum(node.duration for node in generations), 6),
    )
