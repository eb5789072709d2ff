"""A third-party HTTP client span keeps its meaning whatever HTTP conventions it was written
in: written as the contrib HTTP instrumentations write it (`opentelemetry-instrumentation`'s
own attribute helpers, which write `http.method`, `http.url` and `http.status_code` unless
`OTEL_SEMCONV_STABILITY_OPT_IN` says `http`), it leaves `configure()`'s pipeline with its
method, status, server, port and path in the stable names, and never with its URL's query."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.instrumentation._semconv import (
    _set_http_method,
    _set_http_url,
    _set_status,
    _StabilityMode,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import cafe_otel
from cafe_otel import semconv as sc
from cafe_otel._privacy.processor import SpanSanitiser

SECRET_QUERY = "api-key=CANARY-in-the-query"


@pytest.mark.parametrize("mode", [_StabilityMode.DEFAULT, _StabilityMode.HTTP, _StabilityMode.HTTP_DUP],
                         ids=["default", "stable", "both"])
@pytest.mark.parametrize("status", [200, 429])
def test_an_http_client_span_leaves_in_the_stable_names(mode: _StabilityMode, status: int):
    sink = InMemorySpanExporter()
    handle = cafe_otel.configure("svc", exporter=sink, environ={}, set_global=False, metrics=False)
    tracer = handle.provider.get_tracer("opentelemetry.instrumentation.httpx")
    url = f"http://127.0.0.1:8123/v1/chat/completions?{SECRET_QUERY}"
    attributes: dict[str, Any] = {}
    _set_http_method(attributes, "POST", "POST", mode)
    _set_http_url(attributes, url, mode)
    with tracer.start_as_current_span("POST", kind=SpanKind.CLIENT, attributes=attributes) as span:
        _set_status(span, {}, status, str(status), server_span=False, sem_conv_opt_in_mode=mode)
    handle.shutdown(2.0)
    [exported] = sink.get_finished_spans()
    # Under the stable conventions a failed status is also the span's error.type, and stays.
    failed = {sc.ERROR_TYPE: "429"} if status >= 400 and mode is not _StabilityMode.DEFAULT else {}
    assert dict(exported.attributes or {}) == {
        sc.HTTP_REQUEST_METHOD: "POST", sc.HTTP_RESPONSE_STATUS_CODE: status,
        sc.SERVER_ADDRESS: "127.0.0.1", sc.SERVER_PORT: 8123, sc.URL_PATH: "/v1/chat/completions", **failed}
    assert "CANARY" not in exported.to_json()


def test_what_the_span_already_says_in_stable_names_is_kept_and_nothing_unsafe_is_derived():
    sanitiser = SpanSanitiser()
    kept = sanitiser.attributes({"url.full": "https://api.openai.com/v1/responses?k=1", "server.address": "proxy",
                                 "http.method": "BREW", "net.peer.port": 70_000,
                                 "http.url": "https://user:sk-proj-" + "a1" * 24 + "@api.example/v1/x"})
    # The span's own server.address wins; an unknown method and an impossible port are
    # withheld by their shapes; the userinfo of a URL is never read.
    assert kept == {sc.SERVER_ADDRESS: "proxy", sc.SERVER_PORT: 443, sc.URL_PATH: "/v1/responses"}
    assert sanitiser.attributes({"http.url": "http://[::1"}) == {}  # no URL: nothing derived
