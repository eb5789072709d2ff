"""The metadata-only processor lets nothing but allowlisted, shaped metadata through, for anyone's
spans; the check runs on the export worker and reads each span's attributes once."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, Status, StatusCode

from cafe_otel import (
    BatchOptions,
    BoundedBatchSpanProcessor,
    MetadataOnlySpanProcessor,
    OTelTracer,
    TelemetryAccount,
    configure,
    encode,
)
from cafe_otel._privacy.processor import SpanSanitiser
from cafe_otel.semconv import GEN_AI_REQUEST_MODEL, METADATA_ALLOWLIST

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
    assert account.dropped_redaction_failed == 18  # one + the shift's 17
    assert sink.get_finished_spans() == ()
    assert "18 redaction failed" in account.summary()


def test_a_raising_next_processor_is_contained():
    class Exploding(SimpleSpanProcessor):
        def on_end(self, span):
            raise OSError("disk full")

    account = TelemetryAccount()
    provider = TracerProvider()
    provider.add_span_processor(MetadataOnlySpanProcessor(Exploding(InMemorySpanExporter()), account=account))
    run = seed_shift(OTelTracer(provider, account=account))
    assert run.stop_reason == "answered"
    assert account.dropped_export_failed == 17


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


# On the export worker: `span.end()` on the calling thread only enqueues; the check runs there.

CANARY = "CANARY customer sentence that is no model name at all, not even close"


class ThreadNoting(SpanSanitiser):
    """The sanitiser, noting which thread checks each span."""

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.threads: list[str] = []

    def __call__(self, span: ReadableSpan) -> ReadableSpan:
        self.threads.append(threading.current_thread().name)
        return super().__call__(span)


def test_span_end_does_not_check_and_the_worker_checks_before_the_exporter_sees_it():
    sink = InMemorySpanExporter()
    handle = configure("svc", exporter=sink, environ={}, batch=BatchOptions(schedule_delay=60.0))
    tracer = handle.provider.get_tracer("third.party.instrumentation")
    with tracer.start_as_current_span("op") as span:
        span.set_attribute(GEN_AI_REQUEST_MODEL, CANARY)  # allowlisted, but not a model's shape
        span.set_attribute("http.request.body", CANARY)  # off the allowlist
    # Ended, queued, not yet checked: the calling thread paid no check.
    assert handle.account.withheld == {}
    assert sink.get_finished_spans() == ()
    assert handle.force_flush(5.0)
    (exported,) = sink.get_finished_spans()
    assert CANARY not in repr(dict(exported.attributes or {}))
    assert "http.request.body" not in (exported.attributes or {})
    assert handle.account.withheld.get(GEN_AI_REQUEST_MODEL) == 1
    handle.shutdown(2.0)


def test_the_check_runs_on_the_batch_worker_not_the_thread_that_ends_the_span():
    sink = InMemorySpanExporter()
    sanitiser = ThreadNoting()
    processor = BoundedBatchSpanProcessor(sink, prepare=sanitiser, schedule_delay=60.0)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    for name in ("a", "b", "c"):
        tracer.start_span(name).end()
    assert sanitiser.threads == []
    assert processor.force_flush(5000)
    assert sanitiser.threads == ["cafe-otel-batch"] * 3
    assert [s.name for s in sink.get_finished_spans()] == ["a", "b", "c"]
    processor.shutdown(2.0)


class Counting(SpanExporter):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def export(self, spans) -> SpanExportResult:
        self.seen += [span.name for span in spans]
        return SpanExportResult.SUCCESS


def _fails_on(names: set[str]):
    sanitiser = SpanSanitiser()

    def prepare(span: ReadableSpan) -> ReadableSpan:
        if span.name in names:
            raise RuntimeError(f"CANARY {span.name}")
        return sanitiser(span)
    return prepare


def test_a_span_the_worker_cannot_check_is_dropped_and_counted_and_the_rest_of_its_batch_goes():
    exporter = Counting()
    account = TelemetryAccount()
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    processor = BoundedBatchSpanProcessor(exporter, account=account, prepare=_fails_on({"bad"}),
                                          schedule_delay=60.0, meter_provider=meters)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    for name in ("ok1", "bad", "ok2", "bad"):
        tracer.start_span(name).end()
    assert processor.force_flush(5000)
    processor.shutdown(2.0)
    assert exporter.seen == ["ok1", "ok2"]
    snap = account.snapshot()
    assert (snap.exported, snap.dropped_redaction_failed, snap.dropped) == (2, 2, 2)
    assert "CANARY" not in (snap.last_error or "")
    assert "RuntimeError" in (snap.last_error or "")
    processed = {}
    for metric in reader.get_metrics_data().resource_metrics[0].scope_metrics[0].metrics:
        if metric.name == "otel.sdk.processor.span.processed":
            for point in metric.data.data_points:
                processed[point.attributes.get("error.type")] = point.value
    assert processed == {None: 2, "redaction_failed": 2}
    meters.shutdown()


def test_a_batch_whose_every_span_fails_the_check_reaches_no_exporter():
    exporter = Counting()
    account = TelemetryAccount()
    processor = BoundedBatchSpanProcessor(exporter, account=account, prepare=_fails_on({"bad"}), schedule_delay=60.0)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    provider.get_tracer("test").start_span("bad").end()
    assert processor.force_flush(5000)
    processor.shutdown(2.0)
    assert exporter.seen == []
    assert (account.exported, account.dropped) == (0, 1)


def test_secrets_added_after_a_span_ended_still_hold_at_its_export():
    sink = InMemorySpanExporter()
    handle = configure("svc", exporter=sink, environ={}, metrics=False, batch=BatchOptions(schedule_delay=60.0))
    secret = "sk-live-0123456789abcdef"
    tracer = handle.provider.get_tracer("third.party")
    tracer.start_span(f"op {secret}").end()
    handle.add_secrets([secret])  # known only now: the check at export still knows it
    assert handle.force_flush(5.0)
    (exported,) = sink.get_finished_spans()
    assert secret not in exported.name
    handle.shutdown(2.0)


# One read: the sanitiser reads a span's attributes once, as a plain dict, whatever holds them.

class OwnMapping(Mapping[str, Any]):
    """A read-only mapping with no `copy`, as a hand-made span might carry."""

    def __init__(self, items: dict[str, Any]) -> None:
        self._items = items

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


class OddCopy(OwnMapping):
    """Its `copy` gives back a mapping of its own kind, not a dict."""

    def copy(self) -> OddCopy:
        return OddCopy(self._items)


class RaisingCopy(OwnMapping):
    def copy(self) -> dict[str, Any]:
        raise RuntimeError("no copies here")


MIXED = {
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.prompt": f"a customer's {MARK} sentence",  # off the allowlist
    "gen_ai.response.finish_reasons": ["stop"],  # a list: unhashable, but shaped like metadata
    "llm.input": [MARK, "more"],  # unhashable and off the allowlist
    "gen_ai.usage.input_tokens": 12,
}
KEPT = {"gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.usage.input_tokens": 12}


def _span(attributes: Mapping[str, Any]) -> ReadableSpan:
    return ReadableSpan("chat gpt-4o-mini", attributes=attributes, resource=Resource({}))


@pytest.mark.parametrize("holder", [dict, OwnMapping, OddCopy, RaisingCopy])
def test_every_kind_of_attribute_mapping_gets_the_same_verdict(holder):
    sanitiser = SpanSanitiser(account=TelemetryAccount())
    for _ in range(2):  # the second time, values that fit are remembered
        clean = sanitiser(_span(holder(dict(MIXED))))
        assert dict(clean.attributes) == KEPT
    assert sanitiser(_span(holder(dict(KEPT)))).attributes == KEPT


@pytest.mark.parametrize("holder", [dict, OwnMapping, OddCopy, RaisingCopy])
def test_a_clean_span_in_any_mapping_is_handed_on_as_is(holder):
    span = _span(holder({key: LEGIT[key] for key in ("gen_ai.request.model", "gen_ai.usage.input_tokens",
                                                      "gen_ai.response.finish_reasons")}))
    assert SpanSanitiser()(span) is span


def test_a_secret_in_a_value_remembered_as_fitting_is_still_caught_on_a_later_span():
    account = TelemetryAccount()
    sanitiser = SpanSanitiser(account=account, secrets=["sk-live-0123456789"])
    fine = {"gen_ai.response.model": "gpt-4o-mini", "gen_ai.usage.output_tokens": 3}
    for _ in range(2):
        span = _span(dict(fine))
        assert sanitiser(span) is span
    leaky = {**fine, "gen_ai.request.model": "model-sk-live-0123456789"}
    assert dict(sanitiser(_span(leaky)).attributes) == fine
    assert account.withheld == {"gen_ai.request.model": 1}
