"""The working-tree guard of tests/conftest.py, exercised on a scratch git repository."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest as guard

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True, capture_output=True)
    (root / ".gitignore").write_text("ignored/\n", encoding="utf-8")
    return root


def _session(root: Path, exitstatus=pytest.ExitCode.OK):
    reporter = SimpleNamespace(lines=[])
    reporter.write_line = lambda line, **kwargs: reporter.lines.append(line)
    config = SimpleNamespace(rootpath=root, pluginmanager=SimpleNamespace(get_plugin=lambda name: reporter))
    return SimpleNamespace(config=config, stash=pytest.Stash(), exitstatus=exitstatus), reporter


@needs_git
def test_untracked_files_lists_new_files_but_not_caches_or_ignored(tmp_path):
    root = _repo(tmp_path)
    before = guard.untracked_files(root)
    assert before == {".gitignore"}
    for relative in ("new.jsonl", "pkg/__pycache__/m.cpython-311.pyc", ".pytest_cache/v/x",
                     ".hypothesis/examples/x", "ignored/trace.jsonl", "stray.pyc"):
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("x", encoding="utf-8")
    after = guard.untracked_files(root)
    assert guard.new_files(before, after) == ["new.jsonl"]


@needs_git
def test_the_session_fails_when_a_file_appears(tmp_path):
    root = _repo(tmp_path)
    session, reporter = _session(root)
    guard.pytest_sessionstart(session)
    (root / "leaked.jsonl").write_text("{}", encoding="utf-8")
    guard.pytest_sessionfinish(session, 0)
    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED
    assert "leaked.jsonl" in reporter.lines[0]


@needs_git
def test_a_clean_session_is_left_alone(tmp_path):
    root = _repo(tmp_path)
    (root / "already-here.txt").write_text("x", encoding="utf-8")
    session, reporter = _session(root)
    guard.pytest_sessionstart(session)
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "x.pyc").write_bytes(b"")
    guard.pytest_sessionfinish(session, 0)
    assert session.exitstatus == pytest.ExitCode.OK and reporter.lines == []


def test_without_git_the_guard_stands_aside(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin-here"))
    assert guard.untracked_files(tmp_path) is None
    session, reporter = _session(tmp_path)
    guard.pytest_sessionstart(session)
    (tmp_path / "anything.txt").write_text("x", encoding="utf-8")
    guard.pytest_sessionfinish(session, 0)
    assert session.exitstatus == pytest.ExitCode.OK and reporter.lines == []


@needs_git
def test_outside_a_git_work_tree_the_guard_stands_aside(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    plain = tmp_path / "plain"
    plain.mkdir()
    assert guard.untracked_files(plain) is None
