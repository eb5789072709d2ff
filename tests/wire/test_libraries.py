"""The client libraries the seam covers (`cafe.wire._libraries`): each patched only once its
users import it, and one recording format for all of them: a recording made through httpx
(Groq's SDK, openai 1.x) replays through httpx2 (openai 3.x), and the other way round."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

import cafe.wire as wire
from cafe.recording import load_recording
from cafe.recording.errors import ReplayMismatch
from tests.wire.libraries import SDK_LIBRARY
from tests.wire.openai_server import OpenAIServer

KEY = "sk-test-libraries-0123456789abcdef"
MESSAGES: Any = [{"role": "user", "content": "A latte, please."}]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer.running() as running:
        yield running


def _python(program: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


def test_the_seam_imports_no_http_library_until_the_program_does() -> None:
    lines = _python(
        "import sys\n"
        "import cafe.wire as wire\n"
        "with wire.intercept([]):\n"
        "    print(sorted(name for name in ('httpx', 'httpx2') if name in sys.modules), wire._intercept.patched())\n"
        "print(sorted(name for name in ('httpx', 'httpx2') if name in sys.modules))\n")
    assert lines == ["[] ()", "[]"]


@pytest.mark.parametrize("library", [name for name in ("httpx", "httpx2") if importlib.util.find_spec(name)])
def test_a_library_imported_inside_the_block_is_covered_and_left_as_it_was_after(library: str) -> None:
    lines = _python(
        "import sys\n"
        "import cafe.wire as wire\n"
        "heard = []\n"
        "class Probe:\n"
        "    def start(self, request):\n"
        "        heard.append(request.path)\n"
        "with wire.intercept([Probe()]):\n"
        f"    import {library} as http\n"
        "    client = http.Client(transport=http.MockTransport(lambda request: http.Response(204)))\n"
        "    client.get('http://mock.test/inside')\n"
        "    print(wire._intercept.patched())\n"
        "client.get('http://mock.test/after')\n"
        "print(heard, http.Client._transport_for_url.__name__, http.AsyncClient._transport_for_url.__name__)\n"
        "print([type(finder).__name__ for finder in sys.meta_path if type(finder).__module__.startswith('cafe')])\n")
    assert lines == [f"('{library}',)", "['/inside'] _transport_for_url _transport_for_url", "[]"]


# --- one recording, any library: Groq's SDK on httpx beside openai on the SDK's library -----------

groq: Any = importlib.import_module("groq") if importlib.util.find_spec("groq") else None


def _origin(server: OpenAIServer) -> str:
    return f"http://127.0.0.1:{server.port}"


def _groq(server: OpenAIServer, **extra: Any) -> str | None:
    assert groq is not None
    client = groq.Groq(base_url=_origin(server), api_key=KEY, max_retries=0)
    return client.chat.completions.create(model="m", messages=MESSAGES, **extra).choices[0].message.content


def _openai(server: OpenAIServer, **extra: Any) -> str | None:
    # The path Groq's SDK sends to: the same request on the wire.
    client = openai.OpenAI(base_url=f"{_origin(server)}/openai/v1", api_key=KEY, max_retries=0)
    return client.chat.completions.create(model="m", messages=MESSAGES, **extra).choices[0].message.content


needs_two_libraries = pytest.mark.skipif(groq is None or SDK_LIBRARY == "httpx",
                                         reason="Groq's SDK (httpx) beside an openai on httpx2 is not installed")
SDKS: dict[str, Callable[..., str | None]] = {"groq": _groq, "openai": _openai}


@needs_two_libraries
@pytest.mark.parametrize(("recorded_by", "replayed_by"), [("groq", "openai"), ("openai", "groq")])
def test_a_recording_made_through_one_library_replays_through_the_other(
        server: OpenAIServer, tmp_path: Path, recorded_by: str, replayed_by: str) -> None:
    path = tmp_path / "agent.jsonl"
    with wire.record(path):
        live = [SDKS[recorded_by](server, max_tokens=5), SDKS[recorded_by](server, max_tokens=7)]
    with wire.replay(path) as source:
        replayed = [SDKS[replayed_by](server, max_tokens=5), SDKS[replayed_by](server, max_tokens=7)]
    assert replayed == live and source.served == 2
    assert server.count == 2
    with pytest.raises(ReplayMismatch) as caught, wire.replay(path):
        SDKS[replayed_by](server, max_tokens=6)
    assert "$.max_tokens" in str(caught.value) and "\n" not in str(caught.value)


@needs_two_libraries
def test_one_recording_keeps_the_calls_of_both_libraries_in_the_order_they_were_made(
        server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "both.jsonl"
    with wire.record(path):
        live = [_groq(server, max_tokens=3), _openai(server, max_tokens=4), _groq(server, max_tokens=5)]
    assert [call.request["max_tokens"] for call in load_recording(path).calls] == [3, 4, 5]
    with wire.replay(path) as source:
        assert [_groq(server, max_tokens=3), _openai(server, max_tokens=4), _groq(server, max_tokens=5)] == live
    assert source.served == 3 and server.count == 3


@pytest.mark.skipif(groq is None, reason="Groq's SDK is not installed")
def test_groqs_streamed_and_concurrent_calls_record_and_replay_with_no_request(server: OpenAIServer,
                                                                                tmp_path: Path) -> None:
    assert groq is not None

    def streamed() -> list[str]:
        stream = groq.Groq(base_url=_origin(server), api_key=KEY, max_retries=0).chat.completions.create(
            model="m", messages=MESSAGES, stream=True)
        return [chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices]

    def gathered() -> list[str | None]:
        async def three() -> list[str | None]:
            client = groq.AsyncGroq(base_url=_origin(server), api_key=KEY, max_retries=0)
            replies = await asyncio.gather(*(client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"order {n}"}]) for n in range(3)))
            await client.close()
            return [reply.choices[0].message.content for reply in replies]
        return asyncio.run(three())

    path = tmp_path / "groq.jsonl"
    with wire.record(path):
        live = (streamed(), gathered())
    assert server.count == 4 and "".join(live[0])
    with wire.replay(path) as source:
        assert (streamed(), gathered()) == live
    assert source.served == 4 and server.count == 4
