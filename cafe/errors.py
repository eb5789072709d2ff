"""The harness's named errors. Each carries an exit code for the command line and a
message that says what and where, without customer text or secrets."""

from __future__ import annotations

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
