"""What of an HTTP exchange a recording keeps, and how its bodies read back.

Headers are kept by allowlist: the request headers that change the answer, the response
headers the SDK reads. Credentials (`authorization`, `api-key`, cookies, anything named like
a key, a token or a secret) are never kept, whatever a list says.
"""

from __future__ import annotations

import base64
import re
import sys
import zlib
from collections.abc import Iterable
from typing import Any

import orjson

from cafe.privacy import URL_CREDENTIAL_NAMES, secret_key
from cafe.wire._types import Headers

# Request headers that change what the server answers.
REQUEST_HEADERS = frozenset({"content-type", "accept", "openai-beta", "openai-version", "anthropic-version",
                             "anthropic-beta", "x-model", "api-version"})
# Response headers the `openai` SDK reads: the body's type, the request id it reports, and
# the retry advice it follows.
RESPONSE_HEADERS = frozenset({"content-type", "x-request-id", "request-id", "openai-processing-ms",
                              "openai-version", "openai-model", "retry-after", "retry-after-ms", "x-should-retry"})
_RESPONSE_PREFIXES = ("x-ratelimit-",)
_CREDENTIAL = re.compile(r"auth|cookie|key|token|secret|password|credential|session", re.IGNORECASE)
_DECODED_ENCODINGS = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}


# A query parameter (or a form field) that carries a credential: named like one (as a header
# is), or one of the signed-URL and OAuth names that hold no such word (`code`, `sig`,
# `X-Amz-Signature`, `Policy`, ...), the names the scrubber also looks for in a URL in text.
_QUERY_CREDENTIAL = re.compile(f"(?i:{URL_CREDENTIAL_NAMES})")


_CREDENTIAL_NAMES: dict[str, bool] = {}


def is_credential(name: str) -> bool:
    # Every call carries the same few header names: remember the answer per name.
    known = _CREDENTIAL_NAMES.get(name)
    if known is None:
        known = _CREDENTIAL.search(name) is not None
        if len(_CREDENTIAL_NAMES) < 4096:
            _CREDENTIAL_NAMES[name] = known
    return known


def is_query_credential(name: str) -> bool:
    """Whether a query parameter of this name carries a credential."""
    return is_credential(name) or _QUERY_CREDENTIAL.fullmatch(name) is not None


def is_form_credential(name: str) -> bool:
    """Whether a form field of this name carries a credential: named as a JSON key that holds
    a secret is (`api_key`, `password`), or as a URL's credential is (`code`, `signature`).
    Not any name holding a key word: a form's `max_tokens` is what the request asks for."""
    return secret_key(name) or _QUERY_CREDENTIAL.fullmatch(name) is not None


def recorded_request_headers(headers: Headers, *, decoded: bool = True) -> dict[str, str]:
    """The request headers a recording keeps (allowlisted; credentials never). Without
    `decoded`, the body is kept in a content encoding cafe cannot undo, so its
    `content-encoding` is kept too, to say what the bytes are."""
    return {name: value for name, value in headers
            if (name in REQUEST_HEADERS or (name == "content-encoding" and not decoded)) and not is_credential(name)}


def request_body(body: bytes, encoding: str | None) -> tuple[bytes, bool]:
    """A request body as a recording keeps it and a replay compares it: with a content
    encoding cafe can undo undone (then a compressed JSON body is kept, scrubbed and compared
    as JSON), and whether it is so (False: kept as sent, in an encoding cafe cannot undo)."""
    if not encoding or not encoding.strip() or not body:
        return body, True
    decoded = decoded_body(body, encoding)
    return (body, False) if decoded is None else (decoded, True)


def recorded_response_headers(headers: Headers, *, decoded: bool) -> dict[str, str]:
    """The response headers a recording keeps. With `decoded`, the body is kept decoded, so
    its `content-encoding` (and length) are not."""
    kept = {}
    for name, value in headers:
        if is_credential(name):
            continue
        if name in RESPONSE_HEADERS or name.startswith(_RESPONSE_PREFIXES) or (
                name == "content-encoding" and not decoded):
            kept[name] = value
    return kept


def credential_values(headers: Headers) -> list[str]:
    """The secrets a request carries in its headers (the API key of `Bearer KEY`), so that a
    recording scrubs them wherever else they appear."""
    secrets = []
    for name, value in headers:
        if is_credential(name) and value:
            secrets.append(value)
            scheme, _, token = value.partition(" ")
            if token and scheme.lower() in ("bearer", "basic", "token"):
                secrets.append(token.strip())
    return secrets


class _Inflate:
    def __init__(self, wbits: int) -> None:
        self._inflate = zlib.decompressobj(wbits)

    def decode(self, data: bytes) -> bytes:
        return self._inflate.decompress(data)

    def flush(self) -> bytes:
        return self._inflate.flush()


def _decoder(name: str) -> Any | None:
    """A chunk-by-chunk decoder of one content coding: gzip and deflate here, any other that
    a covered client library the program imported undoes for its callers (`br` with brotli,
    `zstd` with zstandard): a body such a library decoded for its caller is one cafe can read."""
    if name in _DECODED_ENCODINGS:
        return _Inflate(_DECODED_ENCODINGS[name])
    if name in ("", "identity"):
        return None
    for library in ("httpx2", "httpx"):  # cafe.wire._libraries.LIBRARIES
        if library not in sys.modules:
            continue
        table = getattr(sys.modules.get(f"{library}._decoders"), "SUPPORTED_DECODERS", None)
        found = table.get(name) if isinstance(table, dict) else None
        if found is not None:
            return found()
    return None


class BodyDecoder:
    """Undoes a body's `content-encoding` chunk by chunk (gzip and deflate, one or several,
    and whatever else httpx or httpx2 undoes here), so a recording keeps text the scrubber and the
    pages can read. A body in an encoding cafe cannot undo is kept as sent (`active` False)."""

    def __init__(self, encoding: str | None) -> None:
        names = [name.strip().lower() for name in (encoding or "").split(",") if name.strip()]
        found = [_decoder(name) for name in reversed(names) if name != "identity"]
        decoders = [decoder for decoder in found if decoder is not None]
        self.active = bool(found) and len(decoders) == len(found)
        self._decoders = decoders if self.active else []

    def decode(self, data: bytes) -> bytes:
        for decoder in self._decoders:
            data = decoder.decode(data)
        return data

    def flush(self) -> bytes:
        data = b""
        for decoder in self._decoders:
            data = decoder.decode(data) + decoder.flush() if data else decoder.flush()
        return data


def decoded_body(data: bytes, encoding: str) -> bytes | None:
    """A whole body with its `content-encoding` undone, or None when cafe cannot undo it."""
    decoder = BodyDecoder(encoding)
    if not decoder.active:
        return None
    try:
        return decoder.decode(data) + decoder.flush()
    except Exception:  # zlib.error, a decoder's own: not the encoding it says
        return None


def payload(data: bytes) -> dict[str, str]:
    """Bytes as a recording holds them: text when they are UTF-8, else base64."""
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def payload_bytes(held: dict[str, Any]) -> bytes:
    text = held.get("text")
    if isinstance(text, str):
        return text.encode("utf-8", "surrogatepass")
    return base64.b64decode(str(held.get("base64", "")))


def json_object(data: bytes) -> dict[str, Any] | None:
    if not data:
        return None
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def sse_data(text: str) -> Iterable[str]:
    """The `data` of each complete event in a text/event-stream body."""
    for block in re.split(r"\r\n\r\n|\n\n|\r\r", text):
        lines = [line[5:].lstrip(" ") if line.startswith("data:") else None for line in re.split(r"\r\n|\n|\r", block)]
        data = [line for line in lines if line is not None]
        if data:
            yield "\n".join(data)

