"""What the `cafe` commands (and plugins' commands) take from the command line: the argument
types they share."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any


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
    `cafe export --otlp shift.jsonl` the path would be taken for the endpoint. Before parsing,
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
