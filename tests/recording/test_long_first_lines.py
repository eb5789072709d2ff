"""Whether a file holds a recording was judged from its first 1 MiB: a recording whose header
is longer (a long script: every customer line is in it) read as "not a recording", so
`cafe export --out` and `cafe golden --update` replaced it, and `--record-mode all` refused to
re-record it. The header is read up to the line limit the reader itself reads."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from cafe import ScriptedClient, Tracer, make_responder, record_shift
from cafe.cli import main
from cafe.recording import RecordMode
from cafe.recording.output import UnsafeOutput, write_output
from cafe.recording.writer import check_target, holds_recording

LINES = 300_000  # "a", four bytes each in the header: a first line of 1.2 MB


@pytest.fixture(scope="module")
def long_header(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("long") / "shift.jsonl"
    record_shift(ScriptedClient(), ["a"] * LINES, path, responder=make_responder([("approve", None)]),
                 tracer=Tracer(), max_turns=2)
    assert len(path.read_bytes().split(b"\n", 1)[0]) > 1024 * 1024
    return path


def test_a_recording_with_a_long_header_is_one(long_header: Path) -> None:
    assert holds_recording(long_header)
    check_target(long_header, RecordMode.ALL)  # re-recording it is allowed


def test_no_output_replaces_a_recording_with_a_long_header(long_header: Path, tmp_path: Path) -> None:
    before = long_header.read_bytes()
    with pytest.raises(UnsafeOutput, match="holds a cafe recording"):
        write_output(long_header, b"spans")
    seed = Path(__file__).resolve().parents[1] / "recordings" / "seed-shift.jsonl"
    err = io.StringIO()
    code = main(["export", str(seed), "--out", str(long_header)], environ={}, out=io.StringIO(), err=err)
    assert code == 38 and "holds a cafe recording" in err.getvalue()
    assert long_header.read_bytes() == before
