"""A wire recording of a growing conversation holds what each request adds, not the whole
conversation again (format version 5), through the real SDKs of three APIs, and replays
strictly from it; a recording in which no request extends another stays version 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

import cafe.wire as wire
from cafe.privacy import REDACTED
from cafe.recording import load_recording
from cafe.recording.errors import RecordingError, ReplayMismatch
from cafe.recording.format import SHARED_WIRE_VERSION, WIRE_VERSION, Header, RecordedCall, Timing
from cafe.recording.writer import RecordingWriter
from cafe.wire._recorder import what_is_new
from tests.wire.anthropic_server import AnthropicServer
from tests.wire.openai_server import OpenAIServer
from tests.wire.responses_server import ResponsesServer

KEY = "sk-test-wire-0123456789abcdefghij"
TURNS = 12
# A secret in the conversation's first message: scrubbed in the line that holds it, and
# never written again by the lines that extend it.
LEAKED = "sk-proj-" + "Q7w" * 12


def _chat(base_url: str, turns: int, first: str) -> list[dict[str, Any]]:
    client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0)
    messages: list[Any] = [{"role": "system", "content": "You take café orders. " * 20}]
    sent = []
    for turn in range(turns):
        messages.append({"role": "user", "content": first if turn == 0 else f"and a scone, number {turn}"})
        sent.append(json.loads(json.dumps(messages)))
        reply = client.chat.completions.create(model="m", messages=messages, temperature=0)
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})
    return sent


def _responses(base_url: str, turns: int, first: str) -> list[dict[str, Any]]:
    client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0)
    items: list[Any] = []
    sent = []
    for turn in range(turns):
        items.append({"role": "user", "content": first if turn == 0 else f"and a scone, number {turn}"})
        sent.append(json.loads(json.dumps(items)))
        reply = client.responses.create(model="m", input=items, instructions="You take café orders.", store=False)
        items.append({"role": "assistant", "content": reply.output_text})
    return sent


def _anthropic(base_url: str, turns: int, first: str) -> list[dict[str, Any]]:
    client = anthropic.Anthropic(base_url=base_url, api_key="sk-ant-test-0123456789abcdef", max_retries=0)
    messages: list[Any] = []
    sent = []
    for turn in range(turns):
        messages.append({"role": "user", "content": first if turn == 0 else f"and a scone, number {turn}"})
        sent.append(json.loads(json.dumps(messages)))
        reply = client.messages.create(model="m", max_tokens=64, messages=messages, system="You take café orders.")
        messages.append({"role": "assistant", "content": "".join(
            block.text for block in reply.content if block.type == "text")})
    return sent


APIS: dict[str, tuple[Any, Callable[[str, int, str], list[dict[str, Any]]], str]] = {
    "chat": (OpenAIServer, _chat, "messages"),
    "responses": (ResponsesServer, _responses, "input"),
    "anthropic": (AnthropicServer, _anthropic, "messages"),
}


@pytest.mark.parametrize("api", sorted(APIS))
def test_each_line_holds_what_its_request_adds_and_the_conversation_replays(api: str, tmp_path: Path) -> None:
    server_type, converse, array = APIS[api]
    path = tmp_path / f"{api}.jsonl"
    with server_type.running() as server:
        with wire.record(path):
            sent = converse(server.base_url, TURNS, f"A latte, please; my key is {LEAKED}")
        text = path.read_text()
        assert LEAKED not in text and text.count(REDACTED) >= 1
        recording = load_recording(path)
        assert recording.header.version == SHARED_WIRE_VERSION and len(recording.calls) == TURNS
        lines = text.splitlines()[1:]
        for number, (call, line) in enumerate(zip(recording.calls, lines, strict=True), 1):
            held = json.loads(line)
            # Every request is made whole as it was sent (the secret scrubbed).
            whole = json.loads(json.dumps(sent[number - 1]).replace(LEAKED, REDACTED))
            assert call.request[array] == whole
            if number == 1:
                assert "extends" not in held
                continue
            # A later line holds the reply and the new turn, and refers to the line before.
            assert held["extends"]["call"] == number - 1 and held["extends"]["count"] == len(whole) - 2
            assert held["request"][array] == whole[-2:]
        # The line's size is what is new: the last is no longer than the second, give or take
        # the digits of a number, though its request holds six times the turns.
        assert len(lines[-1]) < len(lines[1]) * 1.1
        assert len(json.dumps(recording.calls[-1].request)) > 2 * len(json.dumps(recording.calls[1].request))

        with wire.replay(path) as source:
            assert converse(server.base_url, TURNS, f"A latte, please; my key is {LEAKED}") == sent
        assert source.served == TURNS
        served_live = server.count
        # An earlier turn changed: the first call that sends it fails, naming where.
        with pytest.raises(ReplayMismatch) as mismatch, wire.replay(path):
            converse(server.base_url, TURNS, "A flat white, please")
        first_user = 1 if api == "chat" else 0  # after the chat's system message
        assert f"{array}[{first_user}]" in str(mismatch.value) and LEAKED not in str(mismatch.value)
        assert server.count == served_live


def test_calls_of_unrelated_conversations_stay_version_2(tmp_path: Path) -> None:
    path = tmp_path / "unrelated.jsonl"
    with OpenAIServer.running() as server, wire.record(path):
        for order in ("a latte", "a scone", "a latte"):
            _chat(server.base_url, 1, order)
    recording = load_recording(path)
    assert recording.header.version == WIRE_VERSION
    assert all("extends" not in json.loads(line) for line in path.read_text().splitlines()[1:])


def test_a_kept_item_is_compared_as_json_and_a_dropped_member_is_held_whole() -> None:
    previous = {"model": "m", "messages": [{"role": "user", "content": "hi", "n": 1}], "tools": [1]}
    grown = {**previous, "messages": [*previous["messages"], {"role": "assistant", "content": "hello"}]}
    assert what_is_new(previous, grown) == ({"messages": [{"role": "assistant", "content": "hello"}]},
                                            ("messages", 1))
    changed_model = {**grown, "model": "other"}
    assert what_is_new(previous, changed_model) == (
        {"model": "other", "messages": [{"role": "assistant", "content": "hello"}]}, ("messages", 1))
    # `true` is not `1` in JSON, though it is in Python.
    assert what_is_new(previous, {**grown, "messages": [{"role": "user", "content": "hi", "n": True}]}) is None
    assert what_is_new(previous, {key: value for key, value in grown.items() if key != "tools"}) is None
    assert what_is_new(previous, {"model": "m", "messages": []}) is None
    assert what_is_new(previous, {"model": "m", "input": "hi"}) is None


def _call(messages: list[Any]) -> dict[str, Any]:
    return {"model": "m", "messages": messages}


EXCHANGE: dict[str, Any] = {
    "method": "POST", "target": "/v1/chat/completions", "request_headers": {}, "request_body": None,
    "status": 200, "response_headers": {}, "body": None, "stream": None, "outcome": "completed", "failure": None}


def test_a_reference_written_out_of_start_order_is_put_in_order_on_commit(tmp_path: Path) -> None:
    path = tmp_path / "ordered.jsonl"
    writer = RecordingWriter(path, Header(version=WIRE_VERSION), share=True)
    answer = {"id": "c", "choices": [{"message": {"role": "assistant", "content": "ok"}}]}
    timing = Timing(0, 1)
    first = [{"role": "user", "content": "one"}]
    writer.write_call(_call(first), answer, timing, exchange=EXCHANGE, number=1)
    # Call 3 ends before call 2: the file is version 6 until commit.
    assert writer.extendable(3, "messages") == 1
    writer.write_call({"messages": [{"role": "user", "content": "three"}]}, answer, timing, exchange=EXCHANGE,
                      number=3, extends=("messages", 1))
    assert json.loads(writer.partial.read_text().splitlines()[0])["version"] == 6
    writer.write_call(_call([{"role": "user", "content": "two"}]), answer, timing, exchange=EXCHANGE, number=2)
    writer.commit()
    recording = load_recording(path)
    assert recording.header.version == SHARED_WIRE_VERSION
    calls: list[RecordedCall] = list(recording.calls)
    assert [call.index for call in calls] == [1, 2, 3]
    assert calls[2].request == _call([*first, {"role": "user", "content": "three"}])


def test_a_writer_that_holds_requests_whole_refuses_a_reference(tmp_path: Path) -> None:
    writer = RecordingWriter(tmp_path / "whole.jsonl", Header(version=WIRE_VERSION))
    answer = {"id": "c", "choices": [{"message": {"role": "assistant", "content": "ok"}}]}
    writer.write_call(_call([]), answer, Timing(0, 1), number=1)
    with pytest.raises(RecordingError, match="holds every request whole"):
        writer.write_call({"messages": []}, answer, Timing(0, 1), number=2, extends=("messages", 0))
    writer.abort()
