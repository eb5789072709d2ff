"""OpenAI Embeddings (`POST .../embeddings`): the request and its JSON answer (never a stream).

Spoken by OpenAI, Azure OpenAI and the OpenAI-compatible servers. The input (a string, a
list of strings, a token array or a list of them) is content: each input is one user message
of the call's input, read only with content; its count and its tokens are not read from it.
The answer gives the model, the usage (`prompt_tokens` are its input tokens; there are no
output tokens) and the vectors: how many, and their length, the dimension count (a `base64`
vector is float32 bytes, so its length is its decoded size over 4, taken from the text's
length without decoding it). The `openai` SDK asks for `base64` unless told otherwise, and
decodes the vectors itself: `encoding_formats` is what went on the wire."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cafe.apis._model import CallRequest, CallResponse, Message, Operation, RequestContent, Usage
from cafe.apis._values import integer, items, mapping, provider_for, text

NAME = "openai.embeddings"
_PATH_SUFFIX = "/embeddings"
_FLOAT32_BYTES = 4


def _inputs(value: Any) -> list[Any]:
    """The separate inputs of `input`: each string, or each token array."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(type(item) is int for item in value):
        return [value]  # one token array
    return list(value) if isinstance(value, list) else []


def input_messages(value: Any) -> list[Message]:
    """Each input as a user message: a string as its text, a token array as a `tokens` part."""
    found: list[Message] = []
    for item in _inputs(value):
        part = ({"type": "text", "content": item} if isinstance(item, str)
                else {"type": "tokens", "tokens": item if isinstance(item, list) else None})
        found.append({"role": "user", "parts": [part]})
    return found


def _base64_floats(encoded: str) -> int:
    """How many float32 values a base64 text holds, from its length and padding alone."""
    size = len(encoded) // 4 * 3 - (encoded.endswith("=") + encoded.endswith("=="))
    return size // _FLOAT32_BYTES


def dimension_count(vector: Any) -> int | None:
    """The length of one vector, a list of numbers or base64 float32 bytes."""
    if isinstance(vector, list):
        return len(vector)
    if isinstance(vector, str):
        return _base64_floats(vector.strip())
    return None


class Embeddings:
    """The Embeddings reading (`cafe.apis.Api`)."""

    name = NAME
    operation = Operation.EMBEDDINGS
    request_keys = frozenset({"dimensions", "encoding_format", "model"})

    def handles(self, method: str, path: str) -> bool:
        return method == "POST" and path.endswith(_PATH_SUFFIX)

    def request(self, body: Mapping[str, Any], *, host: str | None) -> CallRequest:
        encoding = text(body.get("encoding_format"))
        return CallRequest(api=NAME, operation=Operation.EMBEDDINGS, provider=provider_for(host, "openai"),
                           model=text(body.get("model")), encoding_formats=(encoding,) if encoding else None,
                           dimensions=integer(body.get("dimensions")))

    def request_content(self, body: Mapping[str, Any]) -> RequestContent:
        return RequestContent(input_messages=input_messages(body.get("input")))

    def response(self, document: Mapping[str, Any], *, content: bool) -> CallResponse:
        vectors = items(document.get("data"))
        usage = mapping(document.get("usage"))
        return CallResponse(model=text(document.get("model")),
                            usage=Usage(input_tokens=integer(usage.get("prompt_tokens"))),
                            embeddings=len(vectors) if isinstance(document.get("data"), list) else None,
                            dimension_count=dimension_count(vectors[0].get("embedding")) if vectors else None)

    def stream(self, *, content: bool) -> _NoStream:
        return _NoStream()

    def assembled(self, events: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
        return None

    def summary(self, body: Mapping[str, Any]) -> str:
        count = len(_inputs(body.get("input")))
        return f"{count} input(s)"


class _NoStream:
    """Embeddings are never streamed: a body sent as events is read as nothing."""

    __slots__ = ()

    def wants(self, data: bytes) -> bool:
        return False

    def event(self, event: Mapping[str, Any]) -> None:
        return None

    def result(self) -> CallResponse:
        return CallResponse()


API = Embeddings()
