"""Acceptance: the metadata-only processor lets nothing but allowlisted metadata through,
for anyone's spans, and fails closed."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, Status, StatusCode

from cafe_otel import MetadataOnlySpanProcessor, OTelTracer, TelemetryAccount, encode
from cafe_otel.semconv import METADATA_ALLOWLIST

from .conftest import seed_shift
from .metadata_examples import LEGIT, MARK

ALLOWED = sorted(METADATA_ALLOWLIST)
foreign_keys = st.one_of(
    st.text(min_size=1, max_size=30),
    st.sampled_from(["gen_ai.prompt", "gen_ai.completion", "http.url", "url.full", "db.statement",
                     "exception.message", "exception.stacktrace", "llm.input", "message"]),
).filter(lambda key: key not in METADATA_ALLOWLIST and MARK not in key)
canary_values = st.one_of(
    st.text(max_size=20).map(lambda text: f"{text}{MARK}{text}"),
    st.lists(st.text(max_size=5).map(lambda text: MARK + text), min_size=1, max_size=3).map(tuple),
)
foreign_attributes = st.dictionaries(foreign_keys, canary_values, max_size=6)
# Legitimate metadata under allowlisted keys (values shaped like metadata: see test_leaks
# for what happens to free text under those keys).
allowed_attributes = st.lists(st.sampled_from(ALLOWED), unique=True, max_size=4).map(
    lambda keys: {key: LEGIT[key] for key in keys})
event_names = st.sampled_from(["exception", "gen_ai.content.prompt", "log", "retry"])


@pytest.fixture(scope="module")
def pipeline():
    sink = InMemorySpanExporter()
    account = TelemetryAccount()
    provider = TracerProvider(resource=Resource({"service.name": "test"}))
    provider.add_span_processor(MetadataOnlySpanProcessor(SimpleSpanProcessor(sink), account=account))
    yield provider, sink, account
    provider.shutdown()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    span_attrs=foreign_attributes,
    kept=allowed_attributes,
    events=st.lists(st.tuples(event_names, foreign_attributes, allowed_attributes), max_size=3),
    link_attrs=foreign_attributes,
    description=st.text(max_size=20).map(lambda text: MARK + text),
    scope_name=st.sampled_from(["opentelemetry.instrumentation.httpx", "openllmetry", "langchain"]),
    raise_one=st.booleans(),
)
def test_foreign_canaries_never_reach_the_exporter(pipeline, span_attrs, kept, events, link_attrs,
                                                   description, scope_name, raise_one):
    provider, sink, account = pipeline
    sink.clear()
    tracer = provider.get_tracer(scope_name, "1.0", attributes={"scope.note": description, "rpc.system": "grpc"})
    with tracer.start_as_current_span("parent") as parent:
        link = Link(parent.get_span_context(), link_attrs)
        with tracer.start_as_current_span("foreign", links=[link], attributes={**span_attrs, **kept}) as span:
            for name, attrs, safe in events:
                span.add_event(name, {**attrs, **safe})
            if raise_one:
                span.record_exception(RuntimeError(description))
            span.set_status(Status(StatusCode.ERROR, description))
    spans = sink.get_finished_spans()
    assert len(spans) == 2
    assert MARK.encode() not in encode(spans)
    foreign = next(s for s in spans if s.name == "foreign")
    assert set(foreign.attributes) <= METADATA_ALLOWLIST
    assert dict(foreign.attributes) == kept  # allowlisted metadata does get through
    assert foreign.status.status_code is StatusCode.ERROR and foreign.status.description is None
    for event in foreign.events:
        assert set(event.attributes) <= METADATA_ALLOWLIST
    if raise_one:
        assert foreign.events[-1].name == "exception"
        assert dict(foreign.events[-1].attributes) == {"exception.type": "RuntimeError"}
    assert dict(foreign.instrumentation_scope.attributes) == {"rpc.system": "grpc"}
    assert account.dropped == 0


def test_resource_attributes_are_kept(pipeline):
    provider, sink, _ = pipeline
    sink.clear()
    with provider.get_tracer("x").start_as_current_span("s"):
        pass
    assert sink.get_finished_spans()[0].resource.attributes["service.name"] == "test"


def _boom(span):
    raise RuntimeError(f"cannot sanitise {span.name}")


def test_a_sanitiser_that_raises_drops_the_span_counts_it_and_raises_nothing():
    sink = InMemorySpanExporter()
    account = TelemetryAccount()
    provider = TracerProvider()
    provider.add_span_processor(MetadataOnlySpanProcessor(SimpleSpanProcessor(sink), account=account,
                                                          sanitiser=_boom))
    with provider.get_tracer("x").start_as_current_span("secret span", attributes={"prompt": MARK}):
        pass  # ending the span must not raise into this block
    assert sink.get_finished_spans() == ()
    assert account.dropped_redaction_failed == 1
    assert "RuntimeError" in account.last_error and MARK not in account.last_error

    run = seed_shift(OTelTracer(provider, account=account))
    assert run.stop_reason == "answered"
    assert account.dropped_redaction_failed == 12  # one + the shift's 11
    assert sink.get_finished_spans() == ()
    assert "12 redaction failed" in account.summary()


def test_a_raising_next_processor_is_contained():
    class Exploding(SimpleSpanProcessor):
        def on_end(self, span):
            raise OSError("disk full")

    account = TelemetryAccount()
    provider = TracerProvider()
    provider.add_span_processor(MetadataOnlySpanProcessor(Exploding(InMemorySpanExporter()), account=account))
    run = seed_shift(OTelTracer(provider, account=account))
    assert run.stop_reason == "answered"
    assert account.dropped_export_failed == 11


def test_on_start_does_not_hand_the_live_span_on():
    class Recording(SimpleSpanProcessor):
        def __init__(self, exporter) -> None:
            super().__init__(exporter)
            self.started: list = []

        def on_start(self, span, parent_context=None):
            self.started.append(span)

    inner = Recording(InMemorySpanExporter())
    provider = TracerProvider()
    provider.add_span_processor(MetadataOnlySpanProcessor(inner))
    with provider.get_tracer("x").start_as_current_span("s"):
        pass
    assert inner.started == []


def test_no_global_provider_is_touched():
    before = trace.get_tracer_provider()
    seed_shift(OTelTracer(TracerProvider()))
    assert trace.get_tracer_provider() is before


def test_a_span_with_nothing_to_strip_is_handed_on_as_is_and_a_dirty_one_is_copied():
    from cafe_otel._privacy.processor import sanitise_span

    provider = TracerProvider()
    sink = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(sink))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("clean", attributes={"gen_ai.operation.name": "chat"}):
        pass
    with tracer.start_as_current_span("dirty", attributes={"gen_ai.operation.name": "chat", "note": "x"}) as span:
        span.set_status(Status(StatusCode.ERROR, "free text"))
    clean, dirty = sink.get_finished_spans()
    assert sanitise_span(clean) is clean
    copied = sanitise_span(dirty)
    assert copied is not dirty
    assert dict(copied.attributes) == {"gen_ai.operation.name": "chat"}
    assert copied.status.description is None and copied.status.status_code is StatusCode.ERROR
