"""What `cafe` prints reaches a terminal: customer lines, model replies and file names with
escape sequences are shown escaped (they must not clear the screen, retitle the window or
rewrite a line), and text with no UTF-8 form (a lone surrogate) is printed, not exit 70."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cafe.cli import main
from cafe.cli.terminal import printable
from cafe.counter import ScriptedClient, make_responder, record_shift
from cafe.counter.cli import plugin as COUNTER
from cafe.recording import load_recording

ROOT = Path(__file__).resolve().parents[2]
# A carriage return too: it would let a line overwrite the one before it.
ESCAPES = "\x1b[2J\x1b]0;owned\x07\r\x08\x9b"
# (A script file is split into lines at a carriage return, so a line cannot hold one.)
LINE_ESCAPES = ESCAPES.replace("\r", "")


def _strict_stream() -> io.TextIOWrapper:
    # A terminal's stdout: UTF-8, strict (a StringIO would take any str).
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = _strict_stream(), _strict_stream()
    code = main(list(argv), environ={}, out=out, err=err, load_plugins=lambda warn: [COUNTER])
    texts = []
    for stream in (out, err):
        stream.flush()
        texts.append(stream.buffer.getvalue().decode("utf-8"))  # type: ignore[attr-defined]
    return code, texts[0], texts[1]


def _unsafe(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]


def test_escape_sequences_in_customer_lines_are_shown_escaped(tmp_path: Path) -> None:
    script = tmp_path / "lines.txt"
    script.write_text(f"A latte {LINE_ESCAPES} please\nThat's all.\n", encoding="utf-8")
    recording = tmp_path / "shift.jsonl"
    code, out, err = _run("shift", "--script", str(script), "--seed", "3", "--record", str(recording))
    assert code == 0, err
    assert _unsafe(out) == [] and _unsafe(err) == []
    assert r"user: A latte \x1b[2J\x1b]0;owned\x07\x08\x9b please" in out
    # Only the printing escapes: the recording and its transcript digest keep the text.
    header = json.loads(recording.read_text(encoding="utf-8").splitlines()[0])
    assert header["script"][0] == f"A latte {LINE_ESCAPES} please"
    code, out, err = _run("replay", str(recording), "--show")
    assert code == 0, err
    assert _unsafe(out) == [] and "transcript matches" in out


def test_a_lone_surrogate_in_a_replayed_transcript_is_printed_escaped(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    record_shift(ScriptedClient(), ["A latte \ud800 please", "That's all."], path,
                 responder=make_responder([("approve", None)]), decisions=[("approve", None)])
    code, out, err = _run("replay", str(path), "--show")
    assert code == 0, err
    assert r"user: A latte \ud800 please" in out


def test_an_error_naming_a_file_escapes_its_control_characters(tmp_path: Path) -> None:
    code, _, err = _run("replay", str(tmp_path / f"x{ESCAPES}.jsonl"))
    assert code == 31
    assert err.count("\n") == 1 and _unsafe(err) == []
    assert r"x\x1b[2J\x1b]0;owned\x07\x0d\x08\x9b.jsonl: no such recording" in err


# Built from pieces, so that this file is not itself a key to a scanner.
KEY_IN_NAME = "sk-" + "proj-" + "Kq72Zx9Wm4Rt8Yp3Ln6Bv1Cs5Df0Gh2"


@pytest.mark.parametrize("command", [
    ("replay", "{dir}/missing_{key}.jsonl"),  # no such recording
    ("replay", "{dir}/bad_{key}.jsonl"),  # not a recording
    ("view", "{dir}/bad_{key}.jsonl", "-o", "{dir}/page.html"),
    ("view", "{dir}/good_{key}.jsonl", "-o", "{dir}/missing/{key}.html"),  # the page cannot be written
    ("replay", "{dir}/good_{key}.jsonl", "--report", "{dir}/missing/x_{key}.html"),
    ("shift", "--record", "{dir}/good_{key}.jsonl"),  # exists: never overwritten
])
def test_an_error_line_naming_a_file_scrubs_a_key_in_its_name(tmp_path: Path, command: tuple[str, ...]) -> None:
    (tmp_path / f"bad_{KEY_IN_NAME}.jsonl").write_text('{"bad"\n')
    record_shift(ScriptedClient(), ["A latte, please.", "That's all."], tmp_path / f"good_{KEY_IN_NAME}.jsonl",
                 responder=make_responder([("approve", None)]))
    code, _, err = _run(*(part.format(dir=tmp_path, key=KEY_IN_NAME) for part in command))
    assert code not in (0, 70), err
    assert err.startswith("cafe: error: ") and err.count("\n") == 1
    assert KEY_IN_NAME[8:] not in err and "[REDACTED]" in err


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_printable_leaves_nothing_a_terminal_acts_on_and_keeps_the_rest(text: str) -> None:
    shown = printable(text)
    assert _unsafe(shown) == []
    shown.encode("utf-8")  # no lone surrogate left
    plain = "".join(c for c in text if not _unsafe(c) and not 0xD800 <= ord(c) <= 0xDFFF)
    assert printable(plain) == plain  # ordinary text (any script, emoji, tabs, newlines) as it is
    surrogates = sum(1 for c in text if 0xD800 <= ord(c) <= 0xDFFF)
    controls = len(text) - len(plain) - surrogates
    assert len(shown) == len(plain) + 4 * controls + 6 * surrogates  # \xNN, \uNNNN


def test_python_dash_m_cafe_runs_the_command() -> None:
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "cafe", "replay", "/nonexistent/x.jsonl"],
                          capture_output=True, text=True, env=environ, timeout=60, check=False)
    assert done.returncode == 31, done.stderr
    assert done.stderr == "cafe: error: /nonexistent/x.jsonl: no such recording\n"



def test_every_command_output_is_escaped_a_finding_path_from_a_recording_key_too(tmp_path: Path) -> None:
    # The key is the recording's, not cafe's: check-recording quoted it raw on stdout.
    path = tmp_path / "odd.jsonl"
    path.write_text(json.dumps({"\x1b]0;owned\x07": "jo.smith@gmail.com"}) + "\n", encoding="utf-8")
    code, out, err = _run("check-recording", str(path))
    assert code == 39 and _unsafe(out) == [] and _unsafe(err) == []
    assert "e-mail address (in $.<a key of 10 characters>)" in out  # such a key only by its size


def _into_a_closed_pipe(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`cafe ARGV | head -0`, made certain: the reading end is closed before cafe writes."""
    environ = {key: value for key, value in os.environ.items()
               if not key.startswith(("OTEL_", "CAFE_", "COURSE_"))}
    environ["PYTHONPATH"] = str(ROOT)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "cafe", *argv], stdout=write_end, stderr=subprocess.PIPE,
                              text=True, env=environ, cwd=cwd, timeout=120, check=False)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("command", [
    ("shift", "--seed", "1"),
    ("replay", "--show", "{seed}"),
    ("demo",),
])
def test_a_closed_stdout_ends_the_output_quietly(tmp_path: Path, command: tuple[str, ...]) -> None:
    seed = ROOT / "tests" / "recordings" / "seed-shift.jsonl"
    done = _into_a_closed_pipe(*(word.format(seed=seed) for word in command), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no traceback, no "Exception ignored" at shutdown


def test_a_recording_made_into_a_closed_pipe_is_complete(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    done = _into_a_closed_pipe("shift", "--seed", "1", "--record", str(path), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    recording = load_recording(path)
    assert recording.ending is not None and len(recording.calls) == 5
    assert not list(tmp_path.glob("*.partial"))


class _ClosedByItsReader(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_reader_gone_mid_command_costs_the_recording_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    err = io.StringIO()
    code = main(["shift", "--seed", "1", "--record", str(path)], environ={}, out=_ClosedByItsReader(), err=err,
                load_plugins=lambda warn: [COUNTER])
    assert (code, err.getvalue()) == (0, "")
    assert load_recording(path).ending is not None


def _with_stdout(stdout: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`cafe ARGV` run by a shell whose redirection `stdout` (`>&-`, `>/dev/full`) sets its stdout."""
    environ = {key: value for key, value in os.environ.items()
               if not key.startswith(("OTEL_", "CAFE_", "COURSE_"))}
    environ["PYTHONPATH"] = str(ROOT)
    words = " ".join(f"'{word}'" for word in [sys.executable, "-m", "cafe", *argv])
    return subprocess.run(["sh", "-c", f"exec {words} {stdout}"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, env=environ, cwd=cwd, timeout=120, check=False)


def test_a_stdout_closed_before_the_command_starts_is_a_reader_gone(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    done = _with_stdout(">&-", "shift", "--seed", "1", "--record", str(path), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")  # no traceback, no internal error
    assert load_recording(path).ending is not None


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_output_that_cannot_be_written_is_one_line_and_exit_38_and_costs_the_recording_nothing(
        tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    done = _with_stdout(">/dev/full", "shift", "--seed", "1", "--record", str(path), cwd=tmp_path)
    assert done.returncode == 38, done.stderr
    assert done.stderr == "cafe: error: <stdout>: cannot write the output (ENOSPC)\n"
    assert load_recording(path).ending is not None
    # A command's own error keeps its code and its line.
    done = _with_stdout(">/dev/full", "replay", str(tmp_path / "missing.jsonl"), cwd=tmp_path)
    assert done.returncode == 31 and done.stderr.count("\n") == 1 and "no such recording" in done.stderr
