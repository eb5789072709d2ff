"""The café's own command-line inputs: the customer script a shift reads and the synthetic
customer's consent decisions."""

from __future__ import annotations

import json
import os
import stat

from cafe.cli.arguments import path_argument
from cafe.counter.consent import DECISIONS, Decision
from cafe.errors import ScriptError

script_to_read = path_argument("a file of customer lines")

MAX_SCRIPT_BYTES = 1024 * 1024


def _read_bounded(path: str) -> bytes:
    """The file's bytes, if it is a regular file of at most MAX_SCRIPT_BYTES: opened without
    blocking (a FIFO would wait for a writer forever) and read no further than the bound
    (/dev/zero never ends)."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(descriptor, "rb") as source:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ScriptError(f"{path}: a script must be a regular file (this is a FIFO, device or directory)")
        data = source.read(MAX_SCRIPT_BYTES + 1)
    if len(data) > MAX_SCRIPT_BYTES:
        raise ScriptError(f"{path}: the script is longer than {MAX_SCRIPT_BYTES} bytes")
    return data


def read_script(path: str) -> list[str]:
    try:
        text = _read_bounded(path).decode("utf-8")
    except FileNotFoundError:
        raise ScriptError(f"{path}: no such script file") from None
    except (UnicodeDecodeError, OSError) as error:
        raise ScriptError(f"{path}: cannot be read as a UTF-8 text script ({type(error).__name__})") from None
    lines = [line.strip() for line in text.splitlines()]
    script = [line for line in lines if line and not line.startswith("#")]
    if not script:
        raise ScriptError(f"{path}: the script has no customer lines (one line per turn; # comments)")
    return script


MAX_DECISION_CHARS = 64 * 1024
MAX_DECISION_DEPTH = 16


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _not_a_number(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def parse_decision(text: str) -> Decision:
    kind, _, payload = text.partition("=")
    if kind not in DECISIONS:
        raise ScriptError(f"--decision: {len(kind)} characters before '=' are not a decision; "
                          "use approve, reject or edit=JSON")
    if kind != "edit":
        if payload:
            raise ScriptError(f"--decision {kind}: takes no payload (only edit=JSON does)")
        return (kind, None)
    if len(payload) > MAX_DECISION_CHARS:
        raise ScriptError(f"--decision edit=...: the payload is longer than {MAX_DECISION_CHARS} characters")
    try:
        value = json.loads(payload, parse_constant=_not_a_number)
    except json.JSONDecodeError as error:
        raise ScriptError(f"--decision edit=...: the payload is not JSON ({error.msg})") from None
    except (ValueError, RecursionError):
        raise ScriptError("--decision edit=...: the payload is not plain JSON (NaN, Infinity, "
                          "an overlong number or nesting too deep)") from None
    if not isinstance(value, dict) or _depth(value) > MAX_DECISION_DEPTH:
        raise ScriptError("--decision edit=...: the payload must be a JSON object (the edited order, "
                          'e.g. {"items": ["latte"], "table": 4}), at most '
                          f"{MAX_DECISION_DEPTH} levels deep")
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:  # 1e999 reads as an infinite float
        raise ScriptError("--decision edit=...: the payload holds a number too large for JSON") from None
    return (kind, value)
