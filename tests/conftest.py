"""The working-tree guard: the test suite must leave no new file in the git working tree.

At session start the untracked (and not ignored) files are listed; at session end any new
one, outside the tool caches, fails the session. Without git, or outside a git checkout,
the guard stands aside. And hypothesis's profile for a busy machine.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# On a loaded 2-core machine examples are made slowly: how long hypothesis takes to make
# them, or a test to run one, is no property of the code under test.
settings.register_profile("busy-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("busy-machine")

CACHE_PARTS = frozenset({".pytest_cache", "__pycache__", ".hypothesis", ".ruff_cache"})
_BASELINE_KEY = pytest.StashKey[tuple[Path, frozenset[str]] | None]()


def untracked_files(root: Path) -> frozenset[str] | None:
    """Untracked, non-ignored files under `root`'s git work tree, minus tool caches; None when
    git is absent or `root` is not inside a work tree."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(root), "ls-files", "--others", "--exclude-standard", "-z"],
            capture_output=True, check=False, timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if listed.returncode != 0:
        return None
    paths = (p for p in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if p)
    return frozenset(
        p for p in paths
        if not CACHE_PARTS.intersection(Path(p).parts) and not p.endswith((".pyc", ".pyo"))
    )


def new_files(before: frozenset[str], after: frozenset[str]) -> list[str]:
    return sorted(after - before)


def pytest_sessionstart(session: pytest.Session) -> None:
    root = Path(str(session.config.rootpath))
    found = untracked_files(root)
    session.stash[_BASELINE_KEY] = None if found is None else (root, found)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    baseline = session.stash.get(_BASELINE_KEY, None)
    if baseline is None:
        return
    root, before = baseline
    after = untracked_files(root)
    if after is None:
        return
    appeared = new_files(before, after)
    if not appeared:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = "working-tree guard: the test session left new files in the git work tree: " + ", ".join(appeared)
    if reporter is not None:
        reporter.write_line(message, red=True)
    else:  # pragma: no cover - without the terminal plugin
        print(message)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
