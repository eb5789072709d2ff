"""cafe.apis: every model API read once, from its wire format.

One module per API, each a `cafe.apis.Api`: `openai_chat` (Chat Completions),
`openai_responses` (Responses), `openai_embeddings` (Embeddings) and `anthropic_messages`
(Anthropic Messages). Telemetry, pages, replay reports and recordings take what they know of
a call from here; nothing else parses a provider's JSON. A call no reading knows is still
recorded and replayed, and shown as what it is (its method, path, status and timing).

    api = cafe.apis.api_for("POST", "/v1/chat/completions")
    call = cafe.apis.read_exchange(api, "POST", path, status=200, request=body, response=answer)
    call.label, call.request.model, call.response.usage.input_tokens
    asked = api.request(cafe.apis.request_head(body_bytes, api.request_keys), host=host)  # no conversation

Adding an API is one module that implements `Api`, its entry in `APIS`, and its fixtures.
"""

from __future__ import annotations

from cafe.apis import anthropic_messages, openai_chat, openai_embeddings, openai_responses
from cafe.apis._api import Api, StreamReading
from cafe.apis._call import ModelCall, assembled, read_exchange, request_summary
from cafe.apis._head import request_head
from cafe.apis._model import (
    NO_RESPONSE,
    NO_USAGE,
    CallRequest,
    CallResponse,
    Message,
    Operation,
    Part,
    RequestContent,
    ToolCall,
    Usage,
    text_of,
)
from cafe.apis._sse import EventSplitter

APIS: tuple[Api, ...] = (openai_chat.API, openai_responses.API, openai_embeddings.API, anthropic_messages.API)
"""Every reading, tried in this order."""


def api_for(method: str, path: str) -> Api | None:
    """The reading of the API a request's method and path (no query) belong to, or None."""
    for api in APIS:
        if api.handles(method, path):
            return api
    return None


__all__ = [
    "APIS",
    "NO_RESPONSE",
    "NO_USAGE",
    "Api",
    "CallRequest",
    "CallResponse",
    "EventSplitter",
    "Message",
    "ModelCall",
    "Operation",
    "Part",
    "RequestContent",
    "StreamReading",
    "ToolCall",
    "Usage",
    "api_for",
    "assembled",
    "read_exchange",
    "request_head",
    "request_summary",
    "text_of",
]
