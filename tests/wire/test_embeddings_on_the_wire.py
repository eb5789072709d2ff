"""`client.embeddings.create` of the real `openai` SDK, against the local server: recorded
once, replayed strictly with the server down, a changed request named in one line, one
`embeddings {model}` span with only the attributes the 1.41.1 embeddings span defines, the
GenAI metrics, and a page that draws it as the embeddings call it is."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import openai
import pytest
from opentelemetry.trace import SpanKind

import cafe.wire as wire
from cafe.cli import main
from cafe.recording import load_recording
from cafe.recording.errors import ReplayMismatch, UnusedCalls
from cafe_otel import encode, invoke_agent
from cafe_otel import semconv as sc
from tests.otel.test_instrumentation import Pipeline
from tests.wire.openai_server import EMBEDDING_DIMENSIONS, OpenAIServer

KEY = "sk-test-embeddings-0123456789abcdef"
MODEL = "text-embedding-3-small"
SECRET_TEXT = "my card number is 4111 1111 1111 1111"
# Every attribute the 1.41.1 embeddings span (`span.gen_ai.embeddings.client`) defines.
EMBEDDINGS_SPAN = {sc.GEN_AI_OPERATION_NAME, sc.GEN_AI_PROVIDER_NAME, sc.ERROR_TYPE, sc.GEN_AI_REQUEST_MODEL,
                   sc.SERVER_PORT, sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT, sc.GEN_AI_REQUEST_ENCODING_FORMATS,
                   sc.GEN_AI_RESPONSE_MODEL, sc.GEN_AI_USAGE_INPUT_TOKENS, sc.SERVER_ADDRESS}


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=KEY, max_retries=0)


def embed(url: str) -> list[Any]:
    """The SDK's default (base64 on the wire, decoded by the SDK), floats asked for with
    fewer dimensions, and token arrays."""
    client = _client(url)
    return [client.embeddings.create(model=MODEL, input=SECRET_TEXT).model_dump(warnings=False),
            client.embeddings.create(model=MODEL, input=["a latte", "a croissant"], encoding_format="float",
                                     dimensions=256).model_dump(warnings=False),
            client.embeddings.create(model=MODEL, input=[[9906, 1917], [15339]], encoding_format="base64",
                                     dimensions=3).model_dump(warnings=False)]


def test_embeddings_replay_with_the_server_down(tmp_path: Path) -> None:
    path = tmp_path / "rag.jsonl"
    with OpenAIServer.running() as server:
        with wire.record(path):
            live = embed(server.base_url)
        assert server.count == 3
        url = server.base_url
    vectors = [answer["data"][0]["embedding"] for answer in live]
    assert (len(vectors[0]), len(vectors[1]), len(base64.b64decode(vectors[2]))) == (EMBEDDING_DIMENSIONS, 256, 3 * 4)
    assert KEY not in path.read_text()
    recording = load_recording(path)
    assert recording.calls[0].request["encoding_format"] == "base64"  # the SDK's own choice
    with wire.replay(path) as source:
        replayed = embed(url)
    assert replayed == live and source.served == 3


def test_a_changed_embeddings_request_names_its_field_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "rag.jsonl"
    with OpenAIServer.running() as server:
        with wire.record(path):
            embed(server.base_url)
        with pytest.raises(ReplayMismatch) as caught, wire.replay(path):
            client = _client(server.base_url)
            client.embeddings.create(model=MODEL, input=SECRET_TEXT)
            client.embeddings.create(model=MODEL, input=["a latte", "a croissant"], encoding_format="float",
                                     dimensions=512)
    line = str(caught.value)
    assert "\n" not in line and KEY not in line
    assert "call 2" in line and "$.dimensions" in line and "recorded 256, incoming 512" in line


def test_an_unused_embeddings_call_is_named_by_its_path_and_inputs(tmp_path: Path) -> None:
    path = tmp_path / "rag.jsonl"
    with OpenAIServer.running() as server:
        with wire.record(path):
            embed(server.base_url)
        with pytest.raises(UnusedCalls) as caught, wire.replay(path):
            _client(server.base_url).embeddings.create(model=MODEL, input=SECRET_TEXT)
    line = str(caught.value)
    assert "\n" not in line and SECRET_TEXT not in line and KEY not in line
    assert line.endswith("2 recorded call(s) were never made, from call 2 (line 3: POST /v1/embeddings, 2 input(s))")


@pytest.mark.parametrize("capture", [False, True])
def test_each_embeddings_call_is_one_span_with_only_the_embeddings_spans_attributes(capture: bool) -> None:
    with OpenAIServer.running() as server, Pipeline(capture_content=capture) as pipeline:
        embed(server.base_url)
        spans = sorted(pipeline.finished(), key=lambda span: span.start_time or 0)
        port = server.port
    assert [span.name for span in spans] == [f"embeddings {MODEL}"] * 3
    found = [dict(span.attributes or {}) for span in spans]
    for span, attributes in zip(spans, found, strict=True):
        assert span.kind is SpanKind.CLIENT and set(attributes) <= EMBEDDINGS_SPAN
        assert (attributes[sc.GEN_AI_OPERATION_NAME], attributes[sc.GEN_AI_PROVIDER_NAME]) == ("embeddings", "openai")
        assert (attributes[sc.GEN_AI_REQUEST_MODEL], attributes[sc.GEN_AI_RESPONSE_MODEL]) == (MODEL, MODEL)
        assert (attributes[sc.SERVER_ADDRESS], attributes[sc.SERVER_PORT]) == ("127.0.0.1", port)
    assert [attributes[sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] for attributes in found] == [EMBEDDING_DIMENSIONS, 256, 3]
    assert [attributes[sc.GEN_AI_REQUEST_ENCODING_FORMATS] for attributes in found] == [
        ("base64",), ("float",), ("base64",)]
    assert [attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] for attributes in found] == [8, 4, 3]
    for text in (SECRET_TEXT, "latte", KEY):
        assert text.encode() not in encode(spans)


def test_embeddings_calls_record_the_duration_and_their_input_tokens() -> None:
    with OpenAIServer.running() as server, Pipeline() as pipeline:
        embed(server.base_url)
        pipeline.finished()
        pipeline.handle.force_flush(2.0)
    durations = pipeline.metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION)
    assert sum(point.count for point in durations) == 3
    assert {dict(point.attributes)[sc.GEN_AI_OPERATION_NAME] for point in durations} == {"embeddings"}
    (tokens,) = pipeline.metrics.points(sc.METRIC_GEN_AI_CLIENT_TOKEN_USAGE)
    assert dict(tokens.attributes)[sc.GEN_AI_TOKEN_TYPE] == "input" and (tokens.count, tokens.sum) == (3, 15)
    assert pipeline.metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK) == []


def test_an_agent_span_adds_the_embeddings_input_tokens_to_its_chat_calls() -> None:
    with OpenAIServer.running() as server, Pipeline() as pipeline:
        with invoke_agent("rag", provider="openai", tracer_provider=pipeline.handle.provider):
            client = _client(server.base_url)
            client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "A latte."}])
            client.embeddings.create(model=MODEL, input=["a latte", "a croissant"], encoding_format="float")
        spans = {span.name: dict(span.attributes or {}) for span in pipeline.finished()}
    chat, embedded, agent = spans["chat gpt-4o"], spans[f"embeddings {MODEL}"], spans["invoke_agent rag"]
    assert agent[sc.GEN_AI_USAGE_INPUT_TOKENS] == chat[sc.GEN_AI_USAGE_INPUT_TOKENS] + embedded[
        sc.GEN_AI_USAGE_INPUT_TOKENS]
    assert agent[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS]
    assert agent[sc.GEN_AI_RESPONSE_FINISH_REASONS] == chat[sc.GEN_AI_RESPONSE_FINISH_REASONS]


def test_the_page_draws_an_embeddings_call_with_its_inputs_usage_and_dimension(tmp_path: Path) -> None:
    path, page = tmp_path / "rag.jsonl", tmp_path / "rag.html"
    with OpenAIServer.running() as server, wire.record(path):
        embed(server.base_url)
        client = _client(server.base_url)
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "A latte."}])
        client.embeddings.create(model=MODEL, input=["a latte", "a croissant"], encoding_format="float",
                                 dimensions=256)
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "A latte."}])
    out, err = io.StringIO(), io.StringIO()
    assert main(["view", str(path), "-o", str(page)], environ={}, out=out, err=err) == 0, err.getvalue()
    shown = page.read_text()
    assert shown.count(f'data-kind="embeddings" data-name="embeddings {MODEL}"') == 4
    assert f"1 input(s) · 8 input tokens · 1 vector(s) of {EMBEDDING_DIMENSIONS} dimensions" in shown
    assert "2 input(s) · 4 input tokens · 2 vector(s) of 256 dimensions" in shown
    assert "user: a croissant" in shown and f"user: {SECRET_TEXT}" in shown
    assert "chat " + MODEL not in shown and "None" not in shown and "(no reply recorded)" not in shown
    # The chat call after an embeddings call is read against the chat call before it.
    assert shown.count('data-name="chat gpt-4o"') == 2
