"""What OpenTelemetry users expect of configure(): the global providers (so that any other
instrumentation reports through our pipeline), shapes for their own keys, and a console
exporter for development."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cafe_otel import TelemetryConfigError, configure, int_shape, text_shape
from cafe_otel._privacy.processor import MetadataOnlySpanProcessor
from cafe_otel._privacy.shapes import Shape


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, check=False)


def test_configure_sets_the_global_providers_so_a_third_party_span_goes_through_our_pipeline() -> None:
    done = _run("""
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from cafe_otel import configure

        sink = InMemorySpanExporter()
        handle = configure(exporter=sink, environ={})
        assert handle.is_global and trace.get_tracer_provider() is handle.provider
        # A third-party instrumentation: the global tracer, an attribute it should not send.
        with trace.get_tracer("someone.else").start_as_current_span("GET /menu") as span:
            span.set_attribute("http.request.method", "GET")
            span.set_attribute("db.statement", "SELECT card FROM customers")
        second = configure(exporter=InMemorySpanExporter(), environ={})
        assert not second.is_global and trace.get_tracer_provider() is handle.provider
        handle.shutdown(1.0)
        (found,) = sink.get_finished_spans()
        print(dict(found.attributes))
    """)
    assert done.returncode == 0, done.stderr
    assert "{'http.request.method': 'GET'}" in done.stdout
    assert "Overriding" not in done.stderr  # a second handle stays local, without the API's warning


def test_set_global_false_touches_nothing_global() -> None:
    done = _run("""
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from cafe_otel import configure

        handle = configure(exporter=InMemorySpanExporter(), environ={}, set_global=False, metrics=True,
                           metric_exporter=None, endpoint="http://127.0.0.1:1", protocol="http/protobuf")
        assert not handle.is_global
        assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"
        assert type(metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider"
        handle.shutdown(0.2)
    """)
    assert done.returncode == 0, done.stderr


def test_users_declare_shapes_for_their_own_keys_instead_of_seeing_them_stripped() -> None:
    sink = InMemorySpanExporter()
    handle = configure(exporter=sink, environ={}, set_global=False,
                       shapes={"myapp.tier": text_shape(values={"gold", "silver"}), "myapp.retries": int_shape(0, 10)})
    tracer = handle.provider.get_tracer("myapp")  # type: ignore[union-attr]
    with tracer.start_as_current_span("checkout") as span:
        span.set_attributes({"myapp.tier": "gold", "myapp.retries": 99, "myapp.note": "call me on 555"})
    handle.shutdown(1.0)
    (found,) = sink.get_finished_spans()
    assert dict(found.attributes or {}) == {"myapp.tier": "gold"}  # 99 does not fit; an undeclared key is removed
    assert handle.account.withheld == {"myapp.retries": 1}


@pytest.mark.parametrize(("shapes", "words"), [
    ({"gen_ai.request.model": text_shape(r".*")}, "already has a shape"),
    ({"myapp.body": Shape("content")}, "cannot be content"),
    ({"myapp.x": "anything"}, "is not a cafe_otel.Shape"),
    ({"": int_shape(0, 1)}, "non-empty"),
])
def test_a_shape_that_would_widen_the_guarantee_is_refused_by_name(shapes: dict[str, object], words: str) -> None:
    with pytest.raises(TelemetryConfigError, match=words):
        configure(exporter=InMemorySpanExporter(), environ={}, set_global=False, shapes=shapes)  # type: ignore[arg-type]


def test_the_processor_takes_the_shapes_too() -> None:
    sink = InMemorySpanExporter()
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from cafe_otel._privacy.shapes import SHAPES

    provider = TracerProvider()
    provider.add_span_processor(MetadataOnlySpanProcessor(
        SimpleSpanProcessor(sink), allowlist={"myapp.tier"}, shapes={**SHAPES, "myapp.tier": text_shape(r"[a-z]+")}))
    with provider.get_tracer("t").start_as_current_span("s") as span:
        span.set_attribute("myapp.tier", "gold")
    assert dict(sink.get_finished_spans()[0].attributes or {}) == {"myapp.tier": "gold"}


def test_console_exporter_prints_sanitised_spans_for_development() -> None:
    done = _run("""
        from cafe_otel import configure

        handle = configure(environ={"OTEL_TRACES_EXPORTER": "console"}, set_global=False)
        with handle.provider.get_tracer("dev").start_as_current_span("chat dev-model") as span:
            span.set_attribute("gen_ai.request.model", "dev-model")
            span.set_attribute("prompt", "Zq9CANARY secret words")
        handle.shutdown(1.0)
        print("summary:", handle.account.summary())
    """)
    assert done.returncode == 0, done.stderr
    printed = done.stdout.split("summary:")[0]
    span = json.loads(printed)
    assert span["name"] == "chat dev-model" and span["attributes"] == {"gen_ai.request.model": "dev-model"}
    assert "Zq9CANARY" not in done.stdout
    assert "1 spans exported, 0 dropped" in done.stdout
    assert "metric points" not in done.stdout  # no metrics sent to a Collector nobody started
