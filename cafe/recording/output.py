"""Writing a command's output file (`cafe export --out`, a plugin's golden file) without
destroying what the command reads.

No output replaces a file the command reads (the same file, by device and inode, whatever
the path says), a recording (a file whose first line is a recording header or a plain
`{request, response}` line), or anything that is not a regular file of our own. Output that
holds conversation content is created 0600, like a recording, and never replaces an existing
file. The file is written beside the target and renamed into place (`cafe._files`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from cafe._files import check_owned, check_target, replace_atomically
from cafe.errors import Unwritable
from cafe.recording.writer import holds_recording

# Every output refusal is the one exit-38 error; the name stays for callers that catch it.
UnsafeOutput = Unwritable
_WHAT = "the output"


def check_output(path: Path | str, *, reads: Iterable[Path | str] = (), private: bool = False) -> None:
    """Raise `Unwritable` unless writing `path` destroys nothing it must not."""
    path = Path(path)
    found = check_target(path, _WHAT, reads=reads)
    if found is None:
        return
    if holds_recording(path):
        raise Unwritable(path, "it holds a cafe recording, which no output may replace", what=_WHAT)
    if private:
        raise Unwritable(path, "a file is already there, and output holding conversation content "
                               "never replaces one (choose a new path)", what=_WHAT)
    check_owned(path, found, _WHAT)


def write_output(path: Path | str, data: bytes, *, reads: Iterable[Path | str] = (), private: bool = False) -> None:
    """Write `data` to `path` after `check_output`; `private` output is created 0600."""
    path = Path(path)
    reads = list(reads)
    check_output(path, reads=reads, private=private)
    replace_atomically(path, data, _WHAT, private=private,
                       check=lambda: check_output(path, reads=reads, private=private))
