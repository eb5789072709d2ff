"""Every `--flag` a message, a docstring or a help text names exists on the command it names.

The flags are collected from the source itself: every string constant and f-string of
cafe/ and cafe_otel/, and every help text of the real `cafe` parser (built with the
installed plugins). A string that names `cafe <command>` must name flags of that command
(of one of them, when it names several); a file whose messages speak for known commands
must name flags of each; anything else must name a flag of some `cafe` command. The pytest
plugin's strings speak for pytest, whose options are checked on this session's config.
"""

from __future__ import annotations

import argparse
import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cafe.cli.commands import build_parser
from cafe.cli.plugins import installed_plugins

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("cafe", "cafe_otel")
PYTEST = "pytest"
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?:=([a-z][\w-]*))?")
NAMED_COMMAND = re.compile(r"\bcafe ([a-z][a-z-]*[a-z])\b")

# Files whose messages are shown by known commands only. A recording's load errors reach
# the user through every command that loads one.
SPEAKS_FOR: dict[str, tuple[str, ...]] = {
    "cafe/pytest_plugin.py": (PYTEST,),
    "cafe/_pytest/options.py": (PYTEST,),
    "cafe/_pytest/network.py": (PYTEST,),
    "cafe/_pytest/failures.py": (PYTEST,),
    "cafe/_pytest/marked.py": (PYTEST,),
    "cafe/counter/pytest_plugin.py": (PYTEST,),
    "cafe/recording/check.py": ("check-recording",),
    "cafe/recording/errors.py": ("replay-run", "view", "export"),
    "cafe_otel/_counter/golden.py": ("golden",),
}


@dataclass(frozen=True)
class Mention:
    where: str  # file:line, or the command whose help text it is
    flag: str
    value: str | None
    commands: tuple[str, ...]  # the flag must be on each; empty: on any cafe command
    any_of: bool = False  # ... or, for a string naming several commands, on one of them


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)
    return None


def mentions_in(text: str, where: str, speaks_for: tuple[str, ...]) -> Iterator[Mention]:
    named = tuple(dict.fromkeys(NAMED_COMMAND.findall(text)))
    for match in FLAG.finditer(text):
        if named and speaks_for != (PYTEST,):
            yield Mention(where, match.group(1), match.group(2), named, any_of=True)
        else:
            yield Mention(where, match.group(1), match.group(2), speaks_for)


def source_mentions() -> list[Mention]:
    found = []
    for package in SOURCES:
        for path in sorted((REPO / package).rglob("*.py")):
            relative = path.relative_to(REPO).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=relative)
            # An f-string's constant parts are read with the f-string, not on their own.
            parts = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
            for node in ast.walk(tree):
                text = _text(node)
                if text is None or id(node) in parts:
                    continue
                found += mentions_in(text, f"{relative}:{node.lineno}", SPEAKS_FOR.get(relative, ()))
    return found


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("the cafe parser has no subcommands")


def options_of(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {option: action for action in parser._actions for option in action.option_strings}


@pytest.fixture(scope="module")
def commands() -> dict[str, dict[str, argparse.Action]]:
    plugins = installed_plugins(lambda line: None)
    assert "otel" in [plugin.name for plugin in plugins], "cafe_otel's plugin is not installed"
    parser = build_parser(plugins)
    # `cafe`'s own options (--version) stand for the command as a whole, under its name.
    return {"cafe": options_of(parser), **{name: options_of(sub) for name, sub in subcommands(parser).items()}}


def help_mentions() -> list[Mention]:
    plugins = installed_plugins(lambda line: None)
    found = []
    for name, sub in subcommands(build_parser(plugins)).items():
        for action in sub._actions:
            found += mentions_in(action.help or "", f"cafe {name} {action.dest} help", (name,))
    return found


def problems(mentions: list[Mention], commands: dict[str, dict[str, argparse.Action]],
             pytest_config: pytest.Config) -> list[str]:
    found = []
    for mention in mentions:
        targets = mention.commands or tuple(commands)
        if targets == (PYTEST,):
            try:
                pytest_config.getoption(mention.flag)
            except ValueError:
                found.append(f"{mention.where}: {mention.flag} is not a pytest option")
            continue
        unknown = [name for name in targets if name not in commands]
        if unknown:
            found.append(f"{mention.where}: names `cafe {unknown[0]}`, which is no command")
            continue
        having = [name for name in targets if mention.flag in commands[name]]
        every = bool(mention.commands) and not mention.any_of
        if not having or (every and len(having) < len(targets)):
            lacking = [name for name in targets if name not in having]
            found.append(f"{mention.where}: {mention.flag} is not an option of "
                         f"{'cafe ' + ', cafe '.join(lacking) if mention.commands else 'any cafe command'}")
            continue
        for name in having:
            choices = commands[name][mention.flag].choices
            if mention.value and choices is not None and mention.value not in choices:
                found.append(f"{mention.where}: {mention.flag}={mention.value} is not one of {list(choices)}")
                break  # one problem a mention, however many commands share the flag
    return found


def test_the_source_names_flags_somewhere() -> None:
    # The collection itself works: it sees the flags that certainly are there.
    flags = {(m.where.split(":")[0], m.flag) for m in source_mentions()}
    assert ("cafe_otel/_cli/plugin.py", "--otlp") in flags
    assert ("cafe/pytest_plugin.py", "--cafe-record-mode") in flags
    if (REPO / "cafe" / "counter").is_dir():  # the café example, when it is there
        assert ("cafe/counter/cli.py", "--decision") in flags


def test_every_flag_named_in_the_source_exists(commands, pytestconfig) -> None:
    assert problems(source_mentions(), commands, pytestconfig) == []


def test_every_flag_named_in_a_help_text_exists(commands, pytestconfig) -> None:
    found = help_mentions()
    assert any(m.flag == "--otlp" for m in found)  # the --otlp help names --otlp=ENDPOINT
    assert problems(found, commands, pytestconfig) == []


@pytest.mark.parametrize(("text", "speaks_for", "wrong"), [
    ("retry with --no-such-flag", (), "--no-such-flag is not an option of any cafe command"),
    ("draw it with --update-page", ("view",), "--update-page is not an option of cafe view"),
    ("run `cafe view --update`", (), "--update is not an option of cafe view"),
    ("run `cafe brew --seed 1`", (), "names `cafe brew`, which is no command"),
    ("use it with --allow-truncated", ("view", "record"), "--allow-truncated is not an option of cafe record"),
    ("run with --record-mode=sometimes", (), "--record-mode=sometimes is not one of"),
    ("run with --no-such-pytest-flag", (PYTEST,), "--no-such-pytest-flag is not a pytest option"),
])
def test_a_message_naming_a_missing_flag_is_caught(commands, pytestconfig, text, speaks_for, wrong) -> None:
    found = problems(list(mentions_in(text, "here", speaks_for)), commands, pytestconfig)
    assert len(found) == 1
    assert wrong in found[0]


@pytest.mark.parametrize(("text", "speaks_for"), [
    ("x --ignore metadata.run_id --record-mode=all", ()),
    ("run `cafe view r.jsonl -o r.html --allow-truncated`", ()),
    ("show them with --allow-truncated", ("view",)),
    ("add --otlp to `cafe view` or `cafe export`", ()),
    ("use it with --allow-truncated", ("replay-run", "export")),
    ("--cafe-record-mode=all", (PYTEST,)),
])
def test_a_message_naming_real_flags_passes(commands, pytestconfig, text, speaks_for) -> None:
    assert problems(list(mentions_in(text, "here", speaks_for)), commands, pytestconfig) == []
