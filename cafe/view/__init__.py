"""Pages to look at instead of reading: `cafe view RECORDING -o shift.html` (a recorded shift)
and the mismatch report of a failed replay (the pytest plugin's, a plugin command's).

What a page shows of a recording is scrubbed first (`scrubbing.scrubbed`), with the scrubber
the recorder and `cafe export` use: a file another harness wrote may hold a key."""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from pathlib import Path

from cafe._files import reason, write_private
from cafe.errors import Unwritable
from cafe.privacy import Scrubber, scrubbed, shown_json, structure_scrubber
from cafe.recording.errors import ReplayError
from cafe.recording.format import Recording
from cafe.view.mismatch import FailedReplay, failed_replay, mismatch_page
from cafe.view.page import format_duration, shift_page
from cafe.view.timeline import ShiftTimeline, timeline
from cafe.view.words import ANY_AGENT, PageWords, words_for

__all__ = [
    "ANY_AGENT",
    "FailedReplay",
    "PageUnwritable",
    "PageWords",
    "ShiftTimeline",
    "check_page_path",
    "failed_replay",
    "format_duration",
    "mismatch_page",
    "page_name",
    "scrubbed",
    "shift_page",
    "timeline",
    "words_for",
    "write_mismatch_report",
    "write_private_page",
    "write_report_into",
]

# Attempts at a free name in a report directory before giving up: DIR/NAME.html, NAME-2.html, ...
MAX_REPORTS_OF_ONE_RECORDING = 99
# Bytes of a page's name before ".html" and its "-99": within every file system's 255.
_LONGEST_NAME_BYTES = 150


# A page that cannot be written is the one exit-38 error every writer raises.
PageUnwritable = Unwritable
_WHAT = "the page"


def check_page_path(path: Path | str) -> None:
    """Refuse now what `write_private_page` would refuse later: an empty path, something
    already there (a symlink included), a missing directory."""
    path = Path(path)
    if str(path).strip() == "":
        raise Unwritable(path, "the path is empty", what=_WHAT)
    if os.path.lexists(path):
        raise Unwritable(path, "it exists; pages are never overwritten, choose another path", what=_WHAT)
    if not path.parent.is_dir():
        raise Unwritable(path, "its directory does not exist", what=_WHAT)


def write_mismatch_report(path: Path | str, recording: Recording, error: ReplayError,
                          scrubber: Scrubber | None = None) -> Path:
    """The page of a failed replay: recorded and incoming request side by side, the recorded
    side scrubbed as the incoming one was (`scrubber`, default `Scrubber.from_environment()`)."""
    return write_private_page(path, _mismatch_text(recording, error, scrubber or Scrubber.from_environment()))


def _mismatch_text(recording: Recording, error: ReplayError, scrubber: Scrubber) -> str:
    failed = failed_replay(error)
    # The incoming request was scrubbed as a recording is (its keys kept), and the line and the
    # path name keys of a file cafe may not have written: the page shows them as it shows the
    # recording's keys (and the replay scrubbed the values the line quotes).
    keys = structure_scrubber()
    transcripts = failed.transcripts
    # The line names the file as the header does: scrubbed with every pattern, as a value is.
    message = failed.message
    for named in {str(recording.path), str(getattr(error, "path", None) or recording.path)}:
        message = message.replace(named, scrubber.scrub(named))
    failed = dataclasses.replace(
        failed, message=keys.scrub(message),
        steps=None if failed.steps is None else tuple(keys.scrub(s) if isinstance(s, str) else s
                                                      for s in failed.steps),
        incoming=None if failed.incoming is None else shown_json(failed.incoming, scrubber),
        transcripts=None if transcripts is None else ([scrubber.scrub(line) for line in transcripts[0]],
                                                      [scrubber.scrub(line) for line in transcripts[1]]))
    return mismatch_page(scrubbed(recording, scrubber), failed)


def page_name(recording: Path, scrubber: Scrubber) -> str:
    """The name, without ".html", of the page of `recording` in a report directory: its folder
    and file name (`orders.test_latte`), scrubbed, made of letters, digits, `_`, `-` and `.` and
    starting with none of the last three, so that it is one plain file name inside the directory
    (never `.`, `..`, hidden, a path or too long)."""
    words = [re.sub(r"[^\w.-]+", "_", scrubber.scrub(part)).strip("._-") for part in (recording.parent.name,
                                                                                     recording.stem)]
    name = ".".join(word for word in words if word) or "recording"
    while len(name.encode("utf-8")) > _LONGEST_NAME_BYTES:
        name = name[:-1]
    return name.rstrip("._-") or "recording"


def write_report_into(directory: Path | str, recording: Recording, error: ReplayError,
                      scrubber: Scrubber | None = None) -> Path:
    """The mismatch page of `error` in `directory` (created 0700 when missing: the pages are
    private), named after the recording (`page_name`) and never over another file: a second
    failure of the same recording is NAME-2.html."""
    directory = Path(directory)
    scrubber = scrubber or Scrubber.from_environment()
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:
        raise Unwritable(directory, "it is not a directory", what=_WHAT) from None
    except OSError as failure:
        raise Unwritable(directory, f"the report directory cannot be made ({reason(failure)})", what=_WHAT) from None
    if not stat.S_ISDIR(os.stat(directory).st_mode):
        raise Unwritable(directory, "it is not a directory", what=_WHAT)
    name = page_name(recording.path, scrubber)
    text = _mismatch_text(recording, error, scrubber)
    for attempt in range(1, MAX_REPORTS_OF_ONE_RECORDING + 1):
        target = directory / (f"{name}.html" if attempt == 1 else f"{name}-{attempt}.html")
        if write_private(target, text, _WHAT):
            return target
    raise Unwritable(directory / f"{name}.html", f"{MAX_REPORTS_OF_ONE_RECORDING} reports of this recording "
                     "are there already", what=_WHAT)


def write_private_page(path: Path | str, text: str) -> Path:
    """Create `path` 0600 with `text`; never over anything that exists (a symlink included)."""
    path = Path(path)
    if not write_private(path, text, _WHAT):
        raise Unwritable(path, "it exists; pages are never overwritten, choose another path", what=_WHAT)
    return path
