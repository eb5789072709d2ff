"""A third-party HTTP client span keeps its meaning under the default HTTP conventions: the
real `opentelemetry-instrumentation-httpx`, which writes `http.method`, `http.url` and
`http.status_code` unless `OTEL_SEMCONV_STABILITY_OPT_IN` says otherwise, leaves
`configure()`'s pipeline with its method, status, server, port and path in the stable names,
and never with its URL's query."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import cafe_otel
from cafe_otel import semconv as sc
from cafe_otel._privacy.processor import SpanSanitiser
from tests.local_http import QuietHandler, serving

SECRET_QUERY = "api-key=CANARY-in-the-query"


class _Answers(QuietHandler):
    def do_POST(self) -> None:
        self.read_body()
        self.answer(429 if "busy" in self.path else 200, b"{}")


@pytest.fixture
def instrumented() -> Iterator[tuple[InMemorySpanExporter, cafe_otel.TelemetryHandle]]:
    sink = InMemorySpanExporter()
    handle = cafe_otel.configure("svc", exporter=sink, environ={}, set_global=False, metrics=False)
    instrumentor = HTTPXClientInstrumentor()
    instrumentor.instrument(tracer_provider=handle.provider)
    try:
        yield sink, handle
    finally:
        instrumentor.uninstrument()
        handle.shutdown(2.0)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/busy"])
def test_a_default_convention_http_span_leaves_in_the_stable_names(instrumented, path: str):
    sink, handle = instrumented
    with serving(_Answers) as port, httpx.Client() as client:
        client.post(f"http://127.0.0.1:{port}{path}?{SECRET_QUERY}", json={"model": "m"})
    handle.force_flush(5.0)
    [span] = sink.get_finished_spans()
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "opentelemetry.instrumentation.httpx"
    assert dict(span.attributes or {}) == {
        sc.HTTP_REQUEST_METHOD: "POST", sc.HTTP_RESPONSE_STATUS_CODE: 429 if "busy" in path else 200,
        sc.SERVER_ADDRESS: "127.0.0.1", sc.SERVER_PORT: port, sc.URL_PATH: path}
    assert "CANARY" not in repr(span.to_json())


def test_what_the_span_already_says_in_stable_names_is_kept_and_nothing_unsafe_is_derived():
    sanitiser = SpanSanitiser()
    kept = sanitiser.attributes({"url.full": "https://api.openai.com/v1/responses?k=1", "server.address": "proxy",
                                 "http.method": "BREW", "net.peer.port": 70_000,
                                 "http.url": "https://user:sk-proj-" + "a1" * 24 + "@api.example/v1/x"})
    # The span's own server.address wins; an unknown method and an impossible port are
    # withheld by their shapes; the userinfo of a URL is never read.
    assert kept == {sc.SERVER_ADDRESS: "proxy", sc.SERVER_PORT: 443, sc.URL_PATH: "/v1/responses"}
    assert sanitiser.attributes({"http.url": "http://[::1"}) == {}  # no URL: nothing derived
