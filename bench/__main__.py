"""`python -m bench [--smoke] [--only N ...] [--markdown]`: run the benchmarks, print the table.

Exit status is 0 whatever the figures are (a missed target is a finding, not a failure) and
1 only when a benchmark itself crashed, so that CI's smoke run keeps them working.
"""

from __future__ import annotations

import argparse
import importlib
import shlex
import sys
import tempfile
import time
import traceback
from pathlib import Path

from bench.table import Figure, machine, render

# number -> (what it measures, its module, whether its `run` takes a work directory)
BENCHMARKS: dict[int, tuple[str, str, bool]] = {
    1: ("instrumentation overhead per model call", "overhead", True),
    2: ("replay cost per call and growth", "replay_scaling", True),
    3: ("a dead backend", "dead_backend", True),
    4: ("throughput into the real Collector", "throughput", True),
    5: ("memory during an outage", "outage_memory", False),
    6: ("import cost", "import_cost", False),
    7: ("scrubbing a recorded line", "scrub_line", True),
    8: ("what each Collector tier costs", "tiers", True),
    9: ("the peers: OpenAI instrumentations side by side", "peers", False),
    10: ("a model call's cost at any length of shift", "shift_cost", True),
    11: ("the wire: replay through the openai SDK, and what the transport adds", "wire_replay", True),
    12: ("what the pytest plugins cost a test that does not use them", "plugin_cost", True),
}
NAMES = {number: name for number, (name, _, _) in BENCHMARKS.items()}


def _run_one(number: int, workdir: Path, smoke: bool) -> list[Figure]:
    # Imported when run: a benchmark's module may pull in what the others do not need.
    _, module_name, takes_workdir = BENCHMARKS[number]
    module = importlib.import_module(f"bench.{module_name}")
    figures: list[Figure] = module.run(workdir, smoke=smoke) if takes_workdir else module.run(smoke=smoke)
    return figures


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
