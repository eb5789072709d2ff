"""What the `cafe` commands (and plugins' commands) take from the command line: the argument
types they share, and the customer script and consent decisions a shift reads."""

from __future__ import annotations

import argparse
import json
import os
import stat
from collections.abc import Callable, Sequence
from typing import Any

from cafe.consent import DECISIONS, Decision
from cafe.errors import ScriptError


def path_argument(what: str, *, kind: str = "file") -> Callable[[str], str]:
    """The argument type of a path on the command line, `what` saying what it names (`a file
    of customer lines`). An empty or blank path is a usage error (exit 2), not `Path("")`,
    which is `.`: a directory that exists, which a command would read, write or refuse."""

    def path(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"needs {what} (an empty path names no {kind})")
        return text

    path.__name__ = "path"  # argparse names the type in its own messages
    return path


file_to_read = path_argument("a file path")
recording_to_write = path_argument("a file path to record to")
script_to_read = path_argument("a file of customer lines")
page_to_write = path_argument("a file path for the page")


def positive(text: str) -> int:
    """A whole number of at least 1 (a turn cap)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


class AttachedValue(argparse.Action):
    """An option that is a flag, or takes its value attached: `--otlp` or `--otlp=URL`.

    argparse lets an optional value (`nargs="?"`) swallow the next word, so in
    `cafe replay --otlp shift.jsonl` the path would be taken for the endpoint. Before parsing,
    `attach_values` rewrites each bare use: the next word is taken as the value only when
    `separate(word)` accepts it (for an endpoint, a word with a scheme), else the option
    stands alone."""

    def __init__(self, option_strings: list[str], dest: str, *,
                 separate: Callable[[str], bool] = lambda word: False, **kwargs: Any) -> None:
        kwargs.setdefault("const", "")
        super().__init__(option_strings, dest, nargs="?", **kwargs)
        self.separate = separate

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, self.const if values is None else values)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _attached_options(parser: argparse.ArgumentParser) -> dict[str, AttachedValue]:
    return {option: action for action in parser._actions if isinstance(action, AttachedValue)
            for option in action.option_strings}


def attach_values(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """`argv` with every bare `AttachedValue` option of the chosen subcommand written with
    an empty attached value (none given) or with the next word attached (when it is one)."""
    words = list(argv)
    commands = _subparsers(parser)
    at = next((i for i, word in enumerate(words) if word in commands), None)
    if at is None:
        return words
    options = _attached_options(commands[words[at]])
    rewritten = words[: at + 1]
    rest = iter(enumerate(words[at + 1:], start=at + 1))
    for index, word in rest:
        if word == "--":
            rewritten += words[index:]
            break
        action = options.get(word)
        if action is None:
            rewritten.append(word)
            continue
        following = words[index + 1] if index + 1 < len(words) else None
        if following is not None and action.separate(following):
            rewritten.append(f"{word}={following}")
            next(rest)
        else:
            rewritten.append(f"{word}=")
    return rewritten


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
