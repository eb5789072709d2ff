"""Figure 1 in CPU instructions: what a model call costs the calling thread, and the process.

Each variant runs in its own process under valgrind's callgrind (`--separate-threads=yes`,
so each thread's instructions are counted apart), `PYTHONHASHSEED=0`: 200 warm-up calls and
a flush, then `extra` more calls and a flush. Run once with `extra` = 0 and once with
`extra` = CALLS; the difference of the two counts, divided by CALLS, is one call's cost with
the process's start, imports and warm-up taken out. The calling thread is the process's
first thread; the whole process adds the export worker (and any other thread: the fail-soft
export thread, the metric reader) doing that call's share of the work. Instruction counts do
not depend on the machine's load, so these are the verdicts' figures; the flushes keep every
span of a phase inside it (1,200 spans fit either processor's queue of 2,048).

`python -m bench.instructions child VARIANT EXTRA` is the measured process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

WARMUP = 200
CALLS = 1_000
VARIANTS = ("sdk", "ours", "ours_spans", "ours_unchecked")


@dataclass(frozen=True)
class Count:
    caller: float  # instructions a call on the calling thread
    process: float  # instructions a call over every thread


def _loop(variant: str) -> tuple[Callable[[], None], Callable[[], object], Callable[[], int]]:
    """(one call, a flush, spans lost so far) for `variant`."""
    from bench.nothing import NothingExporter
    from bench.workload import InstantClient, _call, _configure, exported_shape
    from cafe.counter.clients.tracing import TracingClient

    call = _call()
    if variant == "sdk":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        name, kind, start, end = exported_shape(False)
        provider = TracerProvider(shutdown_on_exit=False)
        exporter = NothingExporter()
        provider.add_span_processor(BatchSpanProcessor(exporter))
        tracer = provider.get_tracer("bench.bare")
        made = [0]

        def bare() -> None:
            with tracer.start_as_current_span(name, kind=kind, attributes=start) as span:
                span.set_attributes(end)
            made[0] += 1
        return bare, provider.force_flush, lambda: made[0] - exporter.spans
    handle = _configure(False, NothingExporter(), metadata_only=variant != "ours_unchecked",
                        metrics=variant in ("ours", "ours_unchecked"))
    chat = TracingClient(InstantClient(call.response), handle.tracer(tree=False)).chat

    def ours() -> None:
        chat(call.messages, call.tools, call.temperature)
    return ours, lambda: handle.force_flush(30.0), lambda: handle.account.dropped


def child(variant: str, extra: int) -> None:
    one, flush, lost = _loop(variant)
    for _ in range(WARMUP):
        one()
    flush()
    for _ in range(extra):
        one()
    flush()
    if lost():
        raise SystemExit(f"{lost()} spans lost: the count would miss their export")


def _totals(directory: Path) -> tuple[int, int]:
    """(the first thread's instructions, every thread's) from callgrind's per-thread files."""
    per_thread: dict[int, int] = {}
    for path in directory.glob("callgrind.out*"):
        thread = None
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("thread:"):
                thread = int(line.split()[1])
            elif line.startswith(("summary:", "totals:")) and thread is not None:
                per_thread[thread] = int(line.split()[1])
                break
    if not per_thread:
        raise RuntimeError(f"callgrind wrote no counts in {directory}")
    return per_thread[min(per_thread)], sum(per_thread.values())


def _counted(variant: str, extra: int, workdir: Path) -> tuple[int, int]:
    out = workdir / f"{variant}-{extra}"
    out.mkdir(parents=True)
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                    f"--callgrind-out-file={out}/callgrind.out.%p",
                    sys.executable, "-m", "bench.instructions", "child", variant, str(extra)],
                   check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return _totals(out)


def available() -> bool:
    return shutil.which("valgrind") is not None


def count(variant: str, workdir: Path, calls: int = CALLS) -> Count:
    return count_all([variant], workdir, calls)[variant]


def count_all(variants: list[str], workdir: Path, calls: int = CALLS, parallel: int = 3) -> dict[str, Count]:
    """Every variant's count. The processes run side by side: a count does not depend on the
    machine's load, and each takes minutes under valgrind."""
    runs = [(variant, extra) for variant in variants for extra in (0, calls)]
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        totals = dict(zip(runs, pool.map(lambda run: _counted(run[0], run[1], workdir), runs), strict=True))
    counts = {}
    for variant in variants:
        (base_caller, base_all), (caller, whole) = totals[variant, 0], totals[variant, calls]
        counts[variant] = Count((caller - base_caller) / calls, (whole - base_all) / calls)
    return counts


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "child":
        child(sys.argv[2], int(sys.argv[3]))
    else:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            for name, found in count_all(sys.argv[1:] or list(VARIANTS), Path(tmp)).items():
                print(f"{name}: caller {found.caller / 1e3:.1f}k, process {found.process / 1e3:.1f}k "
                      "instructions a call", flush=True)
