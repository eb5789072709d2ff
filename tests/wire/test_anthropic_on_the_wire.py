"""An agent on the real `anthropic` SDK, against a local server speaking the Messages API:
recorded once, replayed strictly with the server down, a changed request named in one line,
one GenAI span and the GenAI metrics per call, and its page showing the conversation, the
tools and the usage."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from jsonschema import Draft202012Validator
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

import cafe.wire as wire
from cafe.cli import main
from cafe.recording import load_recording
from cafe.recording.errors import ReplayMismatch, UnusedCalls
from cafe.view import write_report_into
from cafe_otel import encode, invoke_agent
from cafe_otel import semconv as sc
from tests.otel.test_instrumentation import Pipeline
from tests.wire.anthropic_server import AnthropicServer

# Of no key family the scrubber knows by its shape: only the header that carries it names it.
KEY = "quietly-local-anthropic-credential-value"
MODEL = "claude-sonnet-4-5"
SYSTEM: Any = [{"type": "text", "text": "You are a barista at the Blue Door.", "cache_control": {"type": "ephemeral"}}]
ORDER: Any = [{"role": "user", "content": "A latte, please."}]
TOOLS: Any = [{"name": "price_check", "description": "The price of a menu item.",
               "input_schema": {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}}]
SCHEMAS = Path(__file__).resolve().parents[3] / "shared" / "semconv-1.41.1" / "docs" / "gen-ai"


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer.running() as running:
        yield running


def _client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)


def tool_round_trip(client: anthropic.Anthropic) -> list[str]:
    """The model asks for a tool, the agent runs it and sends its result back."""
    first = client.messages.create(model=MODEL, max_tokens=64, system=SYSTEM, tools=TOOLS, messages=ORDER)
    (call,) = [block for block in first.content if block.type == "tool_use"]
    second = client.messages.create(model=MODEL, max_tokens=64, system=SYSTEM, tools=TOOLS, messages=[
        *ORDER, {"role": "assistant", "content": first.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                      "content": '{"price_eur": 1.6}'}]}])
    return [first.model_dump_json(), second.model_dump_json()]


def agent(url: str) -> list[Any]:
    """Every way the SDK calls the Messages API: plain, `messages.stream`, `stream=True`, a
    tool round trip, and async (one call with thinking on)."""
    client = _client(url)
    # This SDK has no sampling parameters of its own: an agent of an older model sends them as extras.
    found: list[Any] = [client.messages.create(model=MODEL, max_tokens=64, system=SYSTEM, messages=ORDER,
                                               stop_sequences=["###"], extra_body={"temperature": 0.5, "top_k": 5},
                                               ).model_dump_json()]
    with client.messages.stream(model=MODEL, max_tokens=64, system=SYSTEM, messages=ORDER) as stream:
        found.append("".join(stream.text_stream))
        found.append(stream.get_final_message().model_dump_json())
    found.append([event.model_dump_json() for event in client.messages.create(
        model=MODEL, max_tokens=64, messages=ORDER, stream=True)])
    found.extend(tool_round_trip(client))

    async def thinking() -> str:
        async with anthropic.AsyncAnthropic(base_url=url, api_key=KEY, max_retries=0) as async_client:
            reply = await async_client.messages.create(model=MODEL, max_tokens=2048, messages=ORDER,
                                                       thinking={"type": "enabled", "budget_tokens": 1024})
        return reply.model_dump_json()

    found.append(asyncio.run(thinking()))
    return found


CALLS = 6  # the HTTP calls `agent` makes


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _validator(name: str) -> Draft202012Validator:
    path = SCHEMAS / f"gen-ai-{name}.json"
    if not path.is_file():
        pytest.skip("the pinned semantic conventions (semconv-1.41.1) are not beside this checkout")
    return Draft202012Validator(json.loads(path.read_text(encoding="utf-8")))


def test_an_anthropic_agent_replays_with_the_server_down(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    with AnthropicServer.running() as server:
        with wire.record(path) as recorder:
            live = agent(server.base_url)
        assert server.count == CALLS and recorder.calls == CALLS
        url = server.base_url
    assert KEY not in path.read_text()
    recording = load_recording(path)
    assert [call.exchange["target"] for call in recording.calls] == ["/v1/messages"] * CALLS  # type: ignore[index]
    streamed = recording.calls[1].response  # the stream put together as the unstreamed message
    assert streamed is not None and streamed["content"][0]["text"] == live[1]
    with wire.replay(path) as source:  # nothing listens at `url` any more
        replayed = agent(url)
    assert replayed == live and source.served == CALLS and source.unused == 0


def test_a_changed_anthropic_request_names_its_field_in_one_line(server: AnthropicServer, tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    with wire.record(path):
        tool_round_trip(_client(server.base_url))
    with pytest.raises(ReplayMismatch) as caught, wire.replay(path):
        client = _client(server.base_url)
        first = client.messages.create(model=MODEL, max_tokens=64, system=SYSTEM, tools=TOOLS, messages=ORDER)
        client.messages.create(model=MODEL, max_tokens=64, system=SYSTEM, tools=TOOLS, messages=[
            *ORDER, {"role": "assistant", "content": first.content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": first.content[-1].id,  # type: ignore[union-attr]
                                          "content": '{"price_eur": 1.7}'}]}])
    line = str(caught.value)
    assert "\n" not in line and KEY not in line
    assert "call 2" in line and "$.messages[2].content[0].content" in line


def test_a_mismatch_report_lists_the_anthropic_calls_by_their_messages(server: AnthropicServer, tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    with wire.record(path):
        tool_round_trip(_client(server.base_url))
    with pytest.raises(ReplayMismatch) as caught, wire.replay(path):
        client = _client(server.base_url)
        client.messages.create(model=MODEL, max_tokens=64, system=SYSTEM, tools=TOOLS, messages=ORDER)
        client.messages.create(model=MODEL, max_tokens=32, system=SYSTEM, tools=TOOLS, messages=ORDER)
    page = write_report_into(tmp_path / "reports", load_recording(path), caught.value).read_text()
    assert "$.max_tokens" in str(caught.value) and "$.max_tokens" in page
    assert ('<li class="matched" data-call="1">call 1: matched · POST /v1/messages, 1 message(s), '
            "the last from user</li>") in page
    assert ('data-call="2">call 2: ' in page
            and "POST /v1/messages, 3 message(s), the last from user</li>" in page)
    assert "A latte, please." not in page.split('class="call-list"', 1)[1].split("</details>", 1)[0]


def test_an_unused_anthropic_call_is_named_by_its_path_and_messages(server: AnthropicServer, tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    with wire.record(path):
        tool_round_trip(_client(server.base_url))
    with pytest.raises(UnusedCalls) as caught, wire.replay(path):
        _client(server.base_url).messages.create(model=MODEL, max_tokens=64, system=SYSTEM, tools=TOOLS,
                                                 messages=ORDER)
    line = str(caught.value)
    assert "\n" not in line and KEY not in line and "A latte" not in line
    assert line.endswith("1 recorded call(s) were never made, from call 2 "
                         "(line 3: POST /v1/messages, 3 message(s), the last from user)")


def _spans_by_call(pipeline: Pipeline) -> list[ReadableSpan]:
    return sorted(pipeline.finished(), key=lambda span: span.start_time or 0)


def test_each_anthropic_call_is_one_chat_span_with_its_request_answer_and_usage(server: AnthropicServer) -> None:
    with Pipeline() as pipeline:
        agent(server.base_url)
        spans = _spans_by_call(pipeline)
    assert len(spans) == CALLS
    for span in spans:
        attributes = _attributes(span)
        assert span.name == f"chat {MODEL}" and span.kind is SpanKind.CLIENT
        assert attributes[sc.GEN_AI_OPERATION_NAME] == "chat" and attributes[sc.GEN_AI_PROVIDER_NAME] == "anthropic"
        assert sc.OPENAI_API_TYPE not in attributes and not any(key.startswith("openai.") for key in attributes)
        assert attributes[sc.GEN_AI_REQUEST_MODEL] == MODEL and attributes[sc.GEN_AI_RESPONSE_MODEL] == MODEL
        assert attributes[sc.GEN_AI_RESPONSE_ID].startswith("msg_")
        assert attributes[sc.SERVER_ADDRESS] == "127.0.0.1" and attributes[sc.SERVER_PORT] == server.port
        assert span.status.status_code is StatusCode.UNSET
    plain, stream, raw, asked, answered, thought = (_attributes(span) for span in spans)
    assert (plain[sc.GEN_AI_REQUEST_MAX_TOKENS], plain[sc.GEN_AI_REQUEST_TEMPERATURE], plain[sc.GEN_AI_REQUEST_TOP_K],
            plain[sc.GEN_AI_REQUEST_STOP_SEQUENCES]) == (64, 0.5, 5.0, ("###",))
    assert sc.GEN_AI_REQUEST_STREAM not in plain  # set only when the request streams
    assert plain[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    # The system prompt is written to the cache by the first call and read by the next one.
    cached = (sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS)
    assert [plain[key] for key in cached] == [8, 0] and [stream[key] for key in cached] == [0, 8]
    assert stream[sc.GEN_AI_USAGE_INPUT_TOKENS] == 8 + 3 + 4  # the cached prompt, then the words and the message
    for streamed in (stream, raw):
        assert streamed[sc.GEN_AI_REQUEST_STREAM] is True and streamed[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] >= 0
        assert streamed[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 8 and streamed[sc.GEN_AI_RESPONSE_FINISH_REASONS] == (
            "end_turn",)
    assert asked[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_use",)
    assert answered[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    assert thought[sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] > 0


def test_anthropic_calls_record_the_same_metrics_as_chat(server: AnthropicServer) -> None:
    with Pipeline() as pipeline:
        agent(server.base_url)
        pipeline.finished()
        pipeline.handle.force_flush(2.0)
    metrics = pipeline.metrics
    durations = metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION)
    assert sum(point.count for point in durations) == CALLS
    for point in durations:
        attributes = dict(point.attributes)
        assert (attributes[sc.GEN_AI_PROVIDER_NAME], attributes[sc.GEN_AI_OPERATION_NAME]) == ("anthropic", "chat")
        assert attributes[sc.GEN_AI_REQUEST_MODEL] == MODEL
    tokens = {dict(point.attributes)[sc.GEN_AI_TOKEN_TYPE]: point for point in
              metrics.points(sc.METRIC_GEN_AI_CLIENT_TOKEN_USAGE)}
    assert tokens["input"].count == CALLS and tokens["output"].count == CALLS
    (first_chunk,) = metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK)
    assert first_chunk.count == 2  # the two streamed calls
    (per_chunk,) = metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK)
    assert per_chunk.count > 2 * 8


def test_an_anthropic_error_is_the_spans_error_type_over_http_and_in_a_stream(server: AnthropicServer) -> None:
    server.fail_next(529)
    server.break_next_streams(2)
    with Pipeline() as pipeline:
        client = _client(server.base_url)
        with pytest.raises(anthropic.InternalServerError):
            client.messages.create(model=MODEL, max_tokens=64, messages=ORDER)
        with pytest.raises(anthropic.APIStatusError), client.messages.stream(
                model=MODEL, max_tokens=64, messages=ORDER) as stream:
            for _text in stream.text_stream:
                pass
        overloaded, broken = (_attributes(span) for span in _spans_by_call(pipeline))
    assert overloaded[sc.ERROR_TYPE] == "529"
    assert broken[sc.ERROR_TYPE] == "overloaded_error" and broken[sc.GEN_AI_RESPONSE_ID].startswith("msg_")


def test_counting_tokens_is_no_model_call(server: AnthropicServer) -> None:
    with Pipeline() as pipeline:
        counted = _client(server.base_url).messages.count_tokens(model=MODEL, messages=ORDER)
        assert counted.input_tokens > 0
        assert pipeline.finished() == []


def test_captured_anthropic_content_is_schema_valid_with_system_as_the_instructions(server: AnthropicServer) -> None:
    with Pipeline(capture_content=True) as pipeline:
        client = _client(server.base_url)
        tool_round_trip(client)
        with client.messages.stream(model=MODEL, max_tokens=2048, system="Be brief.", messages=ORDER,
                                    thinking={"type": "enabled", "budget_tokens": 1024}) as stream:
            stream.until_done()
        spans = _spans_by_call(pipeline)
    asked, answered, thought = (_attributes(span) for span in spans)
    for attributes in (asked, answered, thought):
        _validator("system-instructions").validate(json.loads(attributes[sc.GEN_AI_SYSTEM_INSTRUCTIONS]))
        _validator("input-messages").validate(json.loads(attributes[sc.GEN_AI_INPUT_MESSAGES]))
        _validator("output-messages").validate(json.loads(attributes[sc.GEN_AI_OUTPUT_MESSAGES]))
    assert json.loads(asked[sc.GEN_AI_SYSTEM_INSTRUCTIONS]) == [
        {"type": "text", "content": "You are a barista at the Blue Door."}]
    assert [tool["name"] for tool in json.loads(asked[sc.GEN_AI_TOOL_DEFINITIONS])] == ["price_check"]
    _validator("tool-definitions").validate(json.loads(asked[sc.GEN_AI_TOOL_DEFINITIONS]))
    (called,) = json.loads(asked[sc.GEN_AI_OUTPUT_MESSAGES])
    assert called["finish_reason"] == "tool_call"
    assert called["parts"][-1] == {"type": "tool_call", "id": called["parts"][-1]["id"], "name": "price_check",
                                   "arguments": {"item": "A latte, please."}}
    history = json.loads(answered[sc.GEN_AI_INPUT_MESSAGES])
    assert history[-1]["parts"] == [{"type": "tool_call_response", "id": called["parts"][-1]["id"],
                                     "response": {"price_eur": 1.6}}]
    (reply,) = json.loads(thought[sc.GEN_AI_OUTPUT_MESSAGES])
    assert [part["type"] for part in reply["parts"]] == ["reasoning", "text"]
    assert json.loads(thought[sc.GEN_AI_SYSTEM_INSTRUCTIONS]) == [{"type": "text", "content": "Be brief."}]


@pytest.mark.parametrize("header", ["authorization", "x-api-key"])
def test_the_anthropic_key_never_leaves_even_when_the_conversation_holds_it(
        server: AnthropicServer, monkeypatch: pytest.MonkeyPatch, header: str) -> None:
    # This SDK sends the key as a bearer token; the Messages API's own header is `x-api-key`.
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    client = (_client(server.base_url) if header == "authorization" else
              anthropic.Anthropic(base_url=server.base_url, api_key=None, default_headers={"x-api-key": KEY},
                                  max_retries=0))
    with Pipeline(capture_content=True) as pipeline:
        client.messages.create(model=MODEL, max_tokens=64, messages=[
            {"role": "user", "content": f"The word of the day is {KEY}, keep it safe."}])
        spans = pipeline.finished()
    assert server.received[-1].headers.get(header, "").endswith(KEY)
    assert len(spans) == 1 and "keep it safe" in spans[0].attributes[sc.GEN_AI_INPUT_MESSAGES]  # type: ignore[index, operator]
    assert KEY.encode() not in encode(spans)


def test_an_agent_span_adds_up_the_anthropic_calls_under_it(server: AnthropicServer) -> None:
    with Pipeline() as pipeline:
        with invoke_agent("barista", provider="anthropic", tracer_provider=pipeline.handle.provider):
            tool_round_trip(_client(server.base_url))
        spans = pipeline.finished()
    chats = [_attributes(span) for span in spans if span.name.startswith("chat ")]
    (agent_span,) = [_attributes(span) for span in spans if span.name == "invoke_agent barista"]
    assert len(chats) == 2
    assert agent_span[sc.GEN_AI_USAGE_INPUT_TOKENS] == sum(chat[sc.GEN_AI_USAGE_INPUT_TOKENS] for chat in chats)
    assert agent_span[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == sum(chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for chat in chats)
    assert agent_span[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)


def test_the_page_of_an_anthropic_recording_shows_the_conversation_tools_and_usage(
        server: AnthropicServer, tmp_path: Path) -> None:
    path, page = tmp_path / "agent.jsonl", tmp_path / "agent.html"
    with wire.record(path):
        agent(server.base_url)
    out, err = io.StringIO(), io.StringIO()
    assert main(["view", str(path), "-o", str(page)], environ={}, out=out, err=err) == 0, err.getvalue()
    shown = page.read_text()
    assert shown.count(f'data-name="chat {MODEL}"') == CALLS
    assert "system: You are a barista at the Blue Door." in shown and "user: A latte, please." in shown
    assert "assistant: Sure one latte coming up at table" in shown  # a reply, streamed or not
    assert "assistant -&gt; price_check({&quot;item&quot;:&quot;A latte, please.&quot;})" in shown
    assert "execute_tool price_check" in shown and "{&quot;price_eur&quot;: 1.6}" in shown
    assert "assistant (reasoning): The guest asks" in shown
    assert "0 message(s)" not in shown and "no usage" not in shown and "None" not in shown
    assert "15+8 tokens" in shown  # the streamed call: 8 cached + 7 fresh input tokens, 8 output
