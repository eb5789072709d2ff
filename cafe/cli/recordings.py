"""`cafe check-recording` and `cafe view`: read recordings without replaying them."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TextIO

from cafe.privacy import Scrubber
from cafe.recording.check import check_recordings
from cafe.recording.errors import RecordingNotClean
from cafe.recording.reader import load_recording
from cafe.view import scrubbed, shift_page, timeline, write_private_page


def check_recording_command(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    scrubber = Scrubber.from_environment(environ, extra_patterns=args.pattern)
    findings = check_recordings(args.paths, scrubber)
    for finding in findings:
        out.write(f"{finding}\n")
    if findings:
        error = RecordingNotClean(len(findings), len({f.path for f in findings}))
        out.flush()
        lost = getattr(out, "failure", None)  # the command's stream keeps why a write failed
        if lost is not None:
            error.add_note(f"the findings did not all reach stdout ({lost})")
        raise error
    out.write(f"check-recording: OK: {len(args.paths)} file(s), no secrets or customer-like data found\n")
    return 0


def view_command(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    scrubber = Scrubber.from_environment(environ)  # before reading: a bad CAFE_SCRUB_PATTERNS stops it
    recording = scrubbed(load_recording(args.path, allow_truncated=args.allow_truncated), scrubber)
    shift = timeline(recording)
    written = write_private_page(args.out, shift_page(shift, source=scrubber.scrub(str(args.path))))
    out.write(f"wrote {written} (private, mode 0600): {len(shift.calls)} call(s), "
              f"stop reason {shift.stop_reason or 'not recorded'}\n")
    return 0
