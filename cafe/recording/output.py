"""Writing a command's output file without destroying what the command reads.

No command writes over a file it reads (the same file, by device and inode, whatever the
path says), over a recording (a file whose first line is a cafe recording header or a plain
`{request, response}` line), or over anything that is not a regular file of our own.
Output that holds conversation content is created 0600, like a recording, and never
replaces an existing file. Output is written to a temporary file beside the target and
renamed into place, so a failure leaves the target as it was.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from cafe.recording.errors import RecordingError
from cafe.recording.writer import holds_recording, link_no_clobber, not_regular


class UnsafeOutput(RecordingError):
    """An output path that would destroy an input, a recording or a file not ours."""

    exit_code = 38

    def __init__(self, path: Path | str, why: str) -> None:
        self.path, self.why = Path(path), why
        super().__init__(f"{path}: output not written: {why}")


def check_output(path: Path | str, *, reads: Iterable[Path | str] = (), private: bool = False) -> None:
    """Raise `UnsafeOutput` unless writing `path` destroys nothing it must not."""
    path = Path(path)
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise UnsafeOutput(path, "its directory does not exist") from None
        return
    except OSError as error:
        raise UnsafeOutput(path, f"it cannot be examined ({type(error).__name__})") from None
    kind = not_regular(found.st_mode)
    if kind is not None:
        raise UnsafeOutput(path, f"it is {kind}, not a regular file")
    for source in reads:
        with contextlib.suppress(OSError):
            if os.path.samefile(source, path):
                raise UnsafeOutput(path, "it is the file this command reads")
    if holds_recording(path):
        raise UnsafeOutput(path, "it holds a cafe recording, which no output may replace")
    if private:
        raise UnsafeOutput(path, "a file is already there, and output holding conversation content "
                                 "never replaces one (choose a new path)")
    if found.st_uid != os.geteuid():
        raise UnsafeOutput(path, "the file there belongs to another user")


def write_output(path: Path | str, data: bytes, *, reads: Iterable[Path | str] = (), private: bool = False) -> None:
    """Write `data` to `path` after `check_output`; `private` output is created 0600."""
    path = Path(path)
    reads = list(reads)
    check_output(path, reads=reads, private=private)
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
        check_output(path, reads=reads, private=private)  # again: it took time to get here
        if private:
            link_no_clobber(Path(temporary), path)
        else:
            os.replace(temporary, path)
    except FileExistsError:
        raise UnsafeOutput(path, "a file appeared there while it was being written") from None
    except OSError as error:  # a full disk, a file size limit: the target is left as it was
        reason = os.strerror(error.errno).lower() if error.errno else type(error).__name__
        raise UnsafeOutput(path, f"it could not be written ({reason}); what was there is unchanged") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
