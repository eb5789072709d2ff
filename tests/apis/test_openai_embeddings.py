"""The Embeddings reading: a request and its answer, float or base64, as every consumer reads
them; the input is content, never metadata."""

from __future__ import annotations

import base64
import struct
from typing import Any

import pytest

from cafe.apis import Operation, api_for, openai_embeddings, read_exchange

API = openai_embeddings.API


def _answer(vectors: list[Any], model: str = "text-embedding-3-small-v2") -> dict[str, Any]:
    return {"object": "list", "model": model, "usage": {"prompt_tokens": 7, "total_tokens": 7},
            "data": [{"object": "embedding", "index": index, "embedding": vector}
                     for index, vector in enumerate(vectors)]}


def _base64(values: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()


def test_the_embeddings_path_is_read_under_any_prefix() -> None:
    assert api_for("POST", "/v1/embeddings") is API
    assert api_for("POST", "/openai/deployments/small/embeddings") is API
    assert api_for("GET", "/v1/embeddings") is None


def test_the_request_gives_the_model_the_encoding_format_and_the_dimensions() -> None:
    asked = API.request({"model": "text-embedding-3-small", "input": "a latte", "encoding_format": "base64",
                         "dimensions": 256}, host="api.openai.com")
    assert (asked.api, asked.operation, asked.provider, asked.model) == (
        "openai.embeddings", Operation.EMBEDDINGS, "openai", "text-embedding-3-small")
    assert (asked.encoding_formats, asked.dimensions, asked.stream) == (("base64",), 256, False)
    bare = API.request({"model": "m", "input": ["a"]}, host="x.openai.azure.com")
    assert (bare.provider, bare.encoding_formats, bare.dimensions) == ("azure.ai.openai", None, None)


@pytest.mark.parametrize(("given", "parts"), [
    ("a latte", [{"type": "text", "content": "a latte"}]),
    (["a latte", "a croissant"], [{"type": "text", "content": "a latte"}, {"type": "text", "content": "a croissant"}]),
    ([9906, 1917], [{"type": "tokens", "tokens": [9906, 1917]}]),
    ([[9906], [1917, 0]], [{"type": "tokens", "tokens": [9906]}, {"type": "tokens", "tokens": [1917, 0]}]),
])
def test_each_input_is_one_user_message_of_the_content(given: Any, parts: list[dict[str, Any]]) -> None:
    said = API.request_content({"model": "m", "input": given})
    assert said.input_messages == [{"role": "user", "parts": [part]} for part in parts]
    assert said.system_instructions == [] and said.tool_definitions == []
    assert API.summary({"input": given}) == f"{len(parts)} input(s)"


def test_no_input_text_reaches_the_request_or_the_summary() -> None:
    body = {"model": "m", "input": ["my card is 4111 1111 1111 1111"]}
    assert "4111" not in repr(API.request(body, host=None)) and "4111" not in API.summary(body)


def test_a_float_answer_gives_the_vectors_their_dimension_and_the_input_tokens() -> None:
    answer = API.response(_answer([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]), content=True)
    assert (answer.model, answer.embeddings, answer.dimension_count) == ("text-embedding-3-small-v2", 2, 3)
    assert (answer.usage.input_tokens, answer.usage.output_tokens, answer.finish_reasons) == (7, None, ())
    assert answer.output_messages is None and answer.id is None


@pytest.mark.parametrize("size", [1, 2, 3, 256, 1536])
def test_a_base64_vector_counts_its_float32_values(size: int) -> None:
    values = [float(n) / 7 for n in range(size)]
    answer = API.response(_answer([_base64(values)]), content=False)
    assert (answer.embeddings, answer.dimension_count) == (1, size)


def test_an_answer_without_vectors_says_so() -> None:
    empty = API.response({"object": "list", "data": [], "model": "m"}, content=False)
    assert (empty.embeddings, empty.dimension_count) == (0, None)
    assert API.response({"error": {"message": "no"}}, content=False).embeddings is None


def test_a_recorded_call_reads_as_an_embeddings_call_never_chat() -> None:
    call = read_exchange(api_for("POST", "/v1/embeddings"), "POST", "/v1/embeddings", status=200,
                         request={"model": "e-1", "input": ["a", "b"]}, response=_answer([[0.0] * 4, [1.0] * 4]))
    assert call.label == "embeddings e-1"
    assert call.content is not None and len(call.content.input_messages) == 2
    assert (call.response.embeddings, call.response.dimension_count, call.response.usage.input_tokens) == (2, 4, 7)
