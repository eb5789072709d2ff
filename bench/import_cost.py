"""Figure 6: what `import cafe` and cafe's pytest plugin cost a fresh interpreter.

Each sample is a fresh `python -c` that runs a set-up statement, then times one import
statement with `time.perf_counter` and prints the seconds: the interpreter's own start-up,
the same for every variant and noisy on a shared machine, is left out. The variants are
interleaved per repeat. The plugin is timed after `import pytest`, as pytest imports it (into
every session on a machine where cafe is installed). The "eager" variants import what
`import cafe` and the plugin loaded before they were made lazy (the whole harness, the
recording package and the `openai` SDK), for comparison in the same run.

The extras: what each adds to an install (the bytes of the files of every distribution its
requirements pull in that the core's do not, as installed here) and what importing its
OTLP span exporter costs a fresh interpreter that has imported `cafe_otel`.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from bench.stats import interleaved
from bench.table import Figure

REPO = Path(__file__).resolve().parents[1]
NUMBER = 6

EAGER_CAFE = ("import cafe.counter.consent, cafe.counter.executor, cafe.counter.handover, cafe.counter.loop, "
              "cafe.recording, cafe.trace, openai")
VARIANTS = {  # name: (set-up, the statement timed)
    "cafe": ("pass", "import cafe"),
    "cafe eager": ("pass", EAGER_CAFE),
    "plugin": ("import pytest", "import cafe.pytest_plugin"),
    "plugin eager": ("import pytest", f"import cafe.pytest_plugin; {EAGER_CAFE}"),
    "otlp/http exporter": ("import cafe_otel", "import opentelemetry.exporter.otlp.proto.http.trace_exporter"),
    "otlp/grpc exporter": ("import cafe_otel", "import opentelemetry.exporter.otlp.proto.grpc.trace_exporter"),
}


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _closure(requirements: list[str]) -> set[str]:
    """The installed distributions `requirements` pull in, transitively (markers of extras
    ignored: what an ordinary install of them brings)."""
    found: set[str] = set()
    todo = [r for r in requirements if "extra ==" not in r]
    while todo:
        name = _name(todo.pop())
        if name in found:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        found.add(name)
        todo += [r for r in dist.requires or () if "extra ==" not in r]
    return found


def _bytes(names: set[str]) -> int:
    total = 0
    for name in names:
        for file in importlib.metadata.distribution(name).files or ():
            with contextlib.suppress(OSError):
                total += os.stat(file.locate()).st_size
    return total


def extra_sizes() -> dict[str, tuple[int, list[str]]]:
    """Extra (and "core") -> (installed bytes it adds, the distributions it adds)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = _closure(project["dependencies"])
    sizes = {"core": (_bytes(core), sorted(core))}
    for extra in ("grpc",):
        added = _closure(project["optional-dependencies"][extra]) - core
        sizes[extra] = (_bytes(added), sorted(added))
    return sizes


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

    sizes = extra_sizes()
    core_bytes, core_names = sizes["core"]
    grpc_bytes, grpc_names = sizes["grpc"]
    return [
        Figure(NUMBER, "installed size, core (cafe-otel)", core_bytes / 1e6, "MB",
               note=f"{len(core_names)} distributions, OTLP/HTTP included; no grpcio"),
        Figure(NUMBER, "installed size the grpc extra adds", grpc_bytes / 1e6, "MB",
               note=f"{', '.join(grpc_names)} ({grpc_bytes / core_bytes:.0%} of the core)"),
        Figure(NUMBER, "import of the OTLP/HTTP span exporter after cafe_otel", ms("otlp/http exporter"), "ms",
               note="the core's exporter; paid only when OTLP/HTTP is configured"),
        Figure(NUMBER, "import of the OTLP/gRPC span exporter after cafe_otel (grpc extra)", ms("otlp/grpc exporter"),
               "ms", note="paid only when OTLP/gRPC is configured"),
        Figure(NUMBER, "import cafe", ms("cafe"), "ms",
               note=f"median of {repeats} fresh interpreters; loads no openai; {ratio('cafe')}"),
        Figure(NUMBER, "import cafe, eager (the whole harness + openai)", ms("cafe eager"), "ms",
               note="what `import cafe` loaded before it was lazy"),
        Figure(NUMBER, "import cafe.pytest_plugin after pytest", ms("plugin"), "ms",
               note=f"paid by every pytest session where cafe is installed; {ratio('plugin')}"),
        Figure(NUMBER, "pytest plugin, eager (the whole harness + openai)", ms("plugin eager"), "ms",
               note="what the plugin loaded before: the harness, cafe.recording and the openai SDK"),
    ]
