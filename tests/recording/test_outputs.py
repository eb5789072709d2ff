"""No command writes over a file it reads or over a recording; output holding conversation
content is private (0600) and never replaces a file."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from cafe.cli import main
from cafe.cli.plugins import installed_plugins
from cafe.counter import record_shift
from cafe.counter.clients.scripted import ScriptedClient
from cafe.counter.consent import make_responder
from cafe.recording.output import UnsafeOutput
from tests.recording.helpers import snapshot, valid_bytes


def cafe(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), environ={}, out=out, err=err, load_plugins=installed_plugins)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "shift.jsonl"
    record_shift(ScriptedClient(), ["A latte, please.", "That's all."], path,
                 responder=make_responder([("approve", None)]), decisions=[("approve", None)], seed=7)
    return path


def _refused(argv: list[str], *protected: Path) -> str:
    before = [snapshot(p) for p in protected]
    code, _, err = cafe(*argv)
    assert code == UnsafeOutput.exit_code == 38, err
    assert err.count("\n") == 1 and "cannot write the output (" in err
    assert [snapshot(p) for p in protected] == before
    return err


def test_export_never_writes_over_the_recording_it_reads(recording: Path, tmp_path: Path):
    assert "the file this command reads" in _refused(["export", str(recording), "--out", str(recording)], recording)
    alias = tmp_path / "alias.otlp"
    os.link(recording, alias)  # the same file under another name
    assert "the file this command reads" in _refused(["export", str(recording), "--out", str(alias)], recording)


def test_golden_update_never_writes_over_the_recording_it_replays(recording: Path):
    _refused(["golden", str(recording), str(recording), "--update"], recording)


def test_no_output_replaces_another_recording(recording: Path, tmp_path: Path):
    other = tmp_path / "other.jsonl"
    other.write_bytes(valid_bytes())
    err = _refused(["export", str(recording), "--out", str(other)], other, recording)
    assert "holds a cafe recording" in err
    _refused(["golden", str(recording), str(other), "--update"], other, recording)


def test_content_output_is_private_and_never_replaces_a_file(recording: Path, tmp_path: Path):
    out = tmp_path / "content.otlp"
    code, _, err = cafe("export", str(recording), "--capture-content", "--out", str(out))
    assert code == 0, err
    assert out.stat().st_mode & 0o777 == 0o600
    assert "never replaces one" in _refused(["export", str(recording), "--capture-content", "--out", str(out)], out)


def test_metadata_output_and_golden_files_are_rewritten_as_asked(recording: Path, tmp_path: Path):
    out, golden = tmp_path / "meta.otlp", tmp_path / "shift.otlp"
    out.write_bytes(b"old")
    assert cafe("export", str(recording), "--out", str(out))[0] == 0
    umask = os.umask(0)
    os.umask(umask)
    assert out.read_bytes() != b"old" and out.stat().st_mode & 0o777 == 0o666 & ~umask
    code, _, err = cafe("golden", str(recording), str(golden))
    assert code == 46
    remedy = err.split("`")[1]  # the command the message suggests, run as it is written
    assert remedy == f"cafe golden {recording} {golden} --update"
    assert cafe(*remedy.split()[1:])[0] == 0
    assert cafe("golden", str(recording), str(golden))[0] == 0


def test_golden_mismatch_remedy_works(recording: Path, tmp_path: Path):
    golden = tmp_path / "stale.otlp"
    assert cafe("golden", str(recording), str(golden), "--update")[0] == 0
    golden.write_bytes(golden.read_bytes()[:-1] + b"\x00")  # a golden file from another harness
    code, _, err = cafe("golden", str(recording), str(golden))
    assert code == 47 and err.count("\n") == 1
    remedy = err.split("`")[1]
    assert remedy == f"cafe golden {recording} {golden} --update"
    assert cafe(*remedy.split()[1:])[0] == 0
    assert cafe("golden", str(recording), str(golden))[0] == 0
