"""One recorded or observed exchange read whole: which API it is, what it asked, what came
back. What pages, replay reports and exports show of a call."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from cafe.apis._api import Api
from cafe.apis._model import NO_RESPONSE, CallRequest, CallResponse, RequestContent
from cafe.apis._sse import stream_data


@dataclass(frozen=True, slots=True)
class ModelCall:
    """A call as every consumer shows it. `api` is None for a call no reading knows (it is
    still shown, as its method, path and status); then `request` and `content` are None
    and `response` is empty."""

    api: Api | None
    method: str
    path: str
    status: int | None
    request: CallRequest | None
    content: RequestContent | None
    response: CallResponse
    chunk_offsets_ns: tuple[int, ...] = ()
    """A streamed answer's pieces, each by its offset from the call's start."""

    @property
    def label(self) -> str:
        """How a page names the call: `chat gpt-4o`, `embeddings text-embedding-3-small`,
        or the method and path of a call no reading knows."""
        if self.api is None or self.request is None:
            return f"{self.method} {self.path}"
        model = self.request.model or self.response.model
        operation = self.request.operation.value
        return f"{operation} {model}" if model else operation

    @property
    def first_chunk_ns(self) -> int | None:
        return self.chunk_offsets_ns[0] if self.chunk_offsets_ns else None


def _events(pieces: Iterable[bytes]) -> list[Mapping[str, Any]]:
    found: list[Mapping[str, Any]] = []
    for data in stream_data(pieces):
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue
        if isinstance(event, dict):
            found.append(event)
    return found


def read_exchange(api: Api | None, method: str, path: str, *, status: int | None,
                  request: Mapping[str, Any] | None, response: Mapping[str, Any] | None = None,
                  stream: Iterable[tuple[int, bytes]] | None = None, host: str | None = None,
                  content: bool = True) -> ModelCall:
    """Read one exchange with `api` (from `cafe.apis.api_for`): its request JSON, and its
    answer as a JSON document (`response`) or as the pieces of its stream with their
    offsets (`stream`; read when no document is given)."""
    pieces = list(stream or ())
    offsets = tuple(offset for offset, _ in pieces)
    if api is None or request is None:
        return ModelCall(None, method, path, status, None, None, NO_RESPONSE, offsets)
    asked = api.request(request, host=host)
    said = api.request_content(request) if content else None
    answer: CallResponse = NO_RESPONSE
    if response:
        answer = api.response(response, content=content)
    elif pieces:
        reading = api.stream(content=content)
        for event in _events(data for _, data in pieces):
            reading.event(event)
        answer = reading.result()
    return ModelCall(api, method, path, status, asked, said, answer, offsets)


def assembled(api: Api | None, pieces: Iterable[bytes]) -> dict[str, Any] | None:
    """A stream's pieces put together as the API's unstreamed answer, or None when no
    reading knows the API or the stream holds none of its events."""
    if api is None:
        return None
    return api.assembled(_events(pieces))


def request_summary(api: Api | None, method: str, path: str, request: Mapping[str, Any] | None) -> str:
    """One line naming a call without its conversation: `POST /v1/chat/completions, 3
    message(s), the last from user`."""
    if api is None or not request:
        return f"{method} {path}"
    return f"{method} {path}, {api.summary(request)}"


