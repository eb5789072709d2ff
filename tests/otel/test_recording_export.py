"""`cafe export` of a wire recording that no replayer claims: one span a call, each call read
by the reading of its API (`cafe.apis`), under one `invoke_agent` span that adds them up."""

from __future__ import annotations

import io
import json
from pathlib import Path

import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import cafe.wire as wire
from cafe.cli import main
from cafe.recording import load_recording
from cafe_otel import configure, describe, export_recording
from cafe_otel import semconv as sc
from tests.genai_schemas import span_violations
from tests.wire.responses_server import ResponsesServer

KEY = "sk-test-export-0123456789abcdef"
TOOLS = [{"type": "function", "name": "price_check", "description": "The price of an item.",
          "parameters": {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}}]


@pytest.fixture
def responses_recording(tmp_path: Path) -> Path:
    """A function call, streamed, then answered with the whole history sent back."""
    path = tmp_path / "agent.jsonl"
    with ResponsesServer.running() as server, wire.record(path):
        client = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)
        with client.responses.stream(model="gpt-4.1", instructions="Be kind.", input="A latte",
                                     tools=TOOLS) as stream:  # type: ignore[arg-type]
            asked = stream.get_final_response()
        call = asked.output[0]
        assert call.type == "function_call"
        client.responses.create(model="gpt-4.1", instructions="Be kind.", tools=TOOLS,  # type: ignore[arg-type]
                                input=[{"role": "user", "content": "A latte"}, call.model_dump(exclude_none=True),
                                       {"type": "function_call_output", "call_id": call.call_id, "output": "1.60"}])
    return path


def _exported(path: Path, capture: bool) -> list[ReadableSpan]:
    sink = InMemorySpanExporter()
    handle = configure(exporter=sink, environ={}, set_global=False, metrics=False, capture_content=capture)
    export_recording(path, handle.provider, capture_content=capture)
    handle.shutdown(2.0)
    return list(sink.get_finished_spans())


def test_a_responses_recording_exports_each_call_by_its_reading(responses_recording: Path) -> None:
    spans = _exported(responses_recording, capture=False)
    (agent,) = [span for span in spans if span.name.startswith("invoke_agent")]
    calls = sorted((span for span in spans if span is not agent), key=lambda span: span.start_time or 0)
    recorded = [call.response for call in load_recording(responses_recording).calls]
    assert [span.name for span in calls] == ["chat gpt-4.1", "chat gpt-4.1"]
    for span, response in zip(calls, recorded, strict=True):
        attributes = dict(span.attributes or {})
        assert attributes[sc.GEN_AI_OPERATION_NAME] == "chat" and attributes[sc.GEN_AI_PROVIDER_NAME] == "openai"
        assert (attributes[sc.GEN_AI_RESPONSE_ID], attributes[sc.GEN_AI_RESPONSE_MODEL]) == (
            response["id"], response["model"])
        assert (attributes[sc.GEN_AI_USAGE_INPUT_TOKENS], attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (
            response["usage"]["input_tokens"], response["usage"]["output_tokens"])
        assert attributes[sc.OPENAI_API_TYPE] == "responses"
        assert attributes[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == (
            response["usage"]["input_tokens_details"]["cached_tokens"])
        assert span_violations(attributes) == []
    assert dict(calls[0].attributes or {})[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_call",)
    assert dict(calls[0].attributes or {})[sc.CAFE_GEN_AI_TOOL_CALLS] == ("price_check",)  # a defined tool
    assert dict(calls[1].attributes or {})[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    totals = dict(agent.attributes or {})
    assert totals[sc.GEN_AI_USAGE_INPUT_TOKENS] == sum(r["usage"]["input_tokens"] for r in recorded)
    assert totals[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == sum(r["usage"]["output_tokens"] for r in recorded)
    assert not any(key in dict(span.attributes or {}) for span in spans for key in sc.CONTENT_ATTRIBUTES)


def test_a_responses_recording_exports_its_content_only_when_asked(responses_recording: Path) -> None:
    calls = [span for span in _exported(responses_recording, capture=True) if span.name.startswith("chat")]
    first, second = sorted((dict(span.attributes or {}) for span in calls),
                           key=lambda attributes: attributes[sc.GEN_AI_USAGE_INPUT_TOKENS])
    for attributes in (first, second):
        assert span_violations(attributes) == []
        assert json.loads(attributes[sc.GEN_AI_SYSTEM_INSTRUCTIONS]) == [{"type": "text", "content": "Be kind."}]
        assert json.loads(attributes[sc.GEN_AI_TOOL_DEFINITIONS])[0]["name"] == "price_check"
    assert json.loads(first[sc.GEN_AI_INPUT_MESSAGES]) == [{"role": "user", "parts": [{"type": "text",
                                                                                        "content": "A latte"}]}]
    (asked,) = json.loads(first[sc.GEN_AI_OUTPUT_MESSAGES])
    assert asked["finish_reason"] == "tool_call" and asked["parts"][0]["name"] == "price_check"
    roles = [message["role"] for message in json.loads(second[sc.GEN_AI_INPUT_MESSAGES])]
    assert roles == ["user", "assistant", "tool"]


def test_cafe_export_of_a_responses_recording_writes_its_calls(responses_recording: Path, tmp_path: Path) -> None:
    target = tmp_path / "spans.otlp"
    out, err = io.StringIO(), io.StringIO()
    code = main(["export", str(responses_recording), "--out", str(target)], environ={}, out=out, err=err)
    assert code == 0, err.getvalue()
    lines = [line.strip() for line in describe(target.read_bytes())]
    assert sum(line.startswith("span 'chat gpt-4.1'") for line in lines) == 2
    for response in (call.response for call in load_recording(responses_recording).calls):
        assert f"gen_ai.usage.input_tokens = {response['usage']['input_tokens']}" in lines


def test_an_embeddings_recording_exports_its_call_without_content_even_when_asked(tmp_path: Path) -> None:
    from tests.wire.openai_server import EMBEDDING_DIMENSIONS, OpenAIServer

    path = tmp_path / "embed.jsonl"
    with OpenAIServer.running() as server, wire.record(path):
        client = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)
        client.embeddings.create(model="text-embedding-3-small", input=["a latte", "oat milk"])
    (call,) = [span for span in _exported(path, capture=True) if not span.name.startswith("invoke_agent")]
    attributes = dict(call.attributes or {})
    assert call.name == "embeddings text-embedding-3-small"
    assert attributes[sc.GEN_AI_OPERATION_NAME] == "embeddings"
    assert attributes[sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] == EMBEDDING_DIMENSIONS
    assert not any(key in attributes for key in sc.CONTENT_ATTRIBUTES)  # 1.41.1 defines none there
    assert span_violations(attributes) == []
