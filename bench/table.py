"""A figure, its target, and the table `python -m bench` prints."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class Figure:
    bench: int  # which of the benchmarks (1-7)
    name: str
    value: float | None  # None: not measured (see note)
    unit: str
    target: str = ""  # e.g. "<= 1.25"; empty for a figure reported for reference
    met: bool | None = None  # None: no target, or not measured
    note: str = ""

    def shown(self) -> str:
        if self.value is None:
            return "n/a"
        value = self.value
        if self.unit in ("x", "ratio"):
            text = f"{value:.3g}" if value < 100 else f"{value:,.0f}"
        elif abs(value) >= 1000:
            text = f"{value:,.0f}"
        elif abs(value) >= 10:
            text = f"{value:.1f}"
        else:
            text = f"{value:.3g}"
        return f"{text} {self.unit}".strip()

    def verdict(self) -> str:
        if not self.target:
            return ""
        if self.met is None:
            return "not measured"
        return "met" if self.met else "MISSED"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = ""
    if hasattr(os, "getloadavg"):
        load = ", load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    return (
        f"{platform.system()} {platform.release()}, {os.cpu_count()} CPU(s) {cpu}, "
        f"Python {sys.version.split()[0]}{load}"
    )


def render(figures: Sequence[Figure], markdown: bool = False) -> str:
    header = ["#", "figure", "value", "target", "verdict", "note"]
    rows = [[str(f.bench), f.name, f.shown(), f.target, f.verdict(), f.note] for f in figures]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(header[i]), *(len(row[i]) for row in rows)) if rows else len(header[i])
              for i in range(len(header))]
    widths[-1] = len(header[-1])  # the note runs on without padding

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(cells)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(row) for row in rows)])
