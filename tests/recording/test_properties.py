"""Properties: whatever the bytes, reading gives a recording or a named error and never
changes the file; whatever the text, what is written reads back the same."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cafe.counter import RecordingClient
from cafe.counter.clients.canned import CannedClient
from cafe.recording import RecordingError, load_recording
from tests.recording.helpers import valid_bytes

VALID = valid_bytes(3)


@st.composite
def corrupted(draw) -> bytes:
    data = bytearray(VALID)
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        position = draw(st.integers(0, max(len(data) - 1, 0)))
        if action == "flip" and data:
            data[position] = draw(st.integers(0, 255))
        elif action == "cut":
            del data[position:]
        elif action == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif data:
            del data[position : position + draw(st.integers(1, 40))]
    return bytes(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corrupted())
def test_any_corruption_loads_or_names_its_error(data: bytes):
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "r.jsonl"
        path.write_bytes(data)
        for allow in (False, True):
            try:
                recording = load_recording(path, allow_truncated=allow)
            except RecordingError as error:
                message = str(error)
                assert message.startswith(str(path)) and "\n" not in message
            else:
                assert all(call.index == n for n, call in enumerate(recording.calls, start=1))
        assert path.read_bytes() == data


text = st.text(st.characters(codec="utf-8") | st.sampled_from(["\ud800", "\udfff", "\u2028", "\x00", '"', "\\"]),
               max_size=60)


@settings(max_examples=100, deadline=None)
@given(user=text, reply=text, stamp=st.integers(0, 2**63) | st.floats(allow_nan=False, allow_infinity=False))
def test_what_is_written_reads_back(user: str, reply: str, stamp):
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "r.jsonl"
        recorder = RecordingClient(CannedClient([{"content": reply}]), path)
        messages = [{"role": "user", "content": user, "stamp": stamp}]
        response = recorder.chat(messages)
        recorder.close()
        call = load_recording(path).calls[0]
        if "REDACTED" not in path.read_text(encoding="utf-8"):
            assert call.request["messages"] == messages
            assert call.response == response
