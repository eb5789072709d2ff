"""Proving that a pid still names the process `up` started.

A pid alone proves nothing: the kernel gives a freed pid to the next process. `up` records,
with each pid, the boot it ran in, its start time (clock ticks after boot, /proc/PID/stat
field 22), its executable and command line. Two processes of one boot never share a pid and
a start time, so when all of them match, the pid is still ours.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from otelstack.errors import ProcUnavailable

PROC = Path("/proc")
BOOT_ID = PROC / "sys" / "kernel" / "random" / "boot_id"
# The kernel's limit for /proc/sys/kernel/pid_max.
PID_LIMIT = 1 << 22
_LISTEN = "0A"  # TCP_LISTEN in /proc/PID/net/tcp's `st` column


@dataclass(frozen=True)
class ProcessIdentity:
    pid: int
    start_time: int
    boot_id: str
    executable: str
    cmdline: tuple[str, ...]


@dataclass(frozen=True)
class _Stat:
    state: str
    pgid: int
    session: int
    start_time: int


def boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError as error:
        raise ProcUnavailable(f"cannot read {BOOT_ID} ({error.strerror}): otelstack needs Linux's /proc "
                              "to prove which processes it started") from None


def _stat(pid: int) -> _Stat | None:
    """None when no process has `pid`, or it has exited and waits for its parent (a zombie)."""
    try:
        raw = (PROC / str(pid) / "stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) is in parentheses and may itself hold spaces and ')'.
    fields = raw[raw.rindex(b")") + 2:].split()
    state = fields[0].decode()
    if state in ("Z", "X"):
        return None
    # fields[0] is field 3 of the man page: pgrp is field 5, session 6, starttime 22.
    return _Stat(state, int(fields[2]), int(fields[3]), int(fields[19]))


def identify(pid: int) -> ProcessIdentity | None:
    """What /proc says of `pid` now; None when it is gone. PermissionError when its
    executable is another user's to know."""
    before = _stat(pid)
    if before is None:
        return None
    try:
        executable = os.readlink(PROC / str(pid) / "exe")
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None
    after = _stat(pid)
    # Read twice: between the reads the process may have ended and its pid gone to another.
    if after is None or after.start_time != before.start_time:
        return None
    cmdline = tuple(part.decode(errors="surrogateescape") for part in raw.split(b"\0")[:-1])
    return ProcessIdentity(pid, before.start_time, boot_id(), executable, cmdline)


@dataclass(frozen=True)
class Verdict:
    """`ours`: the recorded process runs, proven. Else `why_not` says why it is not, or
    None when it is simply gone."""

    ours: bool
    why_not: str | None = None


GONE = Verdict(False)


def verify(record: ProcessIdentity) -> Verdict:
    """Whether `record.pid` is still the process `up` recorded, and why not."""
    if record.boot_id != boot_id():
        return Verdict(False, "it was recorded before the machine last booted")
    status = _stat(record.pid)
    if status is None:
        return GONE
    if status.start_time != record.start_time:
        return Verdict(False, "its start time differs: the pid now names another process")
    if status.session != record.pid:
        return Verdict(False, "it does not lead its own session, as each process `up` starts does")
    try:
        found = identify(record.pid)
    except PermissionError:
        return Verdict(False, "another user's process (its executable cannot be read)")
    if found is None:
        return GONE
    # A rebuild may delete the binary of a running program; the kernel then says so.
    if found.executable not in (record.executable, f"{record.executable} (deleted)"):
        return Verdict(False, "it runs another executable")
    if found.cmdline != record.cmdline:
        return Verdict(False, "its command line differs")
    return Verdict(True)


def own_ids() -> frozenset[int]:
    """This process, its parent, its group and its session: never to be signalled from a record."""
    return frozenset({os.getpid(), os.getppid(), os.getpgrp(), os.getsid(0)})


def listening_ports(pid: int) -> set[int]:
    """The TCP ports `pid` itself holds a listening socket on (any of its file descriptors)."""
    held: set[str] = set()
    try:
        for fd in os.listdir(PROC / str(pid) / "fd"):
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                target = os.readlink(PROC / str(pid) / "fd" / fd)
                if target.startswith("socket:["):
                    held.add(target[len("socket:["):-1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return set()
    ports: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / str(pid) / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            columns = line.split()
            if len(columns) > 9 and columns[3] == _LISTEN and columns[9] in held:
                ports.add(int(columns[1].rpartition(":")[2], 16))
    return ports



def pidfd(pid: int) -> int | None:
    """A pidfd for `pid` (signals through it reach that process or none); None when gone."""
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return None
    except OSError as error:
        raise ProcUnavailable(f"cannot open a pidfd ({error.strerror}): otelstack needs Linux 5.3 or later "
                              "to signal only the processes it started") from None


def signal_group_members(pgid: int, signum: int) -> None:
    """Send `signum` to each live process of group `pgid` but its leader.

    Each is signalled through its own pidfd, opened before its /proc entry is read: a
    signal that arrives means the process was alive since the pidfd opened, so the group
    the entry named was its own, not a later holder's of the same pid.
    """
    for entry in os.listdir(PROC):
        if not entry.isdigit() or int(entry) == pgid:
            continue
        member = int(entry)
        first = _stat(member)
        if first is None or first.pgid != pgid:
            continue
        handle = pidfd(member)
        if handle is None:
            continue
        try:
            status = _stat(member)
            if status is not None and status.pgid == pgid:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(handle, signum)
        finally:
            os.close(handle)
