"""The baseline a user would otherwise pick for replay: VCR.py cassettes of the `openai` SDK.

The cassette is recorded by VCR.py itself from the SDK's real HTTP traffic: the synthetic
calls are made with `client.chat.completions.create(...)` against a throwaway OpenAI-shaped
server on 127.0.0.1 that answers each request with the synthetic response. openai 3.x speaks
HTTP through `httpx2`, and vcrpy 9.4.2 patches `httpx2.HTTPTransport.handle_request` (the
SDK's default transport), so no adapter is involved. Replay then runs with the server gone:
a request VCR.py failed to intercept would fail to connect, so a completed replay is proof
that every call was served from the cassette.

While recording, VCR.py scans the whole cassette for a match before each request (even in
record mode `all`); recording uses a matcher that never matches so that scan stays cheap.
Replay matches on method, path and body, as a user who wants a changed prompt to fail would.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import openai
import vcr

from bench.synthetic import SyntheticCall

MATCH_ON = ("method", "path", "body")
API_KEY = "sk-bench-not-a-real-key-000000"


def _never(_recorded: Any, _incoming: Any) -> bool:
    return False


def _completion(response: dict[str, Any]) -> dict[str, Any]:
    """The synthetic response as the full body an OpenAI server returns."""
    return {
        "id": response["id"],
        "object": "chat.completion",
        "created": 1_767_225_600,
        "model": response["model"],
        "choices": [{**choice, "logprobs": None} for choice in response["choices"]],
        "usage": response["usage"],
        "system_fingerprint": "fp_bench",
    }


class _FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, responses: Sequence[dict[str, Any]]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.responses = list(responses)
        self.served = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: _FakeOpenAI
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps(_completion(self.server.responses[self.server.served])).encode()
        self.server.served += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def sdk_client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(api_key=API_KEY, base_url=base_url, max_retries=0, timeout=30.0)


def _create(client: openai.OpenAI, call: SyntheticCall) -> Any:
    return client.chat.completions.create(
        model="gpt-4o-mini", messages=call.messages, tools=call.tools, temperature=call.temperature
    )


def record_cassette(path: Path, calls: Sequence[SyntheticCall]) -> str:
    """Record `calls` through the SDK into a VCR.py cassette at `path`; returns the base URL
    the cassette holds (replay must use the same one, as a real test suite does)."""
    server = _FakeOpenAI([call.response for call in calls])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    recorder = vcr.VCR(record_mode="all", filter_headers=["authorization"])
    recorder.register_matcher("never", _never)
    try:
        client = sdk_client(server.base_url)
        with recorder.use_cassette(str(path), match_on=["never"]) as cassette:
            for call in calls:
                _create(client, call)
        if len(cassette.data) != len(calls) or server.served != len(calls):
            raise RuntimeError(f"recorded {len(cassette.data)} of {len(calls)} calls")
        client.close()
        return server.base_url
    finally:
        server.shutdown()
        server.server_close()


def replay_seconds(path: Path, base_url: str, calls: Sequence[SyntheticCall]) -> tuple[float, float]:
    """(seconds entering the cassette, i.e. loading it; seconds for the SDK calls) for
    replaying `calls` in order: all the cassette's calls, or an in-order sample of them."""
    player = vcr.VCR(record_mode="none", filter_headers=["authorization"])
    client = sdk_client(base_url)
    context = player.use_cassette(str(path), match_on=list(MATCH_ON))
    completion = None
    try:
        start = time.perf_counter()
        cassette = context.__enter__()
        entered = time.perf_counter()
        try:
            for call in calls:
                completion = _create(client, call)
            done = time.perf_counter()
        finally:
            context.__exit__(None, None, None)
    finally:
        client.close()
    if cassette.play_count != len(calls):
        raise RuntimeError(f"VCR.py served {cassette.play_count} of {len(calls)} calls")
    if completion is not None and completion.id != calls[-1].response["id"]:
        raise RuntimeError("VCR.py served the wrong response for the last call")
    return entered - start, done - entered

