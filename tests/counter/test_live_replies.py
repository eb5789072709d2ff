"""Whatever a live endpoint answers, `cafe shift` ends with one stderr line and a documented
exit code: 0 when the reply is usable, 21 when it is not. Never 70, never a traceback."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cafe.cli import main
from cafe.counter.cli import plugin as COUNTER
from cafe.counter.clients.reply import MalformedReply, reduce_reply

pytestmark = pytest.mark.local_server  # a server on 127.0.0.1 plays the endpoint

KEY = "sk-test-replies-0123456789"
DOCUMENTED = {0, 21}


class Server:
    """127.0.0.1; every POST gets `body` (bytes) with `content_type`."""

    def __init__(self) -> None:
        self.body = b"{}"
        self.content_type = "application/json"
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", server.content_type)
                self.send_header("Content-Length", str(len(server.body)))
                self.end_headers()
                self.wfile.write(server.body)

            def log_message(self, *args: Any) -> None:
                return None

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"
        threading.Thread(target=self.http.serve_forever, args=(0.05,), daemon=True).start()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    found = Server()
    yield found
    found.http.shutdown()
    found.http.server_close()


def _shift(server: Server, body: bytes, content_type: str = "application/json") -> tuple[int, str, str]:
    server.body, server.content_type = body, content_type
    environ = {"COURSE_MODE": "live", "CAFE_BASE_URL": server.url, "CAFE_API_KEY": KEY, "CAFE_MODEL": "m-1"}
    out, err = io.StringIO(), io.StringIO()
    code = main(["shift", "--seed", "1", "--max-turns", "3"], environ=environ, out=out, err=err,
                load_plugins=lambda warn: [COUNTER])
    return code, out.getvalue(), err.getvalue()


def _valid(**message: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m-1",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello!", **message},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}


def _assert_one_line_documented(code: int, err: str) -> None:
    assert code in DOCUMENTED, err
    assert "Traceback" not in err and KEY not in err
    assert err.count("\n") == (0 if code == 0 else 1), err


@pytest.mark.parametrize(("name", "body", "field"), [
    ("HTML from a proxy", b"<html><body>502 Bad Gateway</body></html>", "$"),
    ("cut-off JSON", json.dumps(_valid()).encode()[:40], "$"),
    ("NaN", json.dumps(_valid()).replace('"total_tokens": 5', '"total_tokens": NaN').encode(), "$"),
    ("choices of the wrong type", json.dumps({**_valid(), "choices": {"0": 1}}).encode(), "choices"),
    ("a tool call with no name", json.dumps(_valid(content=None, tool_calls=[
        {"id": "c1", "type": "function", "function": {"arguments": "{}"}}])).encode(),
     "choices[0].message.tool_calls[0].function.name"),
    ("null usage", json.dumps({**_valid(), "usage": None}).encode(), "usage"),
    ("a lone surrogate", json.dumps(_valid(content="\ud800 hi")).encode(), "choices[0].message.content"),
    ("a message that is a string", json.dumps({**_valid(), "choices": [{"message": "hi"}]}).encode(),
     "choices[0].message"),
])
def test_each_malformed_reply_is_exit_21_naming_its_field(server, name, body, field):
    code, _, err = _shift(server, body, "text/html" if body.startswith(b"<html") else "application/json")
    assert code == 21, (name, err)
    _assert_one_line_documented(code, err)
    assert f"malformed reply: {field}: expected" in err


def test_a_good_reply_still_works(server):
    code, out, err = _shift(server, json.dumps(_valid()).encode())
    assert code == 0 and err == "" and "assistant: Hello!" in out


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
_PATHS = [("choices",), ("usage",), ("id",), ("model",), ("choices", 0), ("choices", 0, "message"),
          ("choices", 0, "message", "content"), ("choices", 0, "message", "role"), ("choices", 0, "finish_reason"),
          ("choices", 0, "index"), ("usage", "prompt_tokens"), ("usage", "total_tokens")]


def _set(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    target: Any = body
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return body


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(_PATHS), value=_JSON)
def test_any_field_of_any_shape_ends_in_a_documented_code(server, path, value):
    body = _set(_valid(), path, value)
    code, _, err = _shift(server, json.dumps(body).encode())
    _assert_one_line_documented(code, err)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=200) | _JSON.map(lambda value: json.dumps(value).encode()))
def test_any_body_at_all_ends_in_a_documented_code(server, body):
    code, _, err = _shift(server, body)
    _assert_one_line_documented(code, err)


@given(value=_JSON)
@settings(max_examples=200, deadline=None)
def test_what_the_checker_passes_is_what_the_harness_relies_on(value):
    try:
        reduced = reduce_reply(value, "127.0.0.1")
    except MalformedReply:
        return
    json.dumps(reduced).encode("utf-8")  # JSON- and UTF-8-safe, as a recording needs
    assert reduced["choices"] and all(isinstance(c["message"], dict) for c in reduced["choices"])


@pytest.mark.parametrize(("url", "problem"), [
    ("http://127.0.0.1:99999/v1", "the port is not a number from 1 to 65535"),
    ("http://user:hunter2pass@[::1/v1", "unbalanced [ ] around an IPv6 address"),
    ("http://host:port/v1", "the port is not a number from 1 to 65535"),
    ("ftp://host/v1", "scheme 'ftp' is not http or https"),
    ("127.0.0.1:8000", "scheme '' is not http or https"),
    ("http:///v1", "the URL has no host"),
    ("http://127.0.0.1:0/v1", "port 0 is not a port to send to"),
    ("http://127.0.0.1:80 /v1", "the URL has a space or control character"),
])
def test_a_bad_base_url_is_one_configuration_error_that_never_repeats_it(url, problem):
    environ = {"COURSE_MODE": "live", "CAFE_BASE_URL": url, "CAFE_API_KEY": KEY, "CAFE_MODEL": "m-1"}
    out, err = io.StringIO(), io.StringIO()
    code = main(["shift"], environ=environ, out=out, err=err, load_plugins=lambda warn: [COUNTER])
    assert code == 20 and err.getvalue().count("\n") == 1
    assert err.getvalue().startswith(f"cafe: error: CAFE_BASE_URL: {problem}; ")
    assert "hunter2pass" not in err.getvalue()
