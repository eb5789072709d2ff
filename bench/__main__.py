"""`python -m bench [--smoke] [--only N ...] [--markdown]`: run the benchmarks, print the table.

Exit status is 0 whatever the figures are (a missed target is a finding, not a failure) and
1 only when a benchmark itself crashed, so that CI's smoke run keeps them working.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
import traceback
from pathlib import Path

from bench.table import Figure, machine, render

NAMES = {
    1: "instrumentation overhead per model call",
    2: "replay cost per call and growth",
    3: "a dead backend",
    4: "throughput into the real Collector",
    5: "memory during an outage",
    6: "import cost",
    7: "scrubbing a recorded line",
    8: "what each Collector tier costs",
    9: "the peers: OpenAI instrumentations side by side",
}


def _run_one(number: int, workdir: Path, smoke: bool) -> list[Figure]:
    if number == 1:
        from bench import overhead

        return overhead.run(smoke=smoke)
    if number == 2:
        from bench import replay_scaling

        return replay_scaling.run(workdir, smoke=smoke)
    if number == 3:
        from bench import dead_backend

        return dead_backend.run(workdir, smoke=smoke)
    if number == 4:
        from bench import throughput

        return throughput.run(workdir, smoke=smoke)
    if number == 6:
        from bench import import_cost

        return import_cost.run(smoke=smoke)
    if number == 7:
        from bench import scrub_line

        return scrub_line.run(workdir, smoke=smoke)
    if number == 8:
        from bench import tiers

        return tiers.run(workdir, smoke=smoke)
    if number == 9:
        from bench import peers

        return peers.run(smoke=smoke)
    from bench import outage_memory

    return outage_memory.run(smoke=smoke)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="a fast run (< 60 s) that only keeps them working")
    parser.add_argument("--only", type=int, action="append", choices=sorted(NAMES), metavar="N",
                        help="run benchmark N only (repeatable)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown too")
    args = parser.parse_args(argv)
    chosen = sorted(set(args.only or NAMES))
    command = "python -m bench " + shlex.join(sys.argv[1:] if argv is None else argv)

    figures: list[Figure] = []
    crashed = False
    started = time.monotonic()
    print(f"machine: {machine()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="cafe-bench-") as tmp:
        for number in chosen:
            began = time.monotonic()
            print(f"[{number}] {NAMES[number]} ...", file=sys.stderr, flush=True)
            workdir = Path(tmp) / f"bench{number}"
            workdir.mkdir()
            try:
                found = _run_one(number, workdir, args.smoke)
            except Exception as error:  # report and go on to the next benchmark
                crashed = True
                traceback.print_exc()
                found = [Figure(number, NAMES[number], None, "", "", None,
                                f"crashed: {type(error).__name__}: {error}"[:300])]
            figures += found
            print(f"[{number}] done in {time.monotonic() - began:.0f}s", file=sys.stderr, flush=True)

    print(f"command: {command.strip()}  ({time.monotonic() - started:.0f} s)")
    print(render(figures))
    if args.markdown:
        print()
        print(render(figures, markdown=True))
    return 1 if crashed else 0


if __name__ == "__main__":
    raise SystemExit(main())
