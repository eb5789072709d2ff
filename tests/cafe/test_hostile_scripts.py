"""A `--script` path that is not a small regular text file is a ScriptError (exit 23) at
once: a FIFO must not block the command forever waiting for a writer, a device or a huge
file must not be read without end."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from cafe.cli import main
from cafe.cli.arguments import MAX_SCRIPT_BYTES


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), environ={}, out=out, err=err, load_plugins=lambda warn: [])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("command", ["shift", "replay"])
def test_a_fifo_as_the_script_is_refused_without_waiting_for_a_writer(tmp_path: Path, command: str) -> None:
    fifo = tmp_path / "lines.fifo"
    os.mkfifo(fifo)
    recording = tmp_path / "r.jsonl"
    if command == "replay":
        assert _run("shift", "--seed", "1", "--record", str(recording))[0] == 0
    argv = ["shift"] if command == "shift" else ["replay", str(recording)]
    code, _, err = _run(*argv, "--script", str(fifo))
    assert code == 23
    assert err == f"cafe: error: {fifo}: a script must be a regular file (this is a FIFO, device or directory)\n"


def test_a_device_as_the_script_is_refused() -> None:
    code, _, err = _run("shift", "--script", os.devnull)
    assert code == 23 and "a script must be a regular file" in err


def test_a_script_beyond_the_bound_is_refused_and_one_at_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    line = b"A latte, please.\n"
    big.write_bytes(line * (MAX_SCRIPT_BYTES // len(line)) + b"x" * (MAX_SCRIPT_BYTES % len(line) + 1))
    code, _, err = _run("shift", "--script", str(big))
    assert code == 23 and err == f"cafe: error: {big}: the script is longer than {MAX_SCRIPT_BYTES} bytes\n"
    small = tmp_path / "small.txt"
    small.write_bytes(b"A latte, please.\nThat's all.\n")
    assert _run("shift", "--seed", "2", "--script", str(small))[0] == 0
