"""Pages to look at instead of reading: `cafe view RECORDING -o shift.html` (a recorded shift)
and the mismatch report of a failed replay (`cafe replay --report`, the pytest plugin).

What a page shows of a recording is scrubbed first (`scrubbing.scrubbed`), with the scrubber
the recorder and `cafe export` use: a file another harness wrote may hold a key."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from cafe.argtypes import file_to_read
from cafe.privacy import Scrubber, scrubbed, shown_json, structure_scrubber
from cafe.recording.errors import RecordingError, ReplayError
from cafe.recording.format import Recording
from cafe.recording.reader import load_recording
from cafe.view.mismatch import FailedReplay, failed_replay, mismatch_page
from cafe.view.page import format_duration, shift_page
from cafe.view.timeline import ShiftTimeline, timeline

__all__ = ["FailedReplay", "PageUnwritable", "ShiftTimeline", "check_page_path", "failed_replay", "format_duration",
           "mismatch_page", "page_name", "register", "scrubbed", "shift_page", "timeline",
           "write_mismatch_report", "write_private_page", "write_report_into"]

# Attempts at a free name in a report directory before giving up: DIR/NAME.html, NAME-2.html, ...
MAX_REPORTS_OF_ONE_RECORDING = 99
# Bytes of a page's name before ".html" and its "-99": within every file system's 255.
_LONGEST_NAME_BYTES = 150


class PageUnwritable(RecordingError):
    exit_code = 38

    def __init__(self, path: Path | str, why: str) -> None:
        self.path = Path(path)
        super().__init__(f"{path}: cannot write the page ({why})")


def check_page_path(path: Path | str) -> None:
    """Refuse now what `write_private_page` would refuse later: an empty path, something
    already there (a symlink included), a missing directory."""
    path = Path(path)
    if str(path).strip() == "":
        raise PageUnwritable(path, "the path is empty")
    if os.path.lexists(path):
        raise PageUnwritable(path, "it exists; pages are never overwritten, choose another path")
    if not path.parent.is_dir():
        raise PageUnwritable(path, "its directory does not exist")


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
        raise PageUnwritable(directory, "it is not a directory") from None
    except OSError as failure:
        raise PageUnwritable(directory, f"the report directory cannot be made ({_reason(failure)})") from None
    if not stat.S_ISDIR(os.stat(directory).st_mode):
        raise PageUnwritable(directory, "it is not a directory")
    name = page_name(recording.path, scrubber)
    text = _mismatch_text(recording, error, scrubber)
    for attempt in range(1, MAX_REPORTS_OF_ONE_RECORDING + 1):
        target = directory / (f"{name}.html" if attempt == 1 else f"{name}-{attempt}.html")
        if _write_new(target, text):
            return target
    raise PageUnwritable(directory / f"{name}.html", f"{MAX_REPORTS_OF_ONE_RECORDING} reports of this recording "
                         "are there already")


def _reason(error: OSError) -> str:
    return os.strerror(error.errno).lower() if error.errno else type(error).__name__


def write_private_page(path: Path | str, text: str) -> Path:
    """Create `path` 0600 with `text`; never over anything that exists (a symlink included)."""
    path = Path(path)
    if not _write_new(path, text):
        raise PageUnwritable(path, "it exists; pages are never overwritten, choose another path")
    return path


def _write_new(path: Path, text: str) -> bool:
    """Create `path` 0600 with `text`; False when something (a symlink included) is there."""
    if str(path).strip() == "":
        raise PageUnwritable(path, "the path is empty")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(path, flags, 0o600)
    except FileExistsError:
        return False
    except FileNotFoundError:
        raise PageUnwritable(path, "its directory does not exist") from None
    except IsADirectoryError:
        raise PageUnwritable(path, "it is a directory") from None
    except PermissionError:
        raise PageUnwritable(path, "permission denied") from None
    except OSError as error:
        raise PageUnwritable(path, type(error).__name__) from None
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", errors="backslashreplace") as out:
            out.write(text)
    except BaseException as error:
        path.unlink(missing_ok=True)  # a half-written page is not left behind
        if isinstance(error, OSError):  # a full disk, a file size limit
            raise PageUnwritable(path, f"it could not be written ({_reason(error)})") from None
        raise
    return True


def _page_argument(text: str) -> str:
    # Path("") is ".", a directory that exists: the page was refused as "it exists".
    if not text.strip():
        raise argparse.ArgumentTypeError("needs a file path for the page")
    return text


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `view` to the `cafe` command."""
    parser = commands.add_parser("view", help="a recorded shift as one self-contained HTML page (private: 0600)")
    parser.add_argument("path", type=file_to_read, help="the recording to show (any version cafe reads)")
    parser.add_argument("-o", "--out", required=True, metavar="HTML", type=_page_argument,
                        help="the page to create (never overwritten)")
    parser.add_argument("--allow-truncated", action="store_true",
                        help="show the complete calls of a recording whose last line was cut short")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    scrubber = Scrubber.from_environment(environ)  # before reading: a bad CAFE_SCRUB_PATTERNS stops it
    recording = scrubbed(load_recording(args.path, allow_truncated=args.allow_truncated), scrubber)
    shift = timeline(recording)
    written = write_private_page(args.out, shift_page(shift, source=scrubber.scrub(str(args.path))))
    out.write(f"wrote {written} (private, mode 0600): {len(shift.calls)} call(s), "
              f"stop reason {shift.stop_reason or 'not recorded'}\n")
    return 0
