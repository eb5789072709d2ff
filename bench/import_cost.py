"""Figure 6: what `import cafe` and cafe's pytest plugin cost a fresh interpreter.

Each sample is a fresh `python -c` that runs a set-up statement, then times one import
statement with `time.perf_counter` and prints the seconds: the interpreter's own start-up,
the same for every variant and noisy on a shared machine, is left out. The variants are
interleaved per repeat. The plugin is timed after `import pytest`, as pytest imports it (into
every session on a machine where cafe is installed). The "eager" variants import what
`import cafe` and the plugin loaded before they were made lazy (the whole harness, the
recording package and the `openai` SDK), for comparison in the same run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.stats import interleaved
from bench.table import Figure

REPO = Path(__file__).resolve().parents[1]
NUMBER = 6

EAGER_CAFE = "import cafe.consent, cafe.executor, cafe.handover, cafe.loop, cafe.recording, cafe.trace, openai"
VARIANTS = {  # name: (set-up, the statement timed)
    "cafe": ("pass", "import cafe"),
    "cafe eager": ("pass", EAGER_CAFE),
    "plugin": ("import pytest", "import cafe.pytest_plugin"),
    "plugin eager": ("import pytest", f"import cafe.pytest_plugin; {EAGER_CAFE}"),
}


def _timer(setup: str, statement: str) -> float:
    code = f"import time\n{setup}\nt = time.perf_counter()\n{statement}\nprint(time.perf_counter() - t)"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # cwd=REPO: `python -c` puts the working directory first on sys.path.
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, check=True, timeout=60,
                          capture_output=True, text=True)
    return float(done.stdout.split()[-1])


def run(smoke: bool = False) -> list[Figure]:
    repeats = 3 if smoke else 21
    for setup, statement in VARIANTS.values():
        _timer(setup, statement)  # compile and cache once, outside the samples
    paired = interleaved({name: (lambda v=v: _timer(*v)) for name, v in VARIANTS.items()}, repeats)

    def ms(name: str) -> float:
        return paired.median(name) * 1000

    def ratio(name: str) -> str:
        lo, hi = paired.spread(name, f"{name} eager")
        return f"{paired.ratio(name, name + ' eager'):.3f} x of eager (range {lo:.3f}-{hi:.3f})"

    return [
        Figure(NUMBER, "import cafe", ms("cafe"), "ms",
               note=f"median of {repeats} fresh interpreters; loads no openai; {ratio('cafe')}"),
        Figure(NUMBER, "import cafe, eager (the whole harness + openai)", ms("cafe eager"), "ms",
               note="what `import cafe` loaded before it was lazy"),
        Figure(NUMBER, "import cafe.pytest_plugin after pytest", ms("plugin"), "ms",
               note=f"paid by every pytest session where cafe is installed; {ratio('plugin')}"),
        Figure(NUMBER, "pytest plugin, eager (the whole harness + openai)", ms("plugin eager"), "ms",
               note="what the plugin loaded before: the harness, cafe.recording and the openai SDK"),
    ]
