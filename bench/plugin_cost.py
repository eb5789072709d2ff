"""Figure 12: what cafe's pytest plugins cost a test that uses neither the marker nor a fixture.

pytest loads every installed `pytest11` plugin in every session, so `cafe_recording` and
`cafe_counter` run in a user's whole test suite, most of whose tests never record. Each
variant is one pytest session (`-p no:cacheprovider`, its own empty `pytest.ini`, so the
project's configuration is not read) under valgrind's callgrind over every thread,
`PYTHONHASHSEED=0`, on a file of trivial tests (`def test_N(): pass`): once with `TESTS`
of them and once with 2 x `TESTS`; the difference, divided by `TESTS`, is one trivial test's
cost with the session's start, imports and collection setup taken out. The variants are the
session with cafe's plugins (as installed) and without them (`-p no:cafe_recording
-p no:cafe_counter`); the plugins' cost per unmarked test is their difference, and the
verdict is that difference against a trivial test's cost without them.

`python -m bench.plugin_cost` prints the counts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.instructions import _totals, available
from bench.table import Figure

TESTS = 500
WITHOUT = ("-p", "no:cafe_recording", "-p", "no:cafe_counter")
TARGET = 0.02  # of a trivial test's own cost


def _session(workdir: Path, name: str, tests: int, flags: tuple[str, ...], counted: bool = True) -> int:
    """Every thread's instructions for one pytest session of `tests` trivial tests (0 when not
    `counted`: the session runs without valgrind, as the smoke run keeps it working)."""
    project = workdir / f"{name}-{tests}"
    project.mkdir(parents=True)
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "test_trivial.py").write_text("".join(f"def test_{n}():\n    pass\n\n\n" for n in range(tests)))
    out = project / "callgrind"
    out.mkdir()
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_PLUGINS", None)
    under = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
             f"--callgrind-out-file={out}/callgrind.out.%p"] if counted else []
    subprocess.run([*under, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *flags, str(project)],
                   check=True, env=env, cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return _totals(out)[1] if counted else 0


def per_test(workdir: Path, tests: int = TESTS) -> tuple[float, float]:
    """(a trivial test's instructions without cafe's plugins, what the plugins add to it)."""
    runs = [(name, count, flags) for name, flags in (("with", ()), ("without", WITHOUT))
            for count in (tests, 2 * tests)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = dict(zip([(name, count) for name, count, _ in runs],
                          pool.map(lambda run: _session(workdir, *run), runs), strict=True))
    without = (counts["without", 2 * tests] - counts["without", tests]) / tests
    with_plugins = (counts["with", 2 * tests] - counts["with", tests]) / tests
    return without, with_plugins - without


def run(workdir: Path, smoke: bool = False) -> list[Figure]:
    if not available():
        return [Figure(12, "pytest plugins per unmarked test, instructions", None, "%", f"<= {TARGET:.0%}", None,
                       "blocked: valgrind is not installed")]
    if smoke:  # as figure 9's: callgrind takes minutes a session, so the smoke run counts nothing
        for name, flags in (("with", ()), ("without", WITHOUT)):
            _session(workdir, name, 5, flags, counted=False)
        return [Figure(12, "pytest plugins per unmarked test, instructions", None, "%", f"<= {TARGET:.0%}", None,
                       "not counted: smoke run")]
    tests = TESTS
    trivial, added = per_test(workdir, tests)
    share = added / trivial
    return [Figure(12, "pytest plugins per unmarked test (cafe_recording + cafe_counter), instructions",
                   share * 100, "%", f"<= {TARGET:.0%}", share <= TARGET,
                   f"{added / 1e3:+,.1f}k instructions a test against a trivial test's {trivial / 1e3:,.1f}k "
                   f"without the plugins; callgrind over every thread, (session of {2 * tests} tests - "
                   f"of {tests}) / {tests}, PYTHONHASHSEED=0")]


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        trivial, added = per_test(Path(tmp), int(sys.argv[1]) if len(sys.argv) > 1 else TESTS)
        print(f"trivial test {trivial / 1e3:.1f}k, plugins add {added / 1e3:+.1f}k instructions "
              f"({added / trivial:.1%})")
