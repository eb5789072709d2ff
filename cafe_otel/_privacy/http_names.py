"""A third-party HTTP client span written under the default (pre-stable) HTTP conventions,
in the stable names the metadata-only check lets through.

The contrib HTTP instrumentations write `http.method`, `http.url` and `http.status_code`
unless `OTEL_SEMCONV_STABILITY_OPT_IN` says `http`: none of those is on the allowlist (the
URL holds the query, where credentials travel), so such a span would leave as a bare `POST`.
Each is read here as the stable attribute it stands for: the method and status as
`http.request.method` and `http.response.status_code`, the URL (old or stable, `url.full`)
as its `server.address`, `server.port` and `url.path`, never its query. What is derived then
meets the same shapes and secret checks as any attribute, and never replaces one the span
already carries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from cafe_otel import semconv as sc

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _url_parts(value: Any) -> dict[str, Any]:
    if not isinstance(value, str):
        return {}
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:  # not a URL a client could have sent: nothing to read from it
        return {}
    found: dict[str, Any] = {}
    if parts.hostname:
        found[sc.SERVER_ADDRESS] = parts.hostname
        found[sc.SERVER_PORT] = port if port is not None else _DEFAULT_PORTS.get(parts.scheme)
    if parts.path:
        found[sc.URL_PATH] = parts.path
    return {key: item for key, item in found.items() if item is not None}


def _as(key: str) -> Callable[[Any], dict[str, Any]]:
    return lambda value: {key: value}


# A pre-stable name -> what it says in stable names.
DERIVED: dict[str, Callable[[Any], dict[str, Any]]] = {
    sc.HTTP_METHOD_OLD: _as(sc.HTTP_REQUEST_METHOD),
    sc.HTTP_STATUS_CODE_OLD: _as(sc.HTTP_RESPONSE_STATUS_CODE),
    sc.HTTP_URL_OLD: _url_parts,
    sc.URL_FULL: _url_parts,
    sc.NET_PEER_NAME_OLD: _as(sc.SERVER_ADDRESS),
    sc.NET_PEER_PORT_OLD: _as(sc.SERVER_PORT),
}


def stable_names(key: str, value: Any) -> dict[str, Any]:
    """What the attribute `key` says in the stable names (empty for any other key)."""
    derive = DERIVED.get(key)
    return derive(value) if derive is not None else {}
