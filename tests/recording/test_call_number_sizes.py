"""A call line whose number is wrong is named with the number found, but a number of thousands
of digits (which the strict decoder reads) was written out whole: one error line of 4,300
characters, against the rule that what was found is described by its size."""

from __future__ import annotations

from pathlib import Path

import pytest

from cafe.recording import MalformedLine, load_recording
from tests.recording.helpers import call, dump, end, header


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
