"""The harness's named errors. Each carries an exit code for the command line and a
message that says what and where, without customer text or secrets.

Every error class in cafe, cafe_otel and otelstack, with its exit code (a class that keeps
its parent's code refines the parent's meaning), the module it is defined in when it is not
this one, and what its code means (tests/test_errors.py checks this tree against the
classes, and docs/cli.md's exit table is made from it):

* CafeError [1]: an error no more particular code names (the canned replies ran out)
  * CannedRepliesExhausted [1] (cafe.counter.clients.canned)
  * UsageError [2]: usage: a bad option or argument
    * UnusableIgnorePath [2] (cafe.recording.errors)
    * NothingToExportTo [2] (cafe_otel._cli.plugin)
  * ConfigurationError [20]: configuration: missing live settings, an API key under 8 characters or one HTTP
      cannot send, a bad base URL, `CAFE_MODE`, `CAFE_TIMEOUT` or `CAFE_MAX_RETRIES`, bad OTel settings
    * MissingSettings [20]
    * ApiKeyTooShort [20] (cafe.counter.clients.settings)
    * ApiKeyUnsendable [20] (cafe.counter.clients.settings)
    * InvalidLiveSetting [20] (cafe.counter.clients.settings)
    * UnknownMode [20] (cafe.counter.clients.choose)
    * TelemetryConfigError [20] (cafe_otel._config.parse)
      * SpanLimitError [20] (cafe_otel._config.environment)
      * GrpcExtraMissing [20] (cafe_otel._export.grpc_extra)
  * ModelCallError [21]: the model endpoint failed, timed out or answered a malformed reply (the field is
      named)
    * MalformedReply [21] (cafe.counter.clients.reply)
  * ConversationError [22]: a conversation that must not be sent (refused before any network call)
    * UnknownToolCallId [22]
    * NotJSON [22]
  * ScriptError [23]: a customer script or consent decision that cannot be used
  * ProgramNotStarted [24] (cafe.cli.wire): `cafe record` / `cafe replay-run`: the program could not be
      started
  * RecordingError [30] (cafe.recording.errors): a recording that cannot be made or used as asked (a NaN to
      write, a secret too short to scrub)
    * UnknownRecordMode [30] (cafe.recording.modes)
    * RecordingNotFound [31] (cafe.recording.errors): no such recording
    * NotARecording [32] (cafe.recording.errors): not a recording
    * MalformedLine [33] (cafe.recording.errors): a malformed line (path, line, field, expected, found)
    * UnsupportedVersion [34] (cafe.recording.errors): an unsupported format version
    * TruncatedRecording [35] (cafe.recording.errors): a truncated last line (`--allow-truncated` uses the
        calls before it)
    * RecordingExists [36] (cafe.recording.errors): a recording exists (record mode `once`)
      * KeptRecordingExists [36] (cafe_otel._counter.demo)
    * RecordingDisabled [37] (cafe.recording.errors): recording forbidden (record mode `none`)
    * RecordingNotClean [39] (cafe.recording.errors): `check-recording` found secrets or customer-like data
    * ReplayError [40] (cafe.recording.errors): a replay that did not make the recorded calls
      * ReplayMismatch [41] (cafe.recording.errors): a request differs from the recorded one
      * UnusedCalls [42] (cafe.recording.errors): recorded calls were never made
      * RecordingExhausted [43] (cafe.recording.errors): more calls than the recording holds
      * TranscriptMismatch [44] (cafe.recording.errors): the replayed transcript differs from the recorded one
      * NetworkRefused [45] (cafe.recording.errors): the network was used during a replay
      * StreamExhausted [49] (cafe.recording.errors): a replayed stream was read past its recorded end
      * ReplayUnchecked [50] (cafe.cli.wire): `cafe record` / `cafe replay-run`: the program ended without
          cafe's check at its exit (killed, `os._exit`, or it never loaded cafe's hook)
    * OtherProcessCall [51] (cafe.recording.errors): a model call from a process that does not own the
        recording or replay (a child forked or started by it), refused before it was sent
  * HookNotLoaded [52] (cafe.wire._hook): `cafe record` / `cafe replay-run`: the program's Python would
      run it without cafe's hook (`-S`; `-I` or `-E` where cafe's startup file is not installed; a Python
      that cannot import cafe): stopped before it ran
  * Unwritable [38]: a path not writable: not a regular file of ours, `PATH.partial` in the way, an output
      that would replace an input or a recording, a page that exists, or a write that failed
  * GoldenMissing [46] (cafe_otel._counter.golden): no golden OTLP file
  * GoldenMismatch [47] (cafe_otel._counter.golden): the replay's OTLP differs from the golden file
  * TelemetryExportFailed [48] (cafe_otel._cli.plugin): `cafe export`: spans were not confirmed delivered
      (lost, or unanswered when its wait ended)
  * StackError [60] (otelstack.errors): `otelstack up`/`down`: the stack directory or a file in it is not a
      plain one of ours, or others may write into it
    * StackDirectoryUnusable [60] (otelstack.errors)
    * StackStateMalformed [61] (otelstack.errors): stack.json is not what `up` writes
    * PortInUse [62] (otelstack.errors): a port the stack binds is taken
    * ProgramNotBuilt [63] (otelstack.errors): a program of the stack is not built
    * AlreadyUp [64] (otelstack.errors): the stack is already up
    * ProgramFailed [65] (otelstack.errors): a program of the stack exited or did not serve its ports in time
    * StillRunning [66] (otelstack.errors): a process of the stack outlived SIGKILL
    * ProcUnavailable [67] (otelstack.errors): no /proc to prove a pid is the stack's

Exit codes no class carries:

* [70]: an internal error (`CAFE_DEBUG=1` shows the traceback)
* [130]: interrupted (Ctrl-C); a recording in progress keeps its calls in `PATH.partial`
* [143]: terminated (SIGTERM: a CI timeout, `timeout`, `docker stop`); as after Ctrl-C

`cafe record` and `cafe replay-run` otherwise exit with the program's own code.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path


class CafeError(Exception):
    """Base of every error the harness raises on purpose."""

    exit_code = 1


class UsageError(CafeError):
    """A bad option or argument on the command line."""

    exit_code = 2


class ConfigurationError(CafeError):
    exit_code = 20


class MissingSettings(ConfigurationError):
    def __init__(self, missing: list[str]) -> None:
        self.missing = list(missing)
        super().__init__("live mode needs these settings, which are not set: " + ", ".join(missing))


class ModelCallError(CafeError):
    """The model endpoint failed; the text names the failure class and status only."""

    exit_code = 21


class ConversationError(CafeError):
    """A conversation that must not be sent (refused before any network call)."""

    exit_code = 22


class UnknownToolCallId(ConversationError):
    def __init__(self, index: int, tool_call_id: str) -> None:
        self.index = index
        self.tool_call_id = tool_call_id
        super().__init__(
            f"messages[{index}]: tool result answers tool_call_id {tool_call_id!r}, "
            "which no earlier assistant message opened"
        )


class NotJSON(ConversationError):
    """A request holding a value JSON has no form for (a UUID, a set, bytes, a cycle, ...):
    it could be neither sent, recorded nor matched against a recording. The message names
    where, and what was found by type only."""

    def __init__(self, where: str, found: str) -> None:
        self.where = where
        super().__init__(f"{where}: expected plain JSON (objects, arrays, strings, numbers, booleans, null), "
                         f"found {found}")


class ScriptError(CafeError):
    """A customer script or consent-decision file that cannot be used."""

    exit_code = 23


class Unwritable(CafeError):
    """A file that cannot be written as asked: a path that is not a regular file of our own,
    one that would destroy an input, a recording or an existing private file, or a write
    that failed. `what` is what was being written (`the recording`, `the page`)."""

    exit_code = 38

    def __init__(self, path: Path | str, why: str, *, what: str = "the file") -> None:
        self.path, self.why, self.what = Path(path), why, what
        super().__init__(f"{path}: cannot write {what} ({why})")


_TREE_LINE = re.compile(r"^(?P<indent> *)\* (?:(?P<name>\w+) )?\[(?P<code>\d+)\]"
                        r"(?: \((?P<module>[\w.]+)\))?(?:: (?P<meaning>.+))?$")


@dataclasses.dataclass(frozen=True)
class TreeEntry:
    """A line of the tree in this module's docstring; `name` is None for a code no class carries."""

    name: str | None
    exit_code: int
    parent: str | None
    module: str
    meaning: str | None


def documented_tree() -> list[TreeEntry]:
    """The entries of the tree this module's docstring draws, in the order drawn."""
    entries: list[TreeEntry] = []
    parents: list[str] = []
    previous_was_entry = False
    for line in (__doc__ or "").splitlines():
        found = _TREE_LINE.match(line)
        if found is None:
            if entries and line.startswith("    ") and line.strip() and previous_was_entry:
                last = entries[-1]  # a meaning continued on the next line
                entries[-1] = dataclasses.replace(last, meaning=f"{last.meaning} {line.strip()}")
            else:
                previous_was_entry = False
            continue
        previous_was_entry = True
        depth = len(found["indent"]) // 2
        del parents[depth:]
        name = found["name"]
        entries.append(TreeEntry(name, int(found["code"]), parents[-1] if parents else None,
                                 found["module"] or __name__, found["meaning"]))
        if name is not None:
            parents.append(name)
    return entries


def exit_table() -> str:
    """The exit codes as a Markdown table (docs/cli.md carries it), made from the tree."""
    entries = documented_tree()
    rows = ["| exit | meaning | errors |", "|---|---|---|"]
    for entry in sorted((e for e in entries if e.meaning is not None), key=lambda e: e.exit_code):
        names = [e.name for e in entries if e.name is not None and e.exit_code == entry.exit_code]
        shown = ", ".join(f"`{name}`" for name in names) or "none (not an error class)"
        rows.append(f"| {entry.exit_code} | {entry.meaning} | {shown} |")
    return "\n".join(rows) + "\n"
