"""The `cafe` command, run in-process with its streams and environment injected."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cafe import MissingSettings, load_records
from cafe.cli import main
from cafe.counter import DEFAULT_SCRIPT, ScriptedClient, make_responder, record_shift, replay_shift, run_shift
from cafe.counter.cli import plugin as COUNTER
from cafe.counter.clients.scripted import TEXT_TURN_USAGE, TOOL_TURN_USAGE
from cafe.errors import ScriptError
from cafe.recording import load_recording
from cafe.recording.errors import RecordingExists, RecordingNotFound, RecordingUnwritable

from .helpers import chat_server

KEY = "sk-canary-cli-7d1e9b3a5c2f4e6d"


def cafe(*argv, environ=None):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), environ={} if environ is None else environ, out=out, err=err,
                load_plugins=lambda warn: [COUNTER])
    return code, out.getvalue(), err.getvalue()


def _section(text, name):
    """The body of one `== name ==` section: up to the next section, the stop line or the end."""
    body = text.split(f"== {name} ==\n", 1)[1]
    for end in ("\n\n== ", "\n\nstop reason: "):
        body = body.split(end, 1)[0]
    return body


def _one_error_line(code, err):
    assert code != 0
    assert err.count("\n") == 1 and err.startswith("cafe: error: ")
    assert "Traceback" not in err


def test_shift_prints_transcript_spans_usage_and_handover():
    code, out, err = cafe("shift", "--seed", "7")
    assert code == 0, err
    transcript = _section(out, "transcript")
    assert f"user: {DEFAULT_SCRIPT[0]}" in transcript and f"user: {DEFAULT_SCRIPT[1]}" in transcript
    assert "price_check" in transcript
    spans = _section(out, "spans")
    assert spans.splitlines()[0].startswith("shift  [shift]")
    assert spans.count("[generation]") == 5
    # price the order, say "anything else?", propose it, fire it once approved, announce it
    prompt = 3 * TOOL_TURN_USAGE[0] + 2 * TEXT_TURN_USAGE[0]
    completion = 3 * TOOL_TURN_USAGE[1] + 2 * TEXT_TURN_USAGE[1]
    usage = _section(out, "usage")
    assert usage.startswith(f"5 model call(s), {prompt} input + {completion} output = {prompt + completion} tokens")
    assert "status=approved" in spans and "status=fired  ticket_number=1" in spans
    assert "ticket 1 (turn 4, approval A1): table 1, 2 item(s), EUR 3.70" in _section(out, "handover")
    assert "Shift handover" in _section(out, "handover")
    assert "stop reason: answered" in out
    assert "seed: 7" in out


def test_shift_reads_a_script_file(tmp_path):
    script = tmp_path / "script.txt"
    script.write_text("# a comment\nAn espresso, please.\n\nThat's all.\n", encoding="utf-8")
    code, out, err = cafe("shift", "--script", str(script))
    assert code == 0, err
    transcript = _section(out, "transcript")
    assert "user: An espresso, please." in transcript and "user: That's all." in transcript
    assert "a comment" not in transcript


def test_record_then_replay_exits_zero_with_zero_model_calls(tmp_path):
    path = tmp_path / "shift.jsonl"
    code, out, err = cafe("shift", "--seed", "7", "--record", str(path))
    assert code == 0, err
    assert len(load_records(path)) == 5
    code, replay_out, err = cafe("replay", str(path))
    assert code == 0, err
    assert "0 model calls" in replay_out and "transcript matches" in replay_out
    # --show prints the same conversation and the same handover note as the shift did.
    code, shown, err = cafe("replay", str(path), "--show")
    assert code == 0, err
    assert _section(shown, "transcript") == _section(out, "transcript")
    assert _section(shown, "handover") == _section(out, "handover")


def test_replay_with_a_stale_script_fails_with_one_line_and_no_customer_text(tmp_path):
    path = tmp_path / "shift.jsonl"
    assert cafe("shift", "--record", str(path))[0] == 0
    stale = tmp_path / "stale.txt"
    stale.write_text(DEFAULT_SCRIPT[1] + "\n", encoding="utf-8")
    code, out, err = cafe("replay", str(path), "--script", str(stale))
    _one_error_line(code, err)
    assert out == ""
    assert "call 1" in err
    assert DEFAULT_SCRIPT[0] not in err and DEFAULT_SCRIPT[1] not in err


def test_replay_with_a_shorter_script_reports_unused_calls(tmp_path):
    path = tmp_path / "shift.jsonl"
    assert cafe("shift", "--record", str(path))[0] == 0
    short = tmp_path / "short.txt"
    short.write_text(DEFAULT_SCRIPT[0] + "\n", encoding="utf-8")
    code, _, err = cafe("replay", str(path), "--script", str(short))
    _one_error_line(code, err)
    assert "never made" in err


def test_replay_of_a_missing_recording(tmp_path):
    code, out, err = cafe("replay", str(tmp_path / "nowhere.jsonl"))
    _one_error_line(code, err)
    assert out == ""
    assert "no such recording" in err
    assert not (tmp_path / "nowhere.jsonl").exists()


def test_shift_never_overwrites_an_existing_recording(tmp_path):
    path = tmp_path / "shift.jsonl"
    assert cafe("shift", "--record", str(path))[0] == 0
    before = path.read_bytes()
    code, out, err = cafe("shift", "--record", str(path))
    _one_error_line(code, err)
    assert out == ""
    assert "already exists" in err
    assert path.read_bytes() == before


def test_distinct_exit_codes_for_distinct_failures(tmp_path):
    existing = tmp_path / "shift.jsonl"
    assert cafe("shift", "--record", str(existing))[0] == 0
    codes = {
        "missing recording": cafe("replay", str(tmp_path / "nowhere.jsonl"))[0],
        "existing recording": cafe("shift", "--record", str(existing))[0],
        "missing live settings": cafe("shift", environ={"COURSE_MODE": "live"})[0],
        "missing script": cafe("shift", "--script", str(tmp_path / "none.txt"))[0],
    }
    assert codes == {
        "missing recording": RecordingNotFound.exit_code,
        "existing recording": RecordingExists.exit_code,
        "missing live settings": MissingSettings.exit_code,
        "missing script": ScriptError.exit_code,
    }
    assert all(code not in (0, 1, 2, 70) for code in codes.values()), codes
    assert len(set(codes.values())) == len(codes), codes


def test_missing_live_settings_names_every_variable(tmp_path):
    code, out, err = cafe("shift", environ={"COURSE_MODE": "live", "OPENAI_API_KEY": KEY})
    _one_error_line(code, err)
    for name in ("CAFE_BASE_URL", "OPENAI_BASE_URL", "CAFE_MODEL", "OPENAI_MODEL"):
        assert name in err
    assert KEY not in err and out == ""


def test_a_bad_decision_is_one_error_line():
    code, _, err = cafe("shift", "--decision", "maybe")
    _one_error_line(code, err)
    assert code == ScriptError.exit_code
    assert "--decision: 5 characters before '=' are not a decision; use approve, reject or edit=JSON" in err


@pytest.mark.local_server
def test_live_shift_from_the_command_line_records_and_replays_without_the_key(tmp_path):
    path = tmp_path / "live.jsonl"
    with chat_server(KEY) as server:
        environ = {"COURSE_MODE": "live", "CAFE_BASE_URL": server.base_url, "CAFE_API_KEY": KEY,
                   "CAFE_MODEL": "local-test-model"}
        code, out, err = cafe("shift", "--record", str(path), environ=environ)
        assert code == 0, err
        assert len(server.requests) == 5
    code, replay_out, replay_err = cafe("replay", str(path), "--show")
    assert code == 0, replay_err
    assert _section(replay_out, "transcript") == _section(out, "transcript")
    for text in (out, err, replay_out, replay_err, path.read_text(encoding="utf-8")):
        assert KEY not in text


def test_record_onto_a_directory_is_refused_as_unwritable_not_as_existing(tmp_path):
    code, _out, err = cafe("shift", "--record", str(tmp_path))
    _one_error_line(code, err)
    assert code == RecordingUnwritable.exit_code
    assert "directory" in err


def test_max_turns_below_one_is_a_usage_error():
    code, _, err = cafe("shift", "--max-turns", "0")
    assert code == 2
    assert err == "cafe: error: cafe shift: argument --max-turns: must be at least 1, not 0 (see `cafe shift --help`)\n"


@pytest.mark.parametrize("argv", [[], ["frobnicate"], ["shift", "--no-such-option"], ["replay"], ["view", "x.jsonl"]])
def test_every_usage_error_is_one_line_with_exit_2_and_a_help_command_that_works(argv):
    code, _, err = cafe(*argv)
    assert code == 2 and err.count("\n") == 1 and err.startswith("cafe: error: ")
    suggested = err.rsplit("(see `", 1)[1].split("`)")[0].split()
    assert suggested[0] == "cafe" and suggested[-1] == "--help"
    with pytest.raises(SystemExit) as helped:  # argparse prints the help and exits 0
        cafe(*suggested[1:])
    assert helped.value.code == 0


@pytest.mark.parametrize(("argv", "said"), [
    (["shift", "--version"], "unrecognized arguments: --version (see `cafe --help`)"),
    (["frobnicate"], "argument command: invalid choice: 'frobnicate'"),
    (["shift", "--max-turns", "x"], "cafe shift: argument --max-turns:"),
])
def test_a_usage_error_names_cafe_once_and_a_subcommand_by_its_name(argv, said):
    code, _, err = cafe(*argv)
    assert code == 2 and err.startswith(f"cafe: error: {said}"), err
    assert not err.startswith("cafe: error: cafe: ")


def test_version_prints_cafe_and_the_installed_version():
    from importlib import metadata

    code, out, err = cafe("--version")
    assert (code, err) == (0, "")
    assert out == f"cafe {metadata.version('cafe_otel')}\n"


@pytest.mark.parametrize("variable", ["CAFE_MODE", "COURSE_MODE"])
def test_shift_with_an_unknown_mode_is_a_configuration_error_not_an_offline_run(variable):
    code, out, err = cafe("shift", "--seed", "1", environ={variable: "true"})
    _one_error_line(code, err)
    assert code == 20 and out == ""
    assert variable in err and "live or offline" in err


_LAST_AT_EXIT = """
import atexit, gc, sys
# Registered before main(), so run after everything main() registers (atexit is last in, first out).
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count(), file=sys.__stderr__))
from cafe.cli import main
sys.exit(main())
"""


@pytest.mark.parametrize("argv", [["--version"], ["shift", "--seed", "1"], ["replay", "missing.jsonl"]])
def test_the_command_leaves_its_heap_to_the_os_at_exit(tmp_path, argv):
    # Python's last collection walks every object a long shift made (seconds for 80,000 turns,
    # after SIGTERM too); frozen, the heap is released with the process instead.
    done = subprocess.run([sys.executable, "-c", _LAST_AT_EXIT, *argv], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    frozen = int(done.stderr.rsplit("frozen at exit: ", 1)[1])
    assert frozen > 0, done.stderr


def test_main_called_by_a_program_leaves_its_collections_alone():
    import gc

    cafe("--version")
    assert gc.get_freeze_count() == 0


def test_each_shift_gets_its_own_conversation_id_whatever_its_seed(tmp_path):
    ids = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.jsonl"
        code, _, err = cafe("shift", "--seed", "7", "--record", str(path))
        assert code == 0, err
        ids.append(load_recording(path).header.conversation_id)
    assert ids[0] != ids[1] and all(i.startswith("shift-") for i in ids)
    # A replay keeps the recorded id.
    run, _ = replay_shift(tmp_path / "a.jsonl")
    assert run.conversation_id == ids[0]


def test_the_conversation_id_source_is_injected(tmp_path):
    path = tmp_path / "shift.jsonl"
    given = iter(["shift-first", "shift-second"])
    code = main(["shift", "--seed", "1", "--record", str(path)], environ={}, out=io.StringIO(),
                err=io.StringIO(), load_plugins=lambda warn: [COUNTER], new_conversation_id=lambda: next(given))
    assert code == 0
    assert load_recording(path).header.conversation_id == "shift-first"


def test_run_shift_without_an_id_draws_a_fresh_one_each_time():
    from cafe.counter.loop import new_conversation_id

    first = run_shift(ScriptedClient(), list(DEFAULT_SCRIPT), make_responder([]))
    second = run_shift(ScriptedClient(), list(DEFAULT_SCRIPT), make_responder([]))
    assert first.conversation_id != second.conversation_id
    assert new_conversation_id(lambda n: bytes(n)) == "shift-00000000-0000-4000-8000-000000000000"


def test_replay_show_draws_the_tree_on_the_recorded_timeline(tmp_path):
    from cafe.trace.clock import Timeline
    from cafe.trace.render import format_seconds

    steps = iter(range(0, 10**12, 37_000_000))  # each monotonic reading 37 ms after the one before
    timeline = Timeline(origin_unix_nano=1_767_225_600_000_000_000, monotonic_ns=lambda: next(steps))
    path = tmp_path / "shift.jsonl"
    record_shift(ScriptedClient(), list(DEFAULT_SCRIPT), path, responder=make_responder([]), timeline=timeline)
    recording = load_recording(path)
    code, out, err = cafe("replay", str(path), "--show")
    assert code == 0, err
    spans = _section(out, "spans").splitlines()
    generations = [line for line in spans if "[generation]" in line]
    recorded = [format_seconds(call.timing.duration_ns / 1e9) for call in recording.calls]
    assert [line.split("[generation]")[1].split()[0] for line in generations] == recorded
    last = recording.calls[-1].timing
    shift_seconds = (last.start_unix_nano + last.duration_ns - recording.header.clock_origin_unix_nano) / 1e9
    assert spans[0].split("[shift]")[1].split()[0] == format_seconds(shift_seconds)
    assert "1.000s" not in "\n".join(generations)


def test_the_default_shift_orders_under_consent_and_ends_with_a_goodbye():
    code, out, err = cafe("shift", "--seed", "1")
    assert code == 0, err
    lines = _section(out, "transcript").splitlines()
    after = lines[lines.index(f"user: {DEFAULT_SCRIPT[1]}") + 1:]
    order = '{"items":["latte","chocolate croissant"],"table":1}'
    assert after[0].startswith(f"assistant -> propose_order({order})")
    assert '"status":"approved"' in after[1]
    assert after[2].startswith(f"assistant -> fire_ticket({order})")
    assert '"status":"fired"' in after[3]
    assert after[4:] == ["assistant: Ticket 1 is with the kitchen. Thank you, enjoy your visit!"]


def test_a_rejected_default_order_is_never_fired():
    code, out, err = cafe("shift", "--seed", "1", "--decision", "reject")
    assert code == 0, err
    transcript = _section(out, "transcript")
    assert "-> propose_order(" in transcript and "-> fire_ticket(" not in transcript
    assert transcript.splitlines()[-1] == "assistant: No problem, nothing has been sent. Anything else for you?"
    assert "no tickets fired" in _section(out, "handover")


def test_every_command_is_dispatched_by_the_run_it_sets():
    """main calls `args.run` and nothing else: a command that sets none would be an internal error."""
    import argparse

    from cafe.cli.commands import build_parser
    from cafe.cli.plugins import installed_plugins

    parser = build_parser(installed_plugins(lambda line: None))
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert {"shift", "replay", "view", "check-recording", "record", "replay-run", "export", "golden", "demo"} \
        <= set(commands.choices)
    unset = [name for name, command in commands.choices.items() if not callable(command.get_default("run"))]
    assert unset == []


def test_the_console_script_and_python_m_name_the_function_main():
    """pyproject's `cafe = "cafe.cli:main"`, `python -m cafe` and `from cafe.cli import main`
    all reach the one `main` function."""
    import importlib
    import subprocess
    import sys
    import tomllib
    import types
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    target = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]["cafe"]
    module, _, name = target.partition(":")
    resolved = getattr(importlib.import_module(module), name)
    assert isinstance(resolved, types.FunctionType) and resolved is main
    for entry in ("cafe", "cafe.cli"):
        done = subprocess.run([sys.executable, "-m", entry, "--version"], cwd=root, capture_output=True,
                              text=True, timeout=120, env={"PYTHONPATH": str(root), "PATH": ""}, check=False)
        assert done.returncode == 0 and done.stdout.startswith("cafe "), done.stderr
