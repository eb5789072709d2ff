"""Reading a recording (cafe/recording/reader.py): what makes a file a recording, and how a
wrong line is named."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from cafe import ScriptedClient, Tracer, make_responder, record_shift
from cafe.cli import main
from cafe.recording import MalformedLine, RecordMode, load_recording
from cafe.recording.output import UnsafeOutput, write_output
from cafe.recording.writer import check_target, holds_recording
from tests.recording.helpers import call, dump, end, header

# Whether a file holds a recording is judged from its header read up to the line limit the
# reader itself reads, so a recording with a long header (a long script: every customer line
# is in it) is one: no output replaces it, and `--record-mode all` re-records it.

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


# A call line whose number is wrong is named with the number found, and a number of
# thousands of digits (which the strict decoder reads) is described by its size.

@pytest.mark.parametrize("number", [10**4000, -(10**30), 2**64 + 1])
def test_a_huge_call_number_is_described_by_its_size(tmp_path: Path, number: int) -> None:
    path = tmp_path / "shift.jsonl"
    path.write_bytes(dump(header(), call(1, call=number), end(1)))
    with pytest.raises(MalformedLine) as caught:
        load_recording(path)
    message = str(caught.value)
    assert "call:" in message and "digits" in message and len(message) < 300


def test_a_small_wrong_call_number_is_still_shown(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    path.write_bytes(dump(header(), call(1, call=3), end(1)))
    with pytest.raises(MalformedLine, match=r"expected call 1 .*found call 3"):
        load_recording(path)
