"""The writer serialises a line in C (orjson) only where that writes the very bytes of
`json.dumps(ensure_ascii=False, sort_keys=True, separators=(",", ":"))`, and falls back to it
everywhere else: so every line is what the writer always wrote, the reader reads it back to
the same value, and a line the reader proved canonical by one comparison still is."""

from __future__ import annotations

import enum
import json
import math
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cafe.jsondata import same_json
from cafe.privacy import Scrubber
from cafe.recording import RecordingError, RecordingWriter, load_recording
from cafe.recording.format import Header, Timing
from cafe.recording.reader import _decode_fast_held
from cafe.recording.writer import _orjson_line
from tests.recording.helpers import request, response

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def json_dumps_line(value: Any) -> bytes:
    """The bytes the writer writes for a line, by its definition."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False,
                      separators=(",", ":")).encode("utf-8")


# Keys and strings from an alphabet that sorts differently by code unit and by code point
# (an astral character against one from the private use area), with every character JSON
# escapes, DEL, the line separators, a lone surrogate now and then.
_CHARACTERS = st.one_of(
    st.sampled_from(list('"\\/\x00\x1f\x7f\b\f\n\r\t\u2028\u2029\ue000\uffff\U0001f600\U00010000é aZ')),
    st.characters(),
)
_TEXT = st.text(alphabet=_CHARACTERS, max_size=6)
_FLOAT_EDGES = [0.0, -0.0, 1e-4, 9.999999999999999e-05, 1e-05, 1e16, 9999999999999998.0, 1e22, 5e-324,
                1.7976931348623157e308, 0.1, 1 / 3, 123456.789, -1e-7]
_NUMBER = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(_FLOAT_EDGES),
)
_LEAF = st.one_of(st.none(), st.booleans(), _NUMBER, _TEXT)
_JSON = st.recursive(_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                    st.dictionaries(_TEXT, inner, max_size=4)), max_leaves=24)


def _encodable(value: Any) -> bool:
    try:
        json_dumps_line(value)
    except (UnicodeEncodeError, ValueError):
        return False
    return True


@SETTINGS
@given(st.dictionaries(_TEXT, _JSON, max_size=6))
def test_a_line_orjson_writes_is_the_json_dumps_line(line: dict[str, Any]) -> None:
    fast = _orjson_line(line)
    if fast is not None:
        assert fast == json_dumps_line(line)


@pytest.mark.parametrize("number", [*_FLOAT_EDGES, 7, -(2**63), 2**64 - 1])
def test_numbers_take_the_fast_path_where_repr_writes_no_exponent(number: float) -> None:
    line = {"call": 1, "request": {"temperature": number, "messages": [{"content": "latte"}]}}
    fast = _orjson_line(line)
    if fast is not None:
        assert fast == json_dumps_line(line)
    assert (fast is not None) is ("e" not in repr(number))


class _Size(enum.Enum):
    SMALL = "small"


class _Text(str):
    pass


@pytest.mark.parametrize("odd", [
    float("nan"), float("inf"), -float("inf"), 2**64, -(2**63) - 1, "\ud800", _Size.SMALL, uuid.UUID(int=7),
    _Text("latte"), (1, 2), {1: "a"}, orjson.Fragment(b"1"),
])
def test_what_orjson_would_write_otherwise_falls_back_to_json_dumps(odd: Any) -> None:
    assert _orjson_line({"request": {"value": odd}}) is None
    assert _orjson_line({"request": {"nested": [[{"value": odd}]]}}) is None


def test_a_common_wire_line_takes_the_fast_path() -> None:
    line = {"call": 3, "request": {"model": "gpt-4o-mini", "temperature": 0.7, "messages": [
        {"role": "user", "content": "Un café crème, s'il vous plaît \U0001f600\n"}]},
        "response": {"usage": {"prompt_tokens": 12}, "choices": [{"index": 0, "logprobs": -0.25}]},
        "timing": {"start_unix_nano": 1_764_000_000_000_000_000, "duration_ns": 3}}
    assert _orjson_line(line) == json_dumps_line(line)


@SETTINGS
@given(extras=st.lists(_JSON, min_size=1, max_size=4), texts=st.lists(_TEXT, min_size=1, max_size=4))
def test_every_line_written_is_the_json_dumps_line_and_reads_back_the_same(
        tmp_path_factory: pytest.TempPathFactory, extras: list[Any], texts: list[str]) -> None:
    requests = [{**request(text), "extra": extra} for text, extra in zip(texts, extras, strict=False)]
    requests = [each for each in requests if _encodable(each)]
    path = tmp_path_factory.mktemp("w") / "r.jsonl"
    writer = RecordingWriter(path, Header(version=1), scrubber=Scrubber(patterns=()))
    for number, each in enumerate(requests, start=1):
        writer.write_call(each, response(), Timing(number, 1))
    writer.commit()
    raw_lines = path.read_bytes().splitlines()
    assert len(raw_lines) == len(requests) + 1
    for number, (raw, each) in enumerate(zip(raw_lines[1:], requests, strict=True), start=1):
        expected = {"call": number, "request": each, "response": response(),
                    "timing": {"start_unix_nano": number, "duration_ns": 1}}
        assert raw == json_dumps_line(expected)
        fast = _decode_fast_held(raw)
        # Proved canonical by the reader's one comparison exactly when orjson writes it back alike.
        assert (fast is not None and orjson.dumps(fast[0]) == raw) is _written_back_alike(raw)
        if _orjson_line(expected) is not None:
            assert _written_back_alike(raw)
    recording = load_recording(path)
    for call, each in zip(recording.calls, requests, strict=True):
        assert call.request == each
        assert same_json(call.request, each)


def _written_back_alike(raw: bytes) -> bool:
    try:
        return orjson.dumps(orjson.loads(raw)) == raw
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return False


def test_nan_is_still_refused_with_its_named_error(tmp_path: Path) -> None:
    writer = RecordingWriter(tmp_path / "r.jsonl", Header(version=1))
    with pytest.raises(RecordingError, match="NaN or an infinite number"):
        writer.write_call({"temperature": math.nan}, {}, None)
    assert writer.calls == 0
    writer.abort()


def test_integers_beyond_64_bits_and_lone_surrogates_are_written_as_before(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    writer = RecordingWriter(path, Header(version=1))
    odd = {**request(), "seed": 2**80, "note": "\ud83d"}
    writer.write_call(odd, response(), None)
    writer.commit()
    line = path.read_bytes().splitlines()[1]
    assert line == json.dumps({"call": 1, "request": odd, "response": response()},
                              ensure_ascii=True, sort_keys=True, separators=(",", ":")).encode()
    assert load_recording(path).calls[0].request == odd
