"""The stack directory (`--dir`, `.stack` for make): stack.json, the programs' logs and data.

The directory is opened once without following a symbolic link, and every file in it is
opened relative to that descriptor, again without following one: a link planted at
stack.json or a log would otherwise have `up` write, or `down` read, a file elsewhere.
stack.json is replaced whole (a temporary file, then rename), so a reader never sees half
of it and a second name of the old file (a hard link) keeps its content.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
from pathlib import Path
from types import TracebackType
from typing import Any

from otelstack.errors import StackDirectoryUnusable, StackStateMalformed
from otelstack.identity import PID_LIMIT, ProcessIdentity

STATE = "stack.json"
STATE_VERSION = 1
MAX_STATE_BYTES = 64 * 1024
RECORD_KEYS = frozenset({"pid", "start_time", "boot_id", "executable", "cmdline"})
_BOOT_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO planted at a file's name fails at once instead of waiting.
_FILE_FLAGS = _NOFOLLOW | os.O_NONBLOCK


def _is_link(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def _file_above(path: Path) -> Path:
    """The first part of `path`, from the top, that exists and is not a directory (else `path`)."""
    for part in (*reversed(path.parents), path):
        if os.path.lexists(part) and not os.path.isdir(part):
            return part
    return path


def _check_owned(path: Path, fd: int) -> None:
    """Refuse a directory of another user, or one others may write into (a shared one such as
    /tmp: they could swap what otelstack keeps there); make any other one private, for it
    holds logs and the pids `down` signals. A group's write is the user's own when that group
    is the user's own primary group (a umask of 002 gives every new directory g+w)."""
    info = os.fstat(fd)
    if info.st_uid != os.geteuid():
        raise StackDirectoryUnusable(f"{path} belongs to another user")
    mode = stat.S_IMODE(info.st_mode)
    if mode & stat.S_IWOTH or (mode & stat.S_IWGRP and info.st_gid != os.getegid()):
        raise StackDirectoryUnusable(f"{path} is writable by other users (mode {mode:o}); otelstack neither uses "
                                     "nor changes a shared directory: give it one of your own")
    if mode != 0o700:
        os.fchmod(fd, 0o700)


def _unusable(path: Path, error: OSError) -> StackDirectoryUnusable:
    # O_DIRECTORY | O_NOFOLLOW refuses a link as "not a directory"; the message says which.
    if error.errno == errno.ELOOP or (error.errno == errno.ENOTDIR and _is_link(path)):
        return StackDirectoryUnusable(f"{path} is a symbolic link; otelstack does not follow one")
    if error.errno == errno.ENOTDIR:
        return StackDirectoryUnusable(f"{path} is not a directory")
    if error.errno == errno.ENXIO:
        return StackDirectoryUnusable(f"{path} is not a regular file")
    return StackDirectoryUnusable(f"{path}: {error.strerror}")


class StackDirectory:
    """An open stack directory; use as a context manager."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def open(cls, path: Path, *, create: bool) -> StackDirectory | None:
        """The directory at `path` (made 0700 when `create`); None when it does not exist
        and `create` is false. One that others may write into is refused as it is."""
        try:
            if create:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                except (FileExistsError, NotADirectoryError):
                    raise StackDirectoryUnusable(f"{_file_above(path)} is not a directory") from None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(path, 0o700)
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
        except FileNotFoundError:
            if create:
                raise StackDirectoryUnusable(f"{path}: cannot be created") from None
            return None
        except NotADirectoryError:
            # A file above it: "x/.stack is not a directory" would name the wrong one.
            if not _is_link(path) and _file_above(path) != path:
                raise StackDirectoryUnusable(f"{_file_above(path)} is not a directory") from None
            raise _unusable(path, OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))) from None
        except OSError as error:
            raise _unusable(path, error) from None
        try:
            _check_owned(path, fd)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd)

    def __enter__(self) -> StackDirectory:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        os.close(self._fd)

    def _open_file(self, name: str, flags: int, mode: int = 0o600) -> int:
        try:
            fd = os.open(name, flags | _FILE_FLAGS, mode, dir_fd=self._fd)
        except FileNotFoundError:
            raise
        except OSError as error:
            raise _unusable(self.path / name, error) from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            os.close(fd)
            raise StackDirectoryUnusable(f"{self.path / name} is not a regular file of this user")
        return fd

    def read_state(self, names: frozenset[str]) -> dict[str, ProcessIdentity]:
        """The processes stack.json records ({} without one), checked field by field."""
        try:
            fd = self._open_file(STATE, os.O_RDONLY)
        except FileNotFoundError:
            return {}
        with os.fdopen(fd, "rb") as file:
            raw = file.read(MAX_STATE_BYTES + 1)
        return parse_state(raw, self.path / STATE, names)

    def write_state(self, records: dict[str, ProcessIdentity]) -> None:
        data = json.dumps({"version": STATE_VERSION, "processes": {
            name: {"pid": r.pid, "start_time": r.start_time, "boot_id": r.boot_id,
                   "executable": r.executable, "cmdline": list(r.cmdline)} for name, r in records.items()}},
            indent=1).encode()
        temporary = f".{STATE}.{os.getpid()}.tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary, dir_fd=self._fd)
        fd = self._open_file(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, STATE, src_dir_fd=self._fd, dst_dir_fd=self._fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=self._fd)
            raise
        os.fsync(self._fd)

    def remove_state(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(STATE, dir_fd=self._fd)

    def open_log(self, name: str) -> int:
        """A file descriptor appending to `name` in the directory (made 0600)."""
        fd = self._open_file(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.fchmod(fd, 0o600)
        return fd

    def subdirectory(self, name: str) -> Path:
        """`name` in the directory, made 0700; refused when it is a link, a file or not ours."""
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o700, dir_fd=self._fd)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=self._fd)
        except OSError as error:
            raise _unusable(self.path / name, error) from None
        try:
            _check_owned(self.path / name, fd)
        finally:
            os.close(fd)
        return self.path / name


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("a key appears twice")
    return dict(pairs)


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _kind(value: object) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)


def parse_state(raw: bytes, where: Path, names: frozenset[str]) -> dict[str, ProcessIdentity]:
    """stack.json's records, or StackStateMalformed naming the first field that is not as `up`
    writes it (its kind only: the file's text is not repeated)."""

    def bad(field: str, expected: str, value: object = None, *, found: str | None = None) -> StackStateMalformed:
        return StackStateMalformed(f"{where}: {field}: expected {expected}, found {found or _kind(value)}; "
                                   "nothing was signalled")

    if len(raw) > MAX_STATE_BYTES:
        raise bad("the file", f"at most {MAX_STATE_BYTES} bytes", found="more")
    try:
        data = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise bad("the file", "UTF-8 JSON", found="bytes that are not UTF-8") from None
    except (ValueError, RecursionError) as error:
        found = "a key twice" if "twice" in str(error) else "text that is not JSON"
        raise bad("the file", "one JSON object", found=found) from None
    if not isinstance(data, dict):
        raise bad("the top level", "an object", data)
    if set(data) != {"version", "processes"}:
        raise bad("the top level", "exactly the keys version and processes (as this otelstack writes)",
                  found=f"{len(data)} other key(s)")
    version = data["version"]
    if type(version) is not int or version != STATE_VERSION:
        raise bad("version", str(STATE_VERSION), version, found="another version" if type(version) is int else None)
    processes = data["processes"]
    if not isinstance(processes, dict):
        raise bad("processes", "an object", processes)
    records: dict[str, ProcessIdentity] = {}
    for name, record in processes.items():
        if name not in names:
            raise bad("processes", "only " + " and ".join(sorted(names)), found="another name")
        field = f"processes.{name}"
        if not isinstance(record, dict):
            raise bad(field, "an object", record)
        if set(record) != RECORD_KEYS:
            raise bad(field, "exactly the keys " + ", ".join(sorted(RECORD_KEYS)), found="other keys")
        pid, start_time, boot, executable, cmdline = (record[key] for key in
                                                      ("pid", "start_time", "boot_id", "executable", "cmdline"))
        if type(pid) is not int or not 1 < pid <= PID_LIMIT:
            raise bad(f"{field}.pid", f"a whole number above 1 and at most {PID_LIMIT}", pid,
                      found="a number out of that range" if type(pid) is int else None)
        if type(start_time) is not int or not 0 <= start_time < 1 << 63:
            raise bad(f"{field}.start_time", "a whole number of clock ticks", start_time,
                      found="a number out of range" if type(start_time) is int else None)
        if not isinstance(boot, str) or not _BOOT_ID.fullmatch(boot):
            raise bad(f"{field}.boot_id", "a boot id (/proc/sys/kernel/random/boot_id)", boot,
                      found="another string" if isinstance(boot, str) else None)
        if not isinstance(executable, str) or not executable.startswith("/") or "\0" in executable:
            raise bad(f"{field}.executable", "an absolute path", executable,
                      found="another string" if isinstance(executable, str) else None)
        if (not isinstance(cmdline, list) or not cmdline
                or not all(isinstance(part, str) and "\0" not in part for part in cmdline)):
            raise bad(f"{field}.cmdline", "a non-empty array of strings", cmdline,
                      found="another array" if isinstance(cmdline, list) else None)
        records[name] = ProcessIdentity(pid, start_time, boot, executable, tuple(cmdline))
    return records
