"""What `WireRecorder` writes is scrubbed: the request's own credentials wherever they appear
(in either body, raw, JSON-escaped or spelled with needless escapes) and the secret patterns,
whichever of the two the recorder or the writer catches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from cafe.wire import ObservedTransport, WireRecorder

# No pattern keyword in it: only the request's own credentials can catch it.
KEY = "Zq7pW2mX9vR4tL8nB3cY"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def record(tmp_path: Path, content: str, echoed: str) -> str:
    """One SDK call whose message is `content`, answered with `echoed`: the recording's text."""
    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json={
            "id": "c1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": echoed}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    path = tmp_path / "wire.jsonl"
    recorder = WireRecorder(path, mode="all")
    http_client = httpx2.Client(transport=ObservedTransport(httpx2.MockTransport(answer), [recorder]))
    client = openai.OpenAI(api_key=KEY, base_url="http://wire.invalid/v1", max_retries=0, http_client=http_client)
    messages: Any = [{"role": "user", "content": content}]
    client.chat.completions.create(model="m", messages=messages)
    recorder.close()
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("content", [
    f"my key is {KEY}",
    json.dumps({"api": KEY}),  # JSON inside a string: the key escaped once more
    "needless escapes: \\u005a" + KEY[1:],  # the key spelled with a `\u005a` for its `Z`
    "café, " + KEY,  # a line with non-ASCII text
])
def test_the_requests_own_key_is_scrubbed_from_request_and_response(tmp_path: Path, content: str) -> None:
    text = record(tmp_path, content, echoed=f"you said {content}")
    assert KEY not in text
    assert KEY[1:] not in text
    call = json.loads(text.splitlines()[1])
    assert "[REDACTED]" in call["request"]["messages"][0]["content"]
    assert "[REDACTED]" in call["response"]["choices"][0]["message"]["content"]


def test_a_pattern_secret_is_scrubbed_from_a_line_without_the_key(tmp_path: Path) -> None:
    text = record(tmp_path, f"token {GITHUB_TOKEN}", echoed=f"noted {GITHUB_TOKEN}")
    assert GITHUB_TOKEN not in text
    assert text.count("[REDACTED]") >= 2


def test_a_line_without_secrets_is_kept_as_sent(tmp_path: Path) -> None:
    text = record(tmp_path, "A flat white, please.", echoed="Coming up.")
    call = json.loads(text.splitlines()[1])
    assert call["request"]["messages"] == [{"role": "user", "content": "A flat white, please."}]
    assert call["response"]["choices"][0]["message"]["content"] == "Coming up."
    assert "[REDACTED]" not in text
