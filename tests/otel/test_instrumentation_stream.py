"""A streamed answer heard on the wire: the span reads the head, the finish reasons and the
usage from whichever events carry them, however the server splits and spells its events,
and with content off it decodes only those events (the rest are timed, not parsed)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from cafe_otel import semconv as sc
from cafe_otel._wire import observer as wire_observer
from tests.otel.test_instrumentation import Pipeline
from tests.wire.libraries import SDK_HTTP as http

URL = "http://127.0.0.1:9/v1/chat/completions"  # never dialled: the mock transport answers
WORDS = 40


def _event(document: dict[str, Any], *, line_end: bytes = b"\n") -> bytes:
    return b"data: " + json.dumps(document).encode() + line_end + line_end


def _chunk(choices: list[dict[str, Any]], **head: Any) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", **head, "choices": choices}


def _delta(index: int, text: str, finish: str | None = None) -> dict[str, Any]:
    return {"index": index, "delta": {"content": text}, "finish_reason": finish}


def _stream(pieces: list[bytes], *, content: str = "NO_CONTENT") -> tuple[dict[str, Any], Any]:
    """The span's attributes and the metric exporter after `pieces` were read through the wire."""

    def answer(request: Any) -> Any:
        return http.Response(200, content=iter(pieces), headers={"content-type": "text/event-stream"})

    body = {"model": "gpt-test", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with Pipeline(capture_content=content) as pipeline, http.Client(transport=http.MockTransport(answer)) as client:
        with client.stream("POST", URL, json=body) as response:
            for _ in response.iter_raw():
                pass
        (span,) = pipeline.finished()
        pipeline.handle.force_flush(2.0)
        return dict(span.attributes or {}), pipeline.metrics


def _words(count: int, *, line_end: bytes = b"\n") -> list[bytes]:
    return [_event(_chunk([_delta(0, f"w{n} ")], id="chatcmpl-1", model="gpt-test-1"), line_end=line_end)
            for n in range(count)]


class _CountingLoads:
    """orjson with its `loads` counted: how many events the observer decoded."""

    JSONDecodeError = orjson.JSONDecodeError

    def __init__(self) -> None:
        self.calls = 0

    def loads(self, data: bytes) -> Any:
        self.calls += 1
        return orjson.loads(data)


@pytest.mark.parametrize("content", ["NO_CONTENT", "SPAN_ONLY"])
def test_head_finish_and_usage_come_from_whichever_events_carry_them(content: str) -> None:
    # The first event names no model and no fingerprint (a filter chunk); a later one does.
    # Two choices finish in different events; the usage comes last, after `usage: null`s.
    pieces = [
        _event(_chunk([], id="chatcmpl-7", usage=None)),
        _event(_chunk([_delta(1, "b")], id="chatcmpl-7", model="gpt-test-2", system_fingerprint="fp_9", usage=None)),
        *_words(5),
        _event(_chunk([_delta(1, "", "length")], usage=None)),
        _event(_chunk([_delta(0, "", "stop")], usage=None)),
        _event(_chunk([], usage={"prompt_tokens": 11, "completion_tokens": 7,
                                 "completion_tokens_details": {"reasoning_tokens": 3}})),
        b"data: [DONE]\n\n",
    ]
    attributes, _ = _stream(pieces, content=content)
    assert attributes[sc.GEN_AI_RESPONSE_ID] == "chatcmpl-7"
    assert attributes[sc.GEN_AI_RESPONSE_MODEL] == "gpt-test-2"
    assert attributes[sc.OPENAI_RESPONSE_SYSTEM_FINGERPRINT] == "fp_9"
    assert attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop", "length")
    assert (attributes[sc.GEN_AI_USAGE_INPUT_TOKENS], attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (11, 7)
    assert attributes[sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] == 3


@pytest.mark.parametrize("line_end", [b"\n", b"\r\n", b"\r"])
def test_events_split_joined_and_spelled_any_way_are_each_heard(line_end: bytes) -> None:
    finish = b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason" :  "stop"}],' + line_end
    finish += b'data: "usage": {"prompt_tokens": 4, "completion_tokens": 2}}' + line_end + line_end
    words = _words(6, line_end=line_end)
    stream = b"".join([*words, finish, b"data: [DONE]" + line_end + line_end])
    # Pieces of 7 bytes: events split across pieces, and several ended in one piece.
    pieces = [stream[start:start + 7] for start in range(0, len(stream), 7)]
    attributes, metrics = _stream(pieces)
    assert attributes[sc.GEN_AI_RESPONSE_ID] == "chatcmpl-1"
    assert attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert (attributes[sc.GEN_AI_USAGE_INPUT_TOKENS], attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (4, 2)
    (per_chunk,) = metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK)
    assert per_chunk.count == len(words)  # 7 events with data before [DONE]: 6 gaps


def test_with_content_off_only_the_events_the_span_needs_are_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    counting = _CountingLoads()
    monkeypatch.setattr(wire_observer, "orjson", counting)
    pieces = [*_words(WORDS), _event(_chunk([_delta(0, "", "stop")], usage=None)),
              _event(_chunk([], usage={"prompt_tokens": 3, "completion_tokens": WORDS})), b"data: [DONE]\n\n"]
    attributes, _ = _stream(pieces)
    assert attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == WORDS
    # The request's body, the first event (the head), the finish and the usage: never the words.
    assert counting.calls <= 4, counting.calls


def test_with_content_on_every_delta_is_decoded_into_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    counting = _CountingLoads()
    monkeypatch.setattr(wire_observer, "orjson", counting)
    pieces = [*_words(WORDS), _event(_chunk([_delta(0, "", "stop")])), b"data: [DONE]\n\n"]
    attributes, _ = _stream(pieces, content="SPAN_ONLY")
    assert counting.calls >= WORDS + 1
    output = json.loads(attributes[sc.GEN_AI_OUTPUT_MESSAGES])
    assert "w0 w1 " in json.dumps(output)


@pytest.mark.parametrize("content", ["NO_CONTENT", "SPAN_ONLY"])
def test_a_stream_too_long_to_hold_is_read_as_it_comes_with_the_same_span(
        content: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pieces = [*_words(12), _event(_chunk([_delta(0, "", "stop")], usage=None)),
              _event(_chunk([], usage={"prompt_tokens": 3, "completion_tokens": 12})), b"data: [DONE]\n\n"]
    held, _ = _stream(pieces, content=content)
    monkeypatch.setattr(wire_observer, "MAX_HELD_BYTES", 100)  # past the third piece: read as they come
    read, metrics = _stream(pieces, content=content)
    timed = sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK  # a reading of the clock: present in both
    assert read.pop(timed) >= 0 and held.pop(timed) >= 0
    assert read == held
    assert read[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",) and read[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 12
    (per_chunk,) = metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK)
    assert per_chunk.count == 13  # 14 events with data: 13 gaps, none lost at the switch
