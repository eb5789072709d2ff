"""Fixtures for otelstack's own process logic: sleepers and fake programs these tests start,
each stopped afterwards only after /proc shows it is still the process started."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.otelstack.helpers import SLEEPER, fake_pids, stat_fields


def _kill_if(pid: int, still_ours: Callable[[], bool]) -> None:
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        if still_ours():
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(handle, signal.SIGKILL)
    finally:
        os.close(handle)


@pytest.fixture
def sleepers(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """start(new_session=True, ignore_term=False, member=False) -> a sleeping python process
    (with member: it forks one more into its group, whose pid is in tmp_path/member-N)."""
    started: list[subprocess.Popen[bytes]] = []
    members: list[tuple[int, int]] = []

    def start(*, new_session: bool = True, ignore_term: bool = False, member: bool = False) -> subprocess.Popen[bytes]:
        member_file = tmp_path / f"member-{len(started)}"
        argv = [sys.executable, "-c", SLEEPER, *(["ignore-term"] if ignore_term else []),
                *(["member"] if member else []), str(member_file)]
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                   start_new_session=new_session)
        started.append(process)
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"
        if member:
            pid = int(member_file.read_text())
            fields = stat_fields(pid)
            assert fields is not None
            members.append((pid, int(fields[19])))
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()
    for pid, start_time in members:
        _kill_if(pid, lambda pid=pid, start_time=start_time: (stat_fields(pid) or [""] * 20)[19] == str(start_time))


@pytest.fixture
def fakes_dir(tmp_path: Path) -> Iterator[Path]:
    """Where fake programs are written; any of their processes still running at the end
    (their command line names a fake in this directory) is killed."""
    directory = tmp_path / "fakes"
    directory.mkdir()
    yield directory
    for pid in fake_pids(directory).values():
        def runs_a_fake(pid: int = pid) -> bool:
            try:
                return str(directory).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
            except FileNotFoundError:
                return False
        _kill_if(pid, runs_a_fake)
