"""Medians of repeats and pair-by-pair ratios, measured with baseline and candidate interleaved.

The machine these run on is shared and noisy, so an absolute time alone says little. Every
figure is taken as pairs: in each repeat the baseline and the candidate run back to back
(the order alternating from one repeat to the next, so neither always runs on a warmer
cache or a quieter moment), and a ratio is the median of the per-repeat ratios.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


@dataclass
class Paired:
    """Samples of several variants taken in the same repeats: samples[name][repeat]."""

    samples: dict[str, list[float]] = field(default_factory=dict)

    def median(self, name: str) -> float:
        return median(self.samples[name])

    def ratios(self, candidate: str, baseline: str) -> list[float]:
        return [c / b for c, b in zip(self.samples[candidate], self.samples[baseline], strict=True) if b > 0]

    def ratio(self, candidate: str, baseline: str) -> float:
        """Median of the per-repeat ratios candidate/baseline."""
        return median(self.ratios(candidate, baseline))

    def spread(self, candidate: str, baseline: str) -> tuple[float, float]:
        values = sorted(self.ratios(candidate, baseline))
        return (values[0], values[-1]) if values else (float("nan"), float("nan"))


def interleaved(variants: Mapping[str, Callable[[], float]], repeats: int) -> Paired:
    """Run every variant once per repeat, rotating the order each repeat. Each callable
    returns its own measurement (seconds per unit, or any number); the garbage collector
    is run before each so that one variant's garbage is not collected on another's clock."""
    names = list(variants)
    paired = Paired({name: [] for name in names})
    for repeat in range(repeats):
        shift = repeat % len(names)
        order = names[shift:] + names[:shift]
        if repeat % 2:
            order.reverse()
        for name in order:
            gc.collect()
            paired.samples[name].append(variants[name]())
    return paired


def time_per_op(operation: Callable[[], object], count: int) -> float:
    """Seconds per call of `operation` over `count` calls. The garbage collector stays on:
    the collections an allocation-heavy path causes are part of what it costs."""
    start = time.perf_counter()
    for _ in range(count):
        operation()
    return (time.perf_counter() - start) / count
