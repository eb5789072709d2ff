"""The fast paths of reading and replaying (orjson) agree with the strict, slow ones they
stand in front of: the line decoder never accepts what the strict decoder refuses nor reads
a value differently, and `same_json` gives the verdict of the walk it shortcuts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cafe.jsondata import _same_types, fresh_json, same_json
from cafe.recording import MalformedLine, load_recording, reader
from cafe.recording.reader import _decode, _decode_fast, _decode_fast_held
from tests.recording.helpers import header, identical, request

SETTINGS = settings(max_examples=200, deadline=None)

# Keys and strings are drawn from an alphabet rich in what could fool the checks: colons,
# quotes, backslashes, digits, a "u003a" that becomes an escape once a backslash precedes it,
# a "+" that sends a line to the long-integer scan.
_TEXT = st.text(alphabet=st.sampled_from(list(':"\\u003aAb9 -+é\n\t\U0001f600')), max_size=8)
_NUMBER = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**19, -(10**19)]),
    st.floats(allow_nan=False, allow_infinity=False),
)
_LEAF = st.one_of(st.none(), st.booleans(), _NUMBER, _TEXT)


def _text(node: Any, ascii_only: bool, spaced: bool) -> str:
    """JSON text for a tree whose objects are lists of (key, value) pairs, so a key may repeat."""
    comma, colon = (", ", ": ") if spaced else (",", ":")
    if isinstance(node, tuple) and node and node[0] == "object":
        members = (f"{json.dumps(k, ensure_ascii=ascii_only)}{colon}{_text(v, ascii_only, spaced)}"
                   for k, v in node[1])
        return "{" + comma.join(members) + "}"
    if isinstance(node, list):
        return "[" + comma.join(_text(item, ascii_only, spaced) for item in node) + "]"
    return json.dumps(node, ensure_ascii=ascii_only)


_TREE = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(st.just("object"), st.lists(st.tuples(_TEXT, inner), max_size=4)),
    ),
    max_leaves=20,
)


@st.composite
def json_lines(draw) -> bytes:
    """A JSON object line, sometimes with a duplicated key, escapes, long integers, or noise."""
    members = draw(st.lists(st.tuples(_TEXT, _TREE), max_size=5))
    if members and draw(st.booleans()):
        key, _ = draw(st.sampled_from(members))
        members.insert(draw(st.integers(0, len(members))), (key, draw(_TREE)))
    text = _text(("object", members), draw(st.booleans()), draw(st.booleans()))
    if draw(st.integers(0, 4)) == 0:
        position = draw(st.integers(0, len(text)))
        text = text[:position] + draw(st.sampled_from(["NaN", "1e400", ":", "\\", '"', "9" * 20])) + text[position:]
    return text.encode("utf-8", "surrogatepass")


def _strict(raw: bytes) -> Any:
    try:
        return _decode(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return ValueError


@SETTINGS
@given(json_lines())
def test_the_fast_decoder_accepts_only_what_the_strict_one_reads_the_same(raw: bytes) -> None:
    fast = _decode_fast(raw)
    if fast is not None:
        assert identical(fast, _strict(raw))


@pytest.mark.parametrize("raw", [
    b'{"a": 1, "a": 1}',
    b'{"a": {"b": ":"}, "c": 2, "a": 3}',
    b'{"x": "\\u003a", "a": 1, "a": 2}',
    b'{"a\\u003A": 1, "a:": 2, "a:": 3}',
    b'{"n": 123456789012345678901}',
    b'{"n": -9223372036854775809}',
    b'{"n": NaN}',
    b'{"n": 1e400}',
])
def test_what_only_the_strict_decoder_can_judge_is_left_to_it(raw: bytes) -> None:
    assert _decode_fast(raw) is None


# What lets the long-integer scan be skipped: every integer beyond 64 bits that orjson reads
# (as a float, where the strict decoder keeps it exact) is written back with a "+".
_BEYOND_64_BITS = st.one_of(st.integers(2**64, 10**308), st.integers(-(10**308), -(2**63) - 1))


@SETTINGS
@given(_BEYOND_64_BITS)
def test_orjson_writes_back_every_integer_beyond_64_bits_it_reads_with_a_plus(number: int) -> None:
    try:
        read = orjson.loads(str(number))
    except orjson.JSONDecodeError:
        return  # too large for a double: refused, so left to the strict decoder anyway
    assert type(read) is float and b"+" in orjson.dumps(read)


@SETTINGS
@given(st.floats(min_value=2.0**63, allow_infinity=False), st.booleans())
def test_orjson_writes_every_float_from_2_to_the_63_with_a_plus(number: float, negative: bool) -> None:
    assert b"e+" in orjson.dumps(-number if negative else number)


@SETTINGS
@given(place=st.sampled_from(["request", "response", "line", "timing"]), number=_BEYOND_64_BITS,
       plus=st.sampled_from(["", "a+b", 1e20, "\\u002b"]))
def test_a_long_integer_anywhere_in_a_call_line_goes_to_the_strict_decoder(
        place: str, number: int, plus: Any) -> None:
    line: dict[str, Any] = {"call": 1, "request": request(), "response": {"choices": []}, "plus": plus}
    target = {"request": line["request"], "response": line["response"], "line": line,
              "timing": line.setdefault("timing", {})}[place]
    target["n"] = number
    for sort_keys in (True, False):
        raw = json.dumps(line, sort_keys=sort_keys).encode()
        assert _decode_fast_held(raw) is None
        read = _strict(raw)
        read = read if place == "line" else read[place]
        assert read["n"] == number and type(read["n"]) is int  # as the strict decoder reads it


@pytest.mark.parametrize("raw", [
    b'{"n": 1e20, "m": 123456789012345678901}',
    b'{"s": "1+1", "request": {"n": -123456789012345678901}}',
    b'{"response": {"n": 18446744073709551616}, "s": "+"}',
])
def test_a_long_integer_beside_a_plus_is_still_found(raw: bytes) -> None:
    assert _decode_fast(raw) is None


def test_a_line_with_no_plus_is_not_scanned_for_long_integers(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(raw: bytes) -> bool:
        raise AssertionError("scanned")
    monkeypatch.setattr(reader, "_long_integer", refuse)
    raw = json.dumps({"call": 1, "request": request(), "response": {"n": 2**64 - 1, "x": 1e15}},
                     sort_keys=True).encode()
    assert identical(_decode_fast(raw), _strict(raw))
    with pytest.raises(AssertionError, match="scanned"):  # 1e16 is written back as 1e+16
        _decode_fast(raw.replace(b"1000000000000000.0", b"1e16"))


def test_a_file_with_a_duplicated_key_deep_in_a_request_is_still_refused(tmp_path: Path) -> None:
    line = json.dumps({"call": 1, "request": request(), "response": {}}, sort_keys=True)
    line = line.replace('"role": "system"', '"role": "system", "role": "user"', 1)
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(header()) + "\n" + line + "\n")
    with pytest.raises(MalformedLine, match="duplicated key"):
        load_recording(path)


def test_integers_beyond_64_bits_load_exactly(tmp_path: Path) -> None:
    response = {"choices": [{"message": {"role": "assistant", "content": "ok"}}],
                "usage": {"prompt_tokens": 2**70, "completion_tokens": -(2**63) - 1}}
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(header()) + "\n"
                    + json.dumps({"call": 1, "request": request(), "response": response}) + "\n")
    usage = load_recording(path).calls[0].response["usage"]
    assert usage == {"prompt_tokens": 2**70, "completion_tokens": -(2**63) - 1}
    assert type(usage["prompt_tokens"]) is int


def _edits(value: Any, draw: Any) -> Any:
    """A copy of `value` with one leaf perhaps swapped for a look-alike (True for 1, 1.0 for 1...)."""
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value)))
        return {**value, key: _edits(value[key], draw)}
    if isinstance(value, list) and value and draw(st.booleans()):
        position = draw(st.integers(0, len(value) - 1))
        return [*value[:position], _edits(value[position], draw), *value[position + 1:]]
    alike = {True: [1, 1.0, False], False: [0, 0.0, True], None: [False, 0]}
    if isinstance(value, bool | type(None)):
        return draw(st.sampled_from(alike[value]))
    if isinstance(value, int | float):
        return draw(st.sampled_from([float(value), int(value) if float(value).is_integer() else value,
                                     value == 1, value + 1]))
    return draw(st.sampled_from([value, str(value) + ":"]))


_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.0, 1.0, 2.5]), _TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=15,
)


@SETTINGS
@given(_JSON, st.data())
def test_same_json_agrees_with_the_walk_on_random_edits(value: Any, data: st.DataObject) -> None:
    edited = _edits(value, data.draw)
    reordered = json.loads(json.dumps(edited, sort_keys=True))  # the recorded side: keys sorted
    for other in (edited, reordered):
        assert same_json(value, other) == (value == other and _same_types(value, other))


@SETTINGS
@given(_JSON)
def test_fresh_json_is_an_identical_independent_copy(value: Any) -> None:
    original = {"v": [value]}
    copy = fresh_json(original)
    assert identical(copy, original)
    copy["v"].append("added")
    assert original == {"v": [value]}


def test_fresh_json_copies_what_orjson_cannot_encode() -> None:
    original = {"big": 2**70, "lone": "\ud800", "list": [1]}
    copy = fresh_json(original)
    assert copy == original and copy["list"] is not original["list"]


# A line in the writer's canonical form is proved strict by one comparison with orjson's
# encoding of what orjson read; these are the cases that comparison must still send on.
@pytest.mark.parametrize("raw", [
    b'{"a":1,"a":1}',
    b'{"a":{"b":":"},"a":3,"c":2}',
    b'{"a":1,"a":2,"x":"\\u003a"}',
    b'{"n":123456789012345678901}',
    b'{"n":-9223372036854775809}',
    b'{"request":{"messages":[],"messages":[]},"response":{}}',
])
def test_a_canonical_looking_line_with_a_duplicate_or_a_long_integer_is_left_to_the_strict_decoder(
        raw: bytes) -> None:
    assert _decode_fast(raw) is None


def _canonical(value: Any) -> bytes:
    """A line as cafe's writer writes it."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False,
                      separators=(",", ":")).encode()


@SETTINGS
@given(request=st.dictionaries(_TEXT, _JSON, max_size=4), response=st.dictionaries(_TEXT, _JSON, max_size=4),
       number=st.integers(-(2**63), 2**64 - 1), timing=st.one_of(st.none(), st.dictionaries(_TEXT, _JSON)))
def test_a_canonical_call_line_keeps_request_and_response_as_their_own_encodings(
        request: dict[str, Any], response: dict[str, Any], number: int, timing: Any) -> None:
    raw = _canonical({"call": number, "request": request, "response": response, "timing": timing})
    decoded = _decode_fast_held(raw)
    assert decoded is not None
    value, held = decoded
    assert identical(value, _strict(raw))
    # The held bytes are what orjson writes for each member, however the slice was found.
    assert held == {"request": orjson.dumps(value["request"]), "response": orjson.dumps(value["response"])}
    assert identical(orjson.loads(held["request"]), value["request"])


def test_a_canonical_line_is_proved_without_counting_its_colons(monkeypatch: pytest.MonkeyPatch) -> None:
    counted: list[bytes] = []
    real = reader._counted
    monkeypatch.setattr(reader, "_counted", lambda raw, value: counted.append(raw) or real(raw, value))
    line = {"call": 1, "request": request(), "response": {"choices": [{"message": {"content": "a: b"}}]},
            "timing": {"duration_ns": 5, "start_unix_nano": 7}}
    canonical = _canonical(line)
    assert identical(_decode_fast(canonical), _strict(canonical))
    assert counted == []
    spaced = json.dumps(line, sort_keys=True).encode()  # an older cafe's lines, and other writers'
    assert identical(_decode_fast(spaced), _strict(canonical))
    assert counted == [spaced]
