"""A loaded recording holds each call's request and response as orjson's bytes, decoded when
something reads them; the replay compares an incoming request with those bytes and falls back
to the document comparison whenever the bytes alone cannot decide. These tests check that the
bytes decode to exactly what the strict reader reads, and that every verdict and every served
response is the one the document comparison gives."""

from __future__ import annotations

import dataclasses
import enum
import gc
import json
import math
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cafe.counter import ReplayClient
from cafe.errors import NotJSON
from cafe.jsondata import plain_json
from cafe.recording import RecordedCall, ReplayMismatch, Scrubber, Timing, load_recording
from cafe.recording.format import encoded
from cafe.recording.reader import _decode_fast_held
from tests.recording.helpers import dump, header, identical, response

SETTINGS = settings(max_examples=150, deadline=None)
# Each example rewrites the same file under the test's tmp_path.
FILE_SETTINGS = settings(max_examples=150, deadline=None,
                         suppress_health_check=[HealthCheck.function_scoped_fixture])

_TEXT = st.text(alphabet=st.sampled_from(list(':"\\Ab9 -é\n\U0001f600')), max_size=6)
_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**64), 2**64),
    st.sampled_from([0.0, -0.0, 1.0, 2.5, 1e300, 5e-324]), _TEXT,
)
_JSON = st.recursive(
    _LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_TEXT, inner, max_size=3)),
    max_leaves=12,
)
_MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant"]), "content": st.one_of(st.none(), _TEXT)},
    optional={"extra": _JSON},
)
_REQUEST = st.fixed_dictionaries({
    "messages": st.lists(_MESSAGE, min_size=1, max_size=3),
    "tools": st.one_of(st.none(), st.lists(_JSON, max_size=2)),
    "temperature": st.sampled_from([0, 0.0, 0.7, 1]),
    "tool_choice": st.one_of(st.none(), _JSON),
})


class Colour(enum.Enum):
    RED = "red"


class Word(enum.StrEnum):
    RED = "red"


def _write(path: Path, requests: list[dict[str, Any]], responses: list[dict[str, Any]],
           sort_keys: bool) -> Path:
    lines = [json.dumps(header(), ensure_ascii=False)]
    for number, (request, reply) in enumerate(zip(requests, responses, strict=True), start=1):
        line = {"call": number, "request": request, "response": reply}
        lines.append(json.dumps(line, ensure_ascii=False, sort_keys=sort_keys))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _look_alike(value: Any, draw: Any) -> Any:
    """`value`, or a value Python or orjson may take for it: 1.0 for 1, True for 1, NaN or an
    infinity for None (orjson writes both as null), an enum member for its string, a tuple for
    a list, -0.0 for 0.0, a changed string."""
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(list(value)))
        return {**value, key: _look_alike(value[key], draw)}
    if isinstance(value, list) and value and draw(st.booleans()):
        position = draw(st.integers(0, len(value) - 1))
        return [*value[:position], _look_alike(value[position], draw), *value[position + 1:]]
    if isinstance(value, list):
        return draw(st.sampled_from([value, tuple(value)]))
    if value is None:
        return draw(st.sampled_from([None, math.nan, math.inf, -math.inf, False, 0]))
    if isinstance(value, bool):
        return draw(st.sampled_from([value, int(value), float(value), not value]))
    if isinstance(value, int | float):
        return draw(st.sampled_from([value, float(value), -value, value + 1]
                                    + ([int(value)] if float(value).is_integer() and abs(value) < 2**64 else [])))
    if isinstance(value, str):
        return draw(st.sampled_from([value, value + ":", Word.RED if value == "red" else value,
                                     Colour.RED if value == "red" else value]))
    return value


def _outcome(client: ReplayClient, request: dict[str, Any]) -> tuple[Any, ...]:
    try:
        served = client.chat(request["messages"], request["tools"], request["temperature"],
                             request["tool_choice"])
    except ReplayMismatch as mismatch:
        return ("mismatch", str(mismatch), mismatch.call, mismatch.json_path)
    except Exception as error:  # the slow path's own failures (json.dumps of an enum member)
        return ("raised", type(error))
    return ("served", served)


def _same_outcome(fast: tuple[Any, ...], slow: tuple[Any, ...]) -> bool:
    if fast[0] == "served" and slow[0] == "served":
        return identical(fast[1], slow[1])
    return fast == slow


def _eager(path: Path) -> Any:
    """The recording with every call decoded, so its replay takes the document comparison."""
    recording = load_recording(path)
    for call in recording.calls:
        assert call.request is not None and call.response is not None
        assert encoded(call, "request") is None
    return recording


@FILE_SETTINGS
@given(request=_REQUEST, extra=_JSON, sort_keys=st.booleans())
def test_a_lazily_decoded_call_is_what_the_strict_reader_reads(
        tmp_path: Path, request: dict[str, Any], extra: Any, sort_keys: bool) -> None:
    reply = {**response(), "extra": extra}
    path = _write(tmp_path / "r.jsonl", [request], [reply], sort_keys)
    line = json.loads(path.read_text(encoding="utf-8").splitlines()[1])
    call = load_recording(path).calls[0]
    assert identical(call.request, line["request"])
    assert identical(call.response, line["response"])
    # Decoded once and kept: every read is the same dict, as with a plain field.
    assert call.request is call.request and encoded(call, "request") is None


@FILE_SETTINGS
@given(request=_REQUEST, data=st.data())
def test_the_bytes_comparison_gives_the_document_comparisons_verdict(
        tmp_path: Path, request: dict[str, Any], data: st.DataObject) -> None:
    incoming = _look_alike(request, data.draw)
    path = _write(tmp_path / "r.jsonl", [request], [response()], data.draw(st.booleans()))
    fast = _outcome(ReplayClient(load_recording(path), scrubber=Scrubber()), incoming)
    slow = _outcome(ReplayClient(_eager(path), scrubber=Scrubber()), incoming)
    assert _same_outcome(fast, slow), (fast, slow)


def _recording_of(tmp_path: Path, request: dict[str, Any]) -> Path:
    return _write(tmp_path / "r.jsonl", [request], [response()], sort_keys=True)


_RECORDED = {"messages": [{"role": "user", "content": "red"}], "tools": None, "temperature": 0.0,
             "tool_choice": None}


def test_the_same_request_is_served_from_the_bytes_without_decoding_them(tmp_path: Path) -> None:
    recording = load_recording(_recording_of(tmp_path, _RECORDED))
    client = ReplayClient(recording, scrubber=Scrubber())
    served = client.chat([{"role": "user", "content": "red"}], None, 0.0, None)
    assert served == response()
    assert encoded(recording.calls[0], "request") is not None  # never decoded


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_nan_or_infinity_where_null_was_recorded_is_a_mismatch(tmp_path: Path, value: float) -> None:
    # orjson writes NaN and the infinities as null, the bytes of the recorded tool_choice.
    client = ReplayClient(load_recording(_recording_of(tmp_path, _RECORDED)), scrubber=Scrubber())
    with pytest.raises(ReplayMismatch) as raised:
        client.chat([{"role": "user", "content": "red"}], None, 0.0, value)
    assert raised.value.json_path == "$.tool_choice"


def test_an_enum_member_is_not_taken_for_its_value(tmp_path: Path) -> None:
    # orjson writes Colour.RED as "red"; JSON cannot write it at all: a named error, not served.
    client = ReplayClient(load_recording(_recording_of(tmp_path, _RECORDED)), scrubber=Scrubber())
    with pytest.raises(NotJSON, match=r"request\.messages\[0\]\.content: .* found a value of type Colour"):
        client.chat([{"role": "user", "content": Colour.RED}], None, 0.0, None)
    assert client.calls == 0


def test_a_str_enum_and_an_integer_temperature_are_still_served(tmp_path: Path) -> None:
    client = ReplayClient(load_recording(_recording_of(tmp_path, _RECORDED)), scrubber=Scrubber())
    assert client.chat([{"role": "user", "content": Word.RED}], None, 0, None) == response()


@pytest.mark.parametrize("odd", [math.nan, math.inf, Colour.RED, Word.RED, uuid.UUID(int=1),
                                 orjson.Fragment(b"1"), (1,), 7.5,
                                 type("S", (str,), {})("x"), type("D", (dict,), {})()])
def test_plain_json_refuses_what_orjson_writes_as_something_else(odd: Any) -> None:
    deep = {"a": [{"b": [1, "two", None, 3.5, odd]}]}
    expected = isinstance(odd, float) and math.isfinite(odd)  # 7.5 is plain
    assert plain_json(deep) is expected
    assert plain_json({"a": [{"b": [1, "two", None, 3.5, {"c": -0.0}]}]})


def test_plain_json_ends_on_a_cycle_or_a_document_deeper_than_orjson_writes() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    deep: list[Any] = []
    for _ in range(300):
        deep = [deep]
    assert not plain_json(cycle) and not plain_json(deep)
    for _ in range(200):
        deep = deep[0]
    assert plain_json(deep)


@SETTINGS
@given(_JSON, st.data())
def test_plain_json_finds_an_odd_value_anywhere(value: Any, data: st.DataObject) -> None:
    assert plain_json(value)
    odd = data.draw(st.sampled_from([math.nan, -math.inf, Colour.RED, uuid.UUID(int=3), (0,)]))

    def plant(node: Any) -> Any:
        if isinstance(node, dict) and node and data.draw(st.booleans()):
            key = data.draw(st.sampled_from(list(node)))
            return {**node, key: plant(node[key])}
        if isinstance(node, list) and node and data.draw(st.booleans()):
            return [plant(node[0]), *node[1:]]
        return [node, odd] if isinstance(node, list) else {"odd": odd, "was": node}

    assert not plain_json(plant(value))


def test_a_value_orjson_cannot_write_is_kept_as_read(tmp_path: Path) -> None:
    reply = {**response(), "usage": {"prompt_tokens": 2**70}, "note": "\ud800"}
    path = tmp_path / "r.jsonl"
    path.write_bytes(dump(header()) + json.dumps({"call": 1, "request": _RECORDED, "response": reply}).encode())
    call = load_recording(path).calls[0]
    assert encoded(call, "response") is None and encoded(call, "request") is not None
    assert call.response["usage"]["prompt_tokens"] == 2**70
    client = ReplayClient(load_recording(path), scrubber=Scrubber())
    served = client.chat([{"role": "user", "content": "red"}], None, 0.0, None)
    assert served["note"] == "\ud800" and served["usage"]["prompt_tokens"] == 2**70


def test_every_served_response_is_a_fresh_copy(tmp_path: Path) -> None:
    recording = load_recording(_write(tmp_path / "r.jsonl", [_RECORDED] * 2, [response()] * 2, True))
    first = ReplayClient(recording, scrubber=Scrubber()).chat([{"role": "user", "content": "red"}], None, 0.0)
    first["choices"].clear()
    again = ReplayClient(recording, scrubber=Scrubber()).chat([{"role": "user", "content": "red"}], None, 0.0)
    assert again == response()


def test_a_request_changed_after_it_was_read_is_matched_as_changed(tmp_path: Path) -> None:
    recording = load_recording(_recording_of(tmp_path, _RECORDED))
    recording.calls[0].request["temperature"] = 0.5  # the dict, once read, is the value
    client = ReplayClient(recording, scrubber=Scrubber())
    with pytest.raises(ReplayMismatch, match="temperature"):
        client.chat([{"role": "user", "content": "red"}], None, 0.0, None)


def test_a_file_with_its_keys_unsorted_still_replays(tmp_path: Path) -> None:
    unsorted = {"tool_choice": None, "temperature": 0.0, "tools": None,
                "messages": [{"content": "red", "role": "user"}]}
    path = _write(tmp_path / "r.jsonl", [unsorted], [response()], sort_keys=False)
    assert list(load_recording(path).calls[0].request) == list(unsorted)
    client = ReplayClient(load_recording(path), scrubber=Scrubber())
    assert client.chat([{"role": "user", "content": "red"}], None, 0.0, None) == response()


def test_the_encoded_pieces_are_those_of_the_decoded_line() -> None:
    line = dump({"call": 1, "request": _RECORDED, "response": response(), "k:ey": {"a:": 1}}).strip()
    decoded = _decode_fast_held(line)
    assert decoded is not None
    value, held = decoded
    assert orjson.loads(held["request"]) == value["request"] == _RECORDED
    assert orjson.loads(held["response"]) == value["response"]
    # A key repeated with a colon in its name still tips the count over.
    assert _decode_fast_held(line[:-1] + b', "k:ey": 2}') is None


def test_the_readers_constructor_makes_what_the_dataclass_makes() -> None:
    args = (3, 4, {"messages": []}, response(), Timing(1, 2), "m", "h")
    made, loaded = RecordedCall(*args), RecordedCall.loaded(*args)
    assert loaded == made and repr(loaded) == repr(made) and dataclasses.asdict(loaded) == dataclasses.asdict(made)
    assert loaded.model == made.model == "m" and loaded.header_model == "h"
    with pytest.raises(dataclasses.FrozenInstanceError):
        loaded.index = 5  # type: ignore[misc]


def test_a_recorded_call_built_by_hand_is_unchanged() -> None:
    call = RecordedCall(1, 2, {"messages": []}, response())
    assert call.request == {"messages": []} and encoded(call, "request") is None
    held = RecordedCall(1, 2, orjson.dumps({"messages": []}), orjson.dumps(response()))
    assert encoded(held, "request") == b'{"messages":[]}'
    assert held == call and repr(held) == repr(call)
    with pytest.raises(AttributeError):
        held.request = {}  # type: ignore[misc]


def test_a_loaded_recording_leaves_few_objects_for_the_collector(tmp_path: Path) -> None:
    requests = [{**_RECORDED, "messages": [{"role": "user", "content": f"red {n}"}] * 5} for n in range(300)]
    path = _write(tmp_path / "r.jsonl", requests, [response()] * 300, sort_keys=True)
    gc.collect()
    before = len(gc.get_objects())
    recording = load_recording(path)
    after = len(gc.get_objects())
    # Decoded, each call left 6 tracked dicts and lists here (a dict of strings only is not
    # tracked); held as bytes, the call and its attributes' dict (it has no timing).
    assert (after - before) / len(recording.calls) < 2.5
