"""What the `cafe` commands take from the command line (cafe/cli/arguments.py and the plugin's
options): paths, the customer script a shift reads, consent decisions and an export timeout."""

from __future__ import annotations

import argparse
import io
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cafe.cli import main
from cafe.cli.commands import build_parser
from cafe.cli.plugins import installed_plugins
from cafe.counter.arguments import MAX_SCRIPT_BYTES
from cafe.counter.cli import plugin as COUNTER
from cafe.errors import ScriptError
from cafe_otel._cli.plugin import plugin
from cafe_otel._counter.plugin import plugin as COUNTER_OTEL
from tests.recording.helpers import call, dump, end, header, run_cli

# Every argument that names a path refuses an empty or blank one as a usage error (exit 2,
# one line): `Path("")` is `.`, a directory that exists, and an empty option value is easily
# taken for no option at all (the default script would run, no page would be written).

# What an argument's metavar or name says when it names a file or a directory.
_PATH_WORDS = {"PATH", "HTML", "REC", "DIR", "FILE.otlp", "path", "paths", "script", "record", "recording",
               "golden", "out", "report", "keep"}


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), environ={}, out=out, err=err, load_plugins=lambda warn: [COUNTER, COUNTER_OTEL, plugin])
    return code, out.getvalue(), err.getvalue()


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser(installed_plugins(lambda line: None))
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(commands.choices)


def _names_a_path(action: argparse.Action) -> bool:
    return bool({str(action.metavar), action.dest} & _PATH_WORDS)


def _empty_path_argv(command: str, parser: argparse.ArgumentParser, target: argparse.Action,
                     empty: str) -> list[str]:
    """A command line giving `target` the value `empty` and every other required argument a word."""
    argv = [command]
    for action in parser._actions:
        if action.nargs == argparse.REMAINDER or isinstance(action, argparse._HelpAction):
            continue
        if not action.option_strings:
            argv.append(empty if action is target else "x.jsonl")
        elif action is target or action.required:
            argv += [action.option_strings[0], empty if action is target else "x.html"]
    return argv


_COMMANDS = _commands()
_PATH_ARGUMENTS = [(command, action) for command, parser in _COMMANDS.items()
                   for action in parser._actions if _names_a_path(action)]


def test_the_commands_take_paths_at_all():
    assert {command for command, _ in _PATH_ARGUMENTS} >= {"shift", "replay", "view", "check-recording",
                                                           "record", "replay-run", "export", "golden", "demo"}


@pytest.mark.parametrize(("command", "action"), _PATH_ARGUMENTS,
                         ids=[f"{command}-{action.dest}" for command, action in _PATH_ARGUMENTS])
@pytest.mark.parametrize("empty", ["", " "])
def test_an_empty_path_for_any_argument_is_a_usage_error(command: str, action: argparse.Action,
                                                         empty: str) -> None:
    argv = _empty_path_argv(command, _COMMANDS[command], action, empty)
    code, out, err = _run(*argv)
    assert (code, out) == (2, ""), (argv, err)
    assert err.count("\n") == 1 and ": needs " in err and "(an empty path names no " in err, err
    assert "exists" not in err


def test_an_empty_script_path_names_what_the_option_takes() -> None:
    code, out, err = _run("shift", "--seed", "1", "--script", "")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "argument --script: needs a file of customer lines" in err


def test_an_empty_page_path_is_refused_before_the_replay_runs(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    assert _run("shift", "--seed", "1", "--record", str(path))[0] == 0
    code, _, err = _run("replay", str(path), "--report", " ")
    assert code == 2 and "argument --report: needs a file path for the page" in err
    code, _, err = _run("view", str(path), "-o", "")
    assert code == 2 and "argument -o/--out: needs a file path for the page" in err


@pytest.mark.parametrize("argv", [
    ["replay", ""], ["view", "", "-o", "page.html"], ["check-recording", " "],
    ["export", ""], ["golden", "", "g.otlp"], ["golden", "s.jsonl", ""],
])
def test_an_empty_file_to_read_is_not_taken_for_the_current_directory(argv: list[str]) -> None:
    code, out, err = _run(*argv)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "needs a file path (an empty path names no file)" in err
    assert "directory" not in err


# A `--script` path that is not a small regular text file is a ScriptError (exit 23) at
# once: a FIFO does not block the command waiting for a writer, and a device or a huge file
# is not read without end.

def _run_without_plugins(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), environ={}, out=out, err=err, load_plugins=lambda warn: [COUNTER])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("command", ["shift", "replay"])
def test_a_fifo_as_the_script_is_refused_without_waiting_for_a_writer(tmp_path: Path, command: str) -> None:
    fifo = tmp_path / "lines.fifo"
    os.mkfifo(fifo)
    recording = tmp_path / "r.jsonl"
    if command == "replay":
        assert _run_without_plugins("shift", "--seed", "1", "--record", str(recording))[0] == 0
    argv = ["shift"] if command == "shift" else ["replay", str(recording)]
    code, _, err = _run_without_plugins(*argv, "--script", str(fifo))
    assert code == 23
    assert err == f"cafe: error: {fifo}: a script must be a regular file (this is a FIFO, device or directory)\n"


def test_a_device_as_the_script_is_refused() -> None:
    code, _, err = _run_without_plugins("shift", "--script", os.devnull)
    assert code == 23 and "a script must be a regular file" in err


def test_a_script_beyond_the_bound_is_refused_and_one_at_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    line = b"A latte, please.\n"
    big.write_bytes(line * (MAX_SCRIPT_BYTES // len(line)) + b"x" * (MAX_SCRIPT_BYTES % len(line) + 1))
    code, _, err = _run_without_plugins("shift", "--script", str(big))
    assert code == 23 and err == f"cafe: error: {big}: the script is longer than {MAX_SCRIPT_BYTES} bytes\n"
    small = tmp_path / "small.txt"
    small.write_bytes(b"A latte, please.\nThat's all.\n")
    assert _run_without_plugins("shift", "--seed", "2", "--script", str(small))[0] == 0


# An absurd `--decision` payload is a script error (exit 23) on one short line, and an
# absurd `export --timeout` a usage error (exit 2): never an internal error.

ABSURD_DECISIONS = [
    "edit=NaN", "edit=Infinity", "edit=1e999", "edit=" + "[" * 5000 + "]" * 5000, "edit=" + "9" * 10_000,
    "edit=[1, 2]", "edit=" + json.dumps({"items": ["latte"], "n": "x" * 100_000}), "edit=",
    "approve=yes", "later",
]


@pytest.mark.parametrize("decision", ABSURD_DECISIONS, ids=range(len(ABSURD_DECISIONS)))
def test_absurd_decisions_are_script_errors(decision: str):
    code, _, err = run_cli("shift", "--decision", decision, "--seed", "1")
    assert code == ScriptError.exit_code, err
    assert err.count("\n") == 1 and len(err) < 300


@settings(max_examples=60, deadline=None)
@given(payload=st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=5),
                            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                        max_size=3)))
def test_any_decision_payload_is_an_answer_never_an_internal_error(payload):
    try:
        text = json.dumps(payload)
    except ValueError:
        return
    code, _, err = run_cli("shift", "--decision", f"edit={text}", "--seed", "1")
    assert code in (0, ScriptError.exit_code), err


@pytest.mark.parametrize("timeout", ["nan", "inf", "-inf", "-1", "soon"])
def test_an_absurd_export_timeout_is_a_usage_error(tmp_path: Path, timeout: str, capsys):
    path = tmp_path / "r.jsonl"
    path.write_bytes(dump(header(), call(1), end(1)))
    code = main(["export", str(path), "--otlp=http://127.0.0.1:9", "--timeout", timeout], environ={},
                load_plugins=installed_plugins)
    assert code == 2
    err = capsys.readouterr().err
    assert "--timeout" in err and err.count("\n") == 1
