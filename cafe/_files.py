"""Files cafe writes without destroying another: the check of a target and the two ways
one is written.

A target is refused when its directory is missing, when it cannot be examined, when it is
anything but a regular file (a symbolic link is never followed) or when it is a file the
command reads. What a caller may replace beyond that is its own rule (a recording may
replace a recording, an output never replaces one, a page replaces nothing).

`create_private` makes a new file 0600 and never opens one that exists; `replace_atomically`
writes beside the target and renames into place, so a failure leaves the target as it was.
Every refusal and failure is one `Unwritable` (exit 38) naming the path and why.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from cafe.errors import Unwritable

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
_CREATE_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def not_regular(mode: int) -> str | None:
    """What a file of `mode` is when it is not a regular file (`a FIFO`), else None."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def reason(error: BaseException) -> str:
    """An OS error as its reader knows it (`file name too long`), never its text or path."""
    if isinstance(error, OSError) and error.errno is not None:
        return os.strerror(error.errno).lower()
    return type(error).__name__


def check_target(path: Path, what: str, *, reads: Iterable[Path | str] = ()) -> os.stat_result | None:
    """What is at `path` (None: nothing, and its directory exists), after refusing a target
    no writer may use: a missing directory, a path that cannot be examined, anything but a
    regular file, or one of the files in `reads` (by device and inode, whatever the path)."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise Unwritable(path, "its directory does not exist", what=what) from None
        return None
    except NotADirectoryError:
        raise Unwritable(path, "a part of its directory path is not a directory", what=what) from None
    except PermissionError:
        raise Unwritable(path, "permission denied", what=what) from None
    except (OSError, ValueError) as error:  # a name too long, a NUL byte in it, a loop of links
        raise Unwritable(path, f"it cannot be examined ({reason(error)})", what=what) from None
    kind = not_regular(found.st_mode)
    if kind is not None:
        raise Unwritable(path, f"it is {kind}, not a regular file", what=what)
    for source in reads:
        with contextlib.suppress(OSError):
            if os.path.samefile(source, path):
                raise Unwritable(path, "it is the file this command reads", what=what)
    return found


def check_owned(path: Path, found: os.stat_result, what: str) -> None:
    """Refuse to replace a file another user owns."""
    if found.st_uid != os.geteuid():
        raise Unwritable(path, "the file there belongs to another user", what=what)


def create_private(path: Path, what: str, *, target: Path | None = None) -> int:
    """A descriptor of `path`, made new and 0600 whatever the umask; FileExistsError when
    anything (a symbolic link included) is there, for the caller to name. Other failures are
    `Unwritable` of `target` (the file `path` stands in for; default `path` itself)."""
    shown = path if target is None else target
    try:
        descriptor = os.open(path, _CREATE_NEW, 0o600)
    except FileExistsError:
        raise
    except FileNotFoundError:
        raise Unwritable(shown, "its directory does not exist", what=what) from None
    except IsADirectoryError:
        raise Unwritable(shown, "it is a directory", what=what) from None
    except PermissionError:
        raise Unwritable(shown, "permission denied", what=what) from None
    except (OSError, ValueError) as error:
        made = "it" if target is None else str(path)
        raise Unwritable(shown, f"{made} cannot be created ({reason(error)})", what=what) from None
    os.fchmod(descriptor, 0o600)
    return descriptor


def write_private(path: Path, text: str, what: str) -> bool:
    """Create `path` 0600 holding `text`; False when something is there already. A file
    that could not be written whole is removed."""
    if str(path).strip() == "":
        raise Unwritable(path, "the path is empty", what=what)
    try:
        descriptor = create_private(path, what)
    except FileExistsError:
        return False
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", errors="backslashreplace") as out:
            out.write(text)
    except BaseException as error:
        path.unlink(missing_ok=True)
        if isinstance(error, OSError):  # a full disk, a file size limit
            raise Unwritable(path, f"it could not be written ({reason(error)})", what=what) from None
        raise
    return True


def link_no_clobber(source: Path, target: Path) -> None:
    """Move `source` to `target`; FileExistsError when anything is at `target`."""
    try:
        os.link(source, target)  # fails if anything is at `target`, atomically
    except FileExistsError:
        raise
    except OSError:
        # A file system without hard links: the check and the rename are two steps there.
        if os.path.lexists(target):
            raise FileExistsError(target) from None
        os.rename(source, target)
        return
    os.unlink(source)


def replace_atomically(path: Path, data: bytes, what: str, *, check: Callable[[], object],
                       private: bool = False) -> None:
    """Write `data` to a temporary file beside `path` and rename it into place. `check` runs
    again just before the rename (writing took time). `private`: the file is 0600 and never
    replaces one; otherwise it gets the umask's mode and may replace a file `check` allows."""
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as sink:
            sink.write(data)
            sink.flush()
            os.fsync(sink.fileno())
        if not private:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)
        check()
        if private:
            link_no_clobber(Path(temporary), path)
        else:
            os.replace(temporary, path)
    except FileExistsError:
        raise Unwritable(path, "a file appeared there while it was being written", what=what) from None
    except OSError as error:  # a full disk, a file size limit: the target is left as it was
        raise Unwritable(path, f"it could not be written ({reason(error)}); what was there is unchanged",
                         what=what) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
