"""What can be wrong with a recording or a replay, as a small named hierarchy.

Every message says where (path, line, field or call number) and what was expected, and
describes values by type and size rather than quoting them: a recording holds customer
conversations, and error text ends up in CI logs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cafe.errors import CafeError, Unwritable, UsageError
from cafe.jsondata import JsonPath, shown_path


class RecordingError(CafeError):
    """A recording that cannot be read, written or trusted."""

    exit_code = 30


class RecordingNotFound(RecordingError):
    exit_code = 31

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        super().__init__(f"{path}: no such recording")


class NotARecording(RecordingError):
    exit_code = 32

    def __init__(self, path: Path | str, why: str, line: int | None = None) -> None:
        self.path, self.line = Path(path), line
        where = f"{path}:{line}" if line is not None else f"{path}"
        super().__init__(f"{where}: not a cafe recording ({why})")


class MalformedLine(RecordingError):
    exit_code = 33

    def __init__(
        self, path: Path | str, line: int, expected: str, found: str, field: str | None = None
    ) -> None:
        self.path, self.line, self.field = Path(path), line, field
        self.expected, self.found = expected, found
        where = f"{path}:{line}" + (f": {field}" if field else "")
        super().__init__(f"{where}: expected {expected}, found {found}")


class UnsupportedVersion(RecordingError):
    exit_code = 34

    def __init__(self, path: Path | str, line: int, version: int, supported: list[int]) -> None:
        self.path, self.line, self.version = Path(path), line, version
        self.field = "version"
        known = sorted(number for number in supported if number)
        super().__init__(
            f"{path}:{line}: version: recording format version {version} is not supported "
            f"(expected a header with version {known[0]} to {known[-1]}; headerless files are version 0)"
        )


class TruncatedRecording(RecordingError):
    """The last line was cut short, as a crash mid-write leaves it. The complete lines
    before it are intact: load with `allow_truncated=True` to use them."""

    exit_code = 35

    def __init__(self, path: Path | str, line: int, complete_calls: int, usable: bool = True) -> None:
        self.path, self.line, self.complete_calls = Path(path), line, complete_calls
        if usable:
            tail = f"{complete_calls} complete call(s) before it can be used with --allow-truncated"
        else:
            tail = "it was the header, so nothing in the file can be used"
        super().__init__(
            f"{path}:{line}: the last line is truncated (the recorder stopped mid-write, "
            f"expected a complete JSON line ending in a newline); {tail}"
        )


class RecordingExists(RecordingError):
    exit_code = 36

    def __init__(self, path: Path | str, kept: Path | str | None = None) -> None:
        self.path = Path(path)
        self.kept = Path(kept) if kept is not None else None
        if kept is None:
            tail = "record mode 'once' never overwrites one (use record mode 'all' to re-record it)"
        else:
            tail = (f"one appeared there while this one was being made, and record mode 'once' "
                    f"never overwrites one (this recording is kept at {kept})")
        super().__init__(f"{path}: a recording already exists; {tail}")


class RecordingDisabled(RecordingError):
    exit_code = 37

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        super().__init__(f"{path}: record mode 'none' forbids recording")


# A recording that cannot be written is the one exit-38 error every writer raises.
RecordingUnwritable = Unwritable


class RecordingNotClean(RecordingError):
    """`cafe check-recording` found secrets or text that looks like real customer data."""

    exit_code = 39

    def __init__(self, findings: int, files: int) -> None:
        self.findings, self.files = findings, files
        super().__init__(
            f"check-recording: {findings} finding(s) in {files} file(s); a recording is a private "
            "artefact: commit only synthetic ones"
        )


class UnusableIgnorePath(UsageError):
    """A declared ignore path (`cafe replay-run --ignore`, the marker's `ignore=`) that would make replay
    check next to nothing, or nothing at all; the message says what to write instead."""


class ReplayError(RecordingError):
    """The replayed shift did not make the calls the recording holds.

    `incoming_request` is the request the replay made where it failed (scrubbed as the
    recording is; None when it made none) and `served` how many recorded calls it had been
    served before: what a mismatch report (`cafe.view.mismatch`) shows. Neither is in the
    message, which names paths and sizes only. `on_wire`: `incoming_request` is the HTTP
    body as sent (a `cafe.wire` replay), not the four arguments of a café call."""

    exit_code = 40
    incoming_request: dict[str, Any] | None = None
    served: int | None = None
    on_wire: bool = False


class ReplayMismatch(ReplayError):
    """`steps` is where the requests first differ, a key or an index a step; `json_path` is
    that path as the message names it (`$.messages[1].content`, unusual keys by their size)."""

    exit_code = 41

    def __init__(self, path: Path | str, call: int, steps: JsonPath | str, recorded: str, incoming: str):
        # A string names a part of an HTTP request outside its JSON body ("the method", "the
        # path"): there is no node of the body to point at.
        self.path, self.call = Path(path), call
        self.steps: JsonPath | None = None if isinstance(steps, str) else tuple(steps)
        self.json_path = steps if isinstance(steps, str) else shown_path(tuple(steps))
        self.recorded, self.incoming = recorded, incoming
        super().__init__(
            f"{path}: call {call}: the request differs from the recording at {self.json_path}: "
            f"recorded {recorded}, incoming {incoming}"
        )


class UnusedCalls(ReplayError):
    exit_code = 42

    def __init__(self, path: Path | str, unused: int, first_call: int, summary: str) -> None:
        self.path, self.unused, self.first_call = Path(path), unused, first_call
        super().__init__(
            f"{path}: {unused} recorded call(s) were never made, from call {first_call} "
            f"({summary})"
        )


class RecordingExhausted(ReplayError):
    """A call the recording holds no answer for: one beyond its last, or (`unended`) one of
    an unfinished recording whose line was never written."""

    exit_code = 43

    def __init__(self, path: Path | str, recorded: int, *, unended: int | None = None) -> None:
        self.path, self.recorded, self.unended = Path(path), recorded, unended
        if unended is None:
            said = f"call {recorded + 1} was made, but the recording holds only {recorded}"
        else:
            said = (f"call {unended} was made, but the recording holds no answer for it (an unfinished "
                    "recording: its recorder stopped before the call ended, or could not write its line)")
        super().__init__(f"{path}: {said}")


class NetworkRefused(ReplayError):
    """A test tried to open a network connection while replaying a recording."""

    exit_code = 45

    def __init__(self, path: Path | str, target: str, *, attempt: str = "a connection to",
                 remedy: str = "") -> None:
        self.path = Path(path)
        super().__init__(
            f"{path}: network access is refused while replaying this recording "
            f"({attempt} {target} was attempted){remedy}"
        )


class TranscriptMismatch(ReplayError):
    """`transcripts` holds the recorded and the replayed transcript, a line an item, and
    `line` the 1-based line where they first differ (None: the lines agree and the endings
    do not), for the mismatch report; neither is in the message."""

    exit_code = 44

    def __init__(self, path: Path | str, detail: str, *,
                 transcripts: tuple[list[str], list[str]] | None = None, line: int | None = None) -> None:
        self.path, self.transcripts, self.line = Path(path), transcripts, line
        super().__init__(f"{path}: the replayed transcript differs from the recorded one: {detail}")


class StreamExhausted(ReplayError):
    """A replayed stream was read past its recorded end: the recorded caller closed it there."""

    exit_code = 49

    def __init__(self, path: Path | str, call: int, chunks: int) -> None:
        self.path, self.call = Path(path), call
        super().__init__(
            f"{path}: call {call}: the stream was read past the {chunks} chunk(s) the recording holds "
                  "(the recorded caller closed it there; re-record to replay more of it)"
        )


class OtherProcessCall(RecordingError):
    """A model call from a process that does not own the recording or replay it reached: a
    child forked after the recorder or replay was made (it would write with the parent's
    call numbers, or be answered from the parent's place), or, under `cafe record` /
    `cafe replay-run`, any Python process of the program but its first. Refused before it is
    sent."""

    exit_code = 51

    def __init__(self, path: Path | str, pid: int, replaying: bool = False) -> None:
        self.path, self.pid, self.replaying = Path(path), pid, replaying
        action = "replays" if replaying else "records"
        super().__init__(
            f"{path}: a model call from process {pid} was refused: only the process that {action} "
            "this recording makes its model calls (not a child it forks or starts); make the calls there"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # A multiprocessing worker's error is pickled back to its parent.
        return (type(self), (self.path, self.pid, self.replaying))
