"""Requests a caller of the public API can hand a replay or a recorder that are not a
conversation of JSON values: each is a named error that says where, never a bare
TypeError, AttributeError or RecursionError (which the command line turns into exit 70)."""

from __future__ import annotations

import decimal
import enum
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cafe.counter import RecordingClient, ReplayClient
from cafe.counter.clients.scripted import ScriptedClient
from cafe.errors import CafeError, ConversationError, NotJSON
from cafe.recording import Scrubber, load_recording
from tests.recording.helpers import CUSTOMER_TEXT, call, header, response


class Colour(enum.Enum):
    RED = 1


def _recorded(tmp_path: Path) -> ReplayClient:
    path = tmp_path / "r.jsonl"
    path.write_bytes((json.dumps(header()) + "\n" + json.dumps(call(1)) + "\n").encode())
    return ReplayClient(load_recording(path), scrubber=Scrubber())


@pytest.fixture(scope="module")
def replay_one(tmp_path_factory: pytest.TempPathFactory) -> ReplayClient:
    """One replay for every hypothesis example (each request is refused before it is served)."""
    return _recorded(tmp_path_factory.mktemp("one"))


def _messages(content: Any) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You are a barista."}, {"role": "user", "content": content}]


def _cycle() -> dict[str, Any]:
    looped: dict[str, Any] = {"role": "user"}
    looped["content"] = looped
    return looped


def _deep() -> list[Any]:
    nested: list[Any] = []
    for _ in range(5000):
        nested = [nested]
    return nested


NOT_JSON = {
    "uuid": uuid.UUID(int=7), "set": {1, 2}, "bytes": b"abc", "enum": Colour.RED,
    "decimal": decimal.Decimal("0.5"), "huge integer": 10**5000, "object": object(),
}


@pytest.mark.parametrize("value", NOT_JSON.values(), ids=NOT_JSON.keys())
@pytest.mark.parametrize("client", ["replay", "record"])
def test_a_value_json_cannot_write_is_named_with_its_path(tmp_path: Path, value: Any, client: str) -> None:
    chat = _recorded(tmp_path) if client == "replay" else RecordingClient(ScriptedClient(), tmp_path / "new.jsonl")
    with pytest.raises(NotJSON) as raised:
        chat.chat(_messages(value))
    assert str(raised.value).startswith("request.messages[1].content: expected plain JSON")
    assert raised.value.exit_code == 22 and raised.value.where == "request.messages[1].content"
    assert not (tmp_path / "new.jsonl").exists()


@pytest.fixture
def default_recursion_limit() -> Any:
    # Nesting is "too deep" for json.dumps relative to the interpreter's recursion limit,
    # which another library in the session may have raised.
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(before)


@pytest.mark.parametrize("client", ["replay", "record"])
@pytest.mark.usefixtures("default_recursion_limit")
def test_a_decimal_temperature_a_tuple_key_a_cycle_and_deep_nesting_are_named(tmp_path: Path, client: str) -> None:
    def make() -> Any:
        if client == "replay":
            return _recorded(tmp_path)
        return RecordingClient(ScriptedClient(), tmp_path / f"{len(list(tmp_path.iterdir()))}.jsonl")

    cases = [
        ((_messages("hi"), None, decimal.Decimal(0)), "request.temperature", "of type Decimal"),
        (([{"role": "user", (1, 2): "x"}],), "request.messages[0]", "a key of type tuple"),
        (([_cycle()],), "request.messages[0].content", "contains itself"),
        ((_messages(_deep()),), "request.messages[1].content[0]", "nesting deeper than"),
    ]
    for arguments, where, found in cases:
        with pytest.raises(NotJSON) as raised:
            make().chat(*arguments)
        assert str(raised.value).startswith(where) and found in str(raised.value)
        assert len(str(raised.value)) < 400


def test_a_path_names_an_odd_key_only_by_its_size(tmp_path: Path) -> None:
    with pytest.raises(NotJSON) as raised:
        _recorded(tmp_path).chat([{"role": "user", "\x1b[2J" + CUSTOMER_TEXT: uuid.UUID(int=1)}])
    assert CUSTOMER_TEXT not in str(raised.value) and "\x1b" not in str(raised.value)
    assert f"a key of {len(CUSTOMER_TEXT) + 4} characters" in str(raised.value)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.from_regex(r"[a-z]{1,4}", fullmatch=True),
                                                                 inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None)
@given(_json, st.sampled_from(list(NOT_JSON.values())), st.data())
def test_the_first_unwritable_value_is_found_anywhere_in_a_document(
    replay_one: ReplayClient, document: Any, odd: Any, data: Any
) -> None:
    # Put `odd` at a random place in the content; the error must name exactly that place.
    wrapper: dict[str, Any] = {"content": document}
    holder: Any = wrapper
    key: Any = "content"
    path = "request.messages[1].content"
    while isinstance(holder[key], dict | list) and holder[key] and data.draw(st.booleans()):
        holder = holder[key]
        key = data.draw(st.sampled_from(sorted(holder) if isinstance(holder, dict) else range(len(holder))))
        path += f".{key}" if isinstance(holder, dict) else f"[{key}]"
    holder[key] = odd
    with pytest.raises(NotJSON) as raised:
        replay_one.chat(_messages(wrapper["content"]))
    assert raised.value.where == path and replay_one.calls == 0


BAD_CONVERSATIONS = {
    "None": (None, "messages: expected a list of message objects, found a NoneType"),
    "a string": ("hello", "messages: expected a list of message objects, found a str"),
    "a generator": ((m for m in [{"role": "user", "content": "x"}]), "found a (value of type )?generator"),
    "a string message": (["hello"], "messages[0]: expected a message object, found a str"),
    "tool_calls a string": ([{"role": "assistant", "tool_calls": "abc"}],
                            "messages[0].tool_calls: expected a list, found a str"),
    "a tool call a string": ([{"role": "assistant", "tool_calls": ["abc"]}],
                             "messages[0].tool_calls[0]: expected an object with a string id"),
    "a list id": ([{"role": "assistant", "tool_calls": [{"id": ["x"]}]}],
                  "messages[0].tool_calls[0]: expected an object with a string id"),
}


@pytest.mark.parametrize(("messages", "message"), BAD_CONVERSATIONS.values(), ids=BAD_CONVERSATIONS.keys())
@pytest.mark.parametrize("client", ["replay", "record", "scripted"])
def test_a_conversation_that_is_not_a_list_of_messages_is_refused_by_name(
    tmp_path: Path, messages: Any, message: str, client: str
) -> None:
    chat: Any = {"replay": lambda: _recorded(tmp_path), "scripted": ScriptedClient,
                 "record": lambda: RecordingClient(ScriptedClient(), tmp_path / "new.jsonl")}[client]()
    with pytest.raises(ConversationError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(v", "(?:v")):
        chat.chat(messages)


def test_a_tuple_of_messages_is_still_a_conversation(tmp_path: Path) -> None:
    assert _recorded(tmp_path).chat(tuple(_messages(CUSTOMER_TEXT))) == response()  # type: ignore[arg-type]


def test_every_refusal_here_is_a_cafe_error() -> None:
    assert issubclass(NotJSON, ConversationError) and issubclass(ConversationError, CafeError)
