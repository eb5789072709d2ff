"""The observer seam: every call heard once, from its request to exactly one end, whichever
covered library sent it (the SDK's own, and each library installed, through `http`)."""

from __future__ import annotations

import asyncio
import gc
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import openai
import pytest

import cafe.wire as wire
from cafe.wire import CallOutcome, FailureKind, OutcomeKind, WireRequest, WireResponse
from tests.wire.libraries import SDK_LIBRARY, transports
from tests.wire.openai_server import OpenAIServer, answer_text

KEY = "sk-test-observed-0123456789abcdef"


@dataclass
class Heard:
    request: WireRequest
    responses: list[WireResponse] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)
    ends: list[CallOutcome] = field(default_factory=list)

    def response(self, response: WireResponse) -> None:
        self.responses.append(response)

    def chunk(self, data: bytes, at_ns: int) -> None:
        self.chunks.append(data)

    def end(self, outcome: CallOutcome) -> None:
        self.ends.append(outcome)


@dataclass
class Probe:
    calls: list[Heard] = field(default_factory=list)

    def start(self, request: WireRequest) -> Heard:
        heard = Heard(request)
        self.calls.append(heard)
        return heard


class Ticks:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        self.now += 1000
        return self.now


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer.running() as running:
        yield running


def _client(server: OpenAIServer, **kwargs: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, **kwargs)  # type: ignore[arg-type]


MESSAGES = [{"role": "user", "content": "A latte, please."}]


def test_a_plain_call_is_heard_from_request_to_one_completed_end(server: OpenAIServer) -> None:
    probe = Probe()
    with wire.intercept([probe], clock=Ticks()):
        reply = _client(server).chat.completions.create(model="m", messages=MESSAGES, max_tokens=5)  # type: ignore[arg-type]
    (heard,) = probe.calls
    assert heard.request.method == "POST" and heard.request.path == "/v1/chat/completions"
    assert json.loads(heard.request.body)["max_tokens"] == 5
    assert [r.status for r in heard.responses] == [200]
    assert json.loads(b"".join(heard.chunks))["choices"][0]["message"]["content"] == reply.choices[0].message.content
    assert [e.kind for e in heard.ends] == [OutcomeKind.COMPLETED]
    assert heard.request.started_ns < heard.responses[0].at_ns <= heard.ends[0].at_ns


def test_a_stream_read_fully_is_heard_chunk_by_chunk(server: OpenAIServer) -> None:
    probe = Probe()
    with wire.intercept([probe]):
        stream = _client(server).chat.completions.create(model="m", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
        pieces = [c.choices[0].delta.content for c in stream if c.choices]
    (heard,) = probe.calls
    assert heard.responses[0].is_event_stream
    body = b"".join(heard.chunks)
    assert body.endswith(b"data: [DONE]\n\n")
    assert "".join(p or "" for p in pieces) == answer_text({"messages": MESSAGES})
    assert body.count(b"data: ") == len(pieces) + 1
    assert [e.kind for e in heard.ends] == [OutcomeKind.COMPLETED]


def test_a_stream_closed_early_ends_once_as_closed_early(server: OpenAIServer) -> None:
    probe = Probe()
    with wire.intercept([probe]):
        stream = _client(server).chat.completions.create(model="m", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
        for _chunk in stream:
            break
        stream.close()
        stream.close()
    (heard,) = probe.calls
    assert [e.kind for e in heard.ends] == [OutcomeKind.CLOSED_EARLY]


def test_a_stream_dropped_unclosed_ends_once_when_collected(server: OpenAIServer) -> None:
    probe = Probe()
    with wire.intercept([probe]):
        stream = _client(server).chat.completions.create(model="m", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
        next(iter(stream))
        del stream
        for _ in range(3):
            gc.collect()
    (heard,) = probe.calls
    assert [e.kind for e in heard.ends] == [OutcomeKind.CLOSED_EARLY]


def test_a_transport_error_ends_the_call_as_failed_with_its_kind() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    probe = Probe()
    with wire.intercept([probe]), pytest.raises(openai.APIConnectionError):
        openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=0).chat.completions.create(
            model="m", messages=MESSAGES)  # type: ignore[arg-type]
    (heard,) = probe.calls
    assert heard.responses == []
    (end,) = heard.ends
    assert end.kind is OutcomeKind.FAILED and end.failure is FailureKind.CONNECT
    assert end.error_type == f"{SDK_LIBRARY}.ConnectError"


def test_an_error_status_is_a_completed_call_with_its_status(server: OpenAIServer) -> None:
    server.fail_next(429)
    probe = Probe()
    with wire.intercept([probe]), pytest.raises(openai.RateLimitError):
        _client(server).chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    (heard,) = probe.calls
    assert heard.responses[0].status == 429
    assert [e.kind for e in heard.ends] == [OutcomeKind.COMPLETED]


def test_concurrent_async_calls_each_have_their_own_observer(server: OpenAIServer) -> None:
    probe = Probe()

    async def three() -> list[str | None]:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)
        replies = await asyncio.gather(*(
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"call {n}"}])
            for n in range(3)))
        await client.close()
        return [r.choices[0].message.content for r in replies]

    with wire.intercept([probe]):
        contents = asyncio.run(three())
    assert len(probe.calls) == 3
    heard_contents = {json.loads(b"".join(h.chunks))["choices"][0]["message"]["content"] for h in probe.calls}
    assert heard_contents == set(contents)
    assert all([e.kind for e in h.ends] == [OutcomeKind.COMPLETED] for h in probe.calls)


def test_an_async_stream_closed_early_ends_once(server: OpenAIServer) -> None:
    probe = Probe()

    async def first_piece() -> None:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
        async for _chunk in stream:
            break
        await stream.close()
        await client.close()

    with wire.intercept([probe]):
        asyncio.run(first_piece())
    assert [e.kind for e in probe.calls[0].ends] == [OutcomeKind.CLOSED_EARLY]


def test_clients_built_before_the_block_and_user_transports_are_covered(http: ModuleType) -> None:
    answered: list[str] = []

    def handler(request: Any) -> Any:
        answered.append(request.url.path)
        return http.Response(200, json={"ok": True})

    before = http.Client(transport=http.MockTransport(handler))
    mounted = http.Client(mounts={"http://mounted.test": http.MockTransport(handler)})
    probe = Probe()
    with wire.intercept([probe]):
        before.get("http://mock.test/a")
        mounted.get("http://mounted.test/b")
    before.get("http://mock.test/c")
    assert [h.request.path for h in probe.calls] == ["/a", "/b"]
    assert answered == ["/a", "/b", "/c"]
    assert all(h.chunks == [b'{"ok":true}'] for h in probe.calls)


def test_layers_stack_and_install_is_idempotent(http: ModuleType) -> None:
    first, second = Probe(), Probe()
    client = http.Client(transport=http.MockTransport(lambda r: http.Response(204)))
    layer = wire.WireLayer((first,))
    wire.install(layer)
    wire.install(layer)
    try:
        with wire.intercept([second]):
            client.get("http://mock.test/")
        assert wire.installed() == (layer,)
        client.get("http://mock.test/")
    finally:
        wire.uninstall(layer)
        wire.uninstall(layer)
    assert wire.installed() == ()
    assert http.Client._transport_for_url.__name__ == "_transport_for_url"
    assert http.AsyncClient._transport_for_url.__name__ == "_transport_for_url"
    assert (len(first.calls), len(second.calls)) == (2, 1)


def test_an_explicit_observed_transport_keeps_its_observers_and_joins_installed_ones(http: ModuleType) -> None:
    own, installed = Probe(), Probe()
    transport = transports(http).ObservedTransport(http.MockTransport(lambda r: http.Response(204)), [own])
    client = http.Client(transport=transport)
    client.get("http://mock.test/1")
    with wire.intercept([installed]):
        client.get("http://mock.test/2")
    assert [h.request.path for h in own.calls] == ["/1", "/2"]
    assert [h.request.path for h in installed.calls] == ["/2"]


def test_a_request_repr_shows_no_credential_query_or_body(server: OpenAIServer) -> None:
    probe = Probe()
    with wire.intercept([probe]):
        _client(server).chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    request = probe.calls[0].request
    assert request.header("Authorization") == f"Bearer {KEY}"
    shown = repr(request)
    assert KEY not in shown and "latte" not in shown and "authorization" in shown


def test_an_observer_that_raises_fails_the_call_and_every_started_observer_hears_the_end(http: ModuleType) -> None:
    other = Probe()

    class Broken:
        def start(self, request: WireRequest) -> None:
            raise RuntimeError("cannot write")

    client = http.Client(transport=http.MockTransport(lambda r: http.Response(204)))
    with wire.intercept([other, Broken()]), pytest.raises(RuntimeError):
        client.get("http://mock.test/")
    assert [e.kind for e in other.calls[0].ends] == [OutcomeKind.FAILED]
