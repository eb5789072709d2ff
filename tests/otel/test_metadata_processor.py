"""The metadata-only processor lets nothing but allowlisted, shaped metadata through, for anyone's
spans; the check runs on the export worker and reads each span's attributes once."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from types import MappingProxyType
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
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
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

from .metadata_examples import LEGIT, MARK
from .shift import seed_shift

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

    def each(self, spans):  # how the batch processor asks for a whole batch
        self.threads.extend(threading.current_thread().name for _ in spans)
        return super().each(spans)


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


# A batch at once: `SpanSanitiser.each(spans)` answers exactly as `sanitiser(span)` for each span.

EACH_SECRET = "sk-live-each0123456789abcdef"
LATE_SECRET = "sk-live-late9876543210fedcba"  # known only from some batch on
ATTRIBUTE_POOL: list[tuple[str, Any]] = [
    *((key, LEGIT[key]) for key in ("gen_ai.operation.name", "gen_ai.request.model", "gen_ai.usage.input_tokens",
                                   "gen_ai.response.finish_reasons", "gen_ai.response.id", "server.port",
                                   "rpc.system", "error.type")),
    ("gen_ai.request.model", CANARY),  # allowlisted, not a model's shape: withheld
    ("gen_ai.response.id", f"id {MARK} with spaces"),  # an identifier's misfit: hashed
    ("gen_ai.request.model", f"m-{EACH_SECRET}"),  # shaped, but holds a secret
    ("gen_ai.response.model", f"m-{LATE_SECRET}"),  # shaped; a secret once it is known
    ("http.request.body", f"{MARK} body"),  # off the allowlist
    ("gen_ai.prompt", MARK),
]
SPAN_NAMES = ["chat gpt-4o-mini", "op", f"free text {MARK} here", f"op-{EACH_SECRET}", f"op-{LATE_SECRET}"]


class Unreadable(OwnMapping):
    def __iter__(self) -> Iterator[str]:
        raise RuntimeError(f"cannot read {MARK}")


class OtherSpan(ReadableSpan):
    """Not the SDK's own span class: never checked by its fields."""


HOLDERS: dict[str, Any] = {"dict": dict, "own": OwnMapping, "proxy": MappingProxyType, "none": lambda items: None,
                           "unreadable": Unreadable}
CLEAN_ATTRIBUTES = ATTRIBUTE_POOL[:8]


def _mostly(clean: Any, *others: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from([clean] * 6 + list(others))


# Any span at all, and spans shaped like the common case with one thing now and then
# that is not (a value, a status text, a trace state, an event, another resource or
# scope): the batch check takes its shortcut only for a span like one already seen.
any_span = st.fixed_dictionaries({
    "kind": st.sampled_from(["sdk", "sdk", "sdk", "hand", "other"]),
    "where": st.integers(0, 5),  # which resource and scope
    "name": st.sampled_from(SPAN_NAMES),
    "attributes": st.lists(st.sampled_from(ATTRIBUTE_POOL), max_size=5).map(dict),
    "unhashable": st.booleans(),  # a list value (hand-made spans only: the SDK makes tuples)
    "events": st.lists(st.tuples(st.sampled_from(["retry", f"note {MARK}"]),
                                 st.lists(st.sampled_from(ATTRIBUTE_POOL), max_size=2).map(dict)), max_size=2),
    "links": st.lists(st.lists(st.sampled_from(ATTRIBUTE_POOL), max_size=2).map(dict), max_size=2),
    "status": st.sampled_from([None, (StatusCode.OK, None), (StatusCode.ERROR, None), (StatusCode.ERROR, MARK)]),
    "trace_state": st.sampled_from([None, (("ot", "th:8"),), (("vendor", MARK),)]),
    "holder": st.sampled_from(sorted(HOLDERS)),
    "state_on": st.sampled_from(["both", "own", "parent"]),  # a hand-made span's contexts
})
common_span = st.fixed_dictionaries({
    "kind": st.sampled_from(["sdk", "sdk", "sdk", "hand", "hand", "other"]),
    "where": _mostly(0, 1, 2, 3),
    "name": _mostly("chat gpt-4o-mini", "op", f"free text {MARK} here", f"op-{LATE_SECRET}"),
    "attributes": st.one_of(st.lists(st.sampled_from(CLEAN_ATTRIBUTES), max_size=5).map(dict),
                            st.lists(st.sampled_from(ATTRIBUTE_POOL), min_size=1, max_size=3).map(dict)),
    "unhashable": _mostly(False, True),
    "events": _mostly([], [("retry", {})], [(f"note {MARK}", {})]),
    "links": _mostly([], [{}], [{"gen_ai.prompt": MARK}]),
    "status": _mostly(None, (StatusCode.ERROR, None), (StatusCode.ERROR, MARK)),
    "trace_state": st.sampled_from([None, None, None, (("ot", "th:8"),), (("vendor", MARK),), (("vendor", MARK),)]),
    "holder": _mostly("dict", "own", "proxy", "none", "unreadable"),
    "state_on": st.sampled_from(["both", "own", "parent"]),
})
span_specs = st.one_of(common_span, any_span)


@pytest.fixture(scope="module")
def span_sources():
    """Resources and scopes shared by every span made (as a provider's are), and spans as
    the SDK hands them to its processors when they end."""
    from opentelemetry.sdk.trace import SpanProcessor

    ended: list[ReadableSpan] = []

    class Keeps(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            ended.append(span)

    resources = [Resource({"service.name": "svc"}), Resource({"service.name": "svc", "note": f"key {EACH_SECRET}"})]
    tracers = []
    for resource in resources:
        provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        provider.add_span_processor(Keeps())
        tracers += [provider.get_tracer("opentelemetry.instrumentation.httpx", "1.0"),
                    provider.get_tracer(f"scope {MARK} with spaces"),
                    provider.get_tracer("third.party", "2.0", attributes={"scope.note": MARK, "rpc.system": "grpc"})]
    return resources, tracers, ended


def _make(spec: dict[str, Any], sources, number: int) -> ReadableSpan:
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState, set_span_in_context

    resources, tracers, ended = sources
    tracer = tracers[spec["where"]]
    trace_state = TraceState(list(spec["trace_state"])) if spec["trace_state"] else TraceState()
    parent = SpanContext(0xABC + number, 0xDEF + number, True, TraceFlags(1), trace_state)
    links = [Link(parent, attributes) for attributes in spec["links"]]
    status = Status(*spec["status"]) if spec["status"] else Status(StatusCode.UNSET)
    if spec["kind"] == "sdk":
        context = set_span_in_context(NonRecordingSpan(parent)) if spec["trace_state"] else None
        span = tracer.start_span(spec["name"], context=context, attributes=spec["attributes"], links=links)
        for name, attributes in spec["events"]:
            span.add_event(name, attributes, timestamp=1)
        if spec["status"]:
            span.set_status(status)
        span.end()
        return ended[-1]
    from opentelemetry.sdk.trace import Event

    attributes = dict(spec["attributes"])
    if spec["unhashable"]:
        attributes["gen_ai.response.finish_reasons"] = ["stop", MARK]
    made = ReadableSpan if spec["kind"] == "hand" else OtherSpan
    own, parents = trace_state, parent
    if spec["state_on"] == "parent":
        own = TraceState()
    elif spec["state_on"] == "own":
        parents = SpanContext(parent.trace_id, parent.span_id, True, TraceFlags(1), TraceState())
    return made(name=spec["name"], context=SpanContext(0x123 + number, 0x456 + number, False, TraceFlags(1), own),
                parent=parents if spec["trace_state"] else None, resource=resources[spec["where"] // 3],
                attributes=HOLDERS[spec["holder"]](attributes),
                events=tuple(Event(name, attributes, timestamp=1) for name, attributes in spec["events"]),
                links=tuple(links), status=status,
                instrumentation_scope=tracer._instrumentation_scope)  # the very scope its SDK spans carry


def _leaves(found: ReadableSpan | Exception, span: ReadableSpan) -> Any:
    """All that leaves of a checked span, and whether it is the span itself."""
    if isinstance(found, Exception):
        return ("raised", type(found).__name__)
    scope = found.instrumentation_scope

    def items(mapping: Mapping[str, Any] | None) -> list[tuple[str, str]]:
        return sorted((key, repr(value)) for key, value in (mapping or {}).items())

    def state(context: Any) -> Any:
        return None if context is None else list(context.trace_state.items())
    return (found is span, found.name, items(found.attributes),
            [(event.name, items(event.attributes), event.timestamp) for event in found.events],
            [(link.context.span_id, state(link.context), items(link.attributes)) for link in found.links],
            (found.status.status_code, found.status.description), state(found.context), state(found.parent),
            items(found.resource.attributes),
            None if scope is None else (scope.name, scope.version, scope.schema_url, items(scope.attributes)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(span_specs, min_size=1, max_size=8), min_size=1, max_size=4),
       late_secret_from=st.integers(0, 4))
def test_a_batch_checked_at_once_gets_every_span_the_verdict_of_its_own_check(span_sources, batches,
                                                                             late_secret_from):
    options = {"secrets": [EACH_SECRET], "hash_key": b"k" * 32}
    at_once, one_by_one = SpanSanitiser(account=TelemetryAccount(), **options), SpanSanitiser(
        account=TelemetryAccount(), **options)
    number = 0
    for index, specs in enumerate(batches):
        if index == late_secret_from:
            at_once.add_secrets([LATE_SECRET])
            one_by_one.add_secrets([LATE_SECRET])
        spans = []
        for spec in specs:
            spans.append(_make(spec, span_sources, number))
            number += 1
        checked = at_once.each(spans)
        assert len(checked) == len(spans)
        for span, found in zip(spans, checked, strict=True):
            try:
                alone: ReadableSpan | Exception = one_by_one(span)
            except Exception as error:
                alone = error
            assert _leaves(found, span) == _leaves(alone, span)
    assert at_once._account.snapshot() == one_by_one._account.snapshot()  # withheld counts by key included


class CountsFullChecks(SpanSanitiser):
    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.full_checks = 0

    def _sanitise(self, span: ReadableSpan) -> ReadableSpan:
        self.full_checks += 1
        return super()._sanitise(span)


def test_an_sdk_span_like_one_seen_before_is_checked_by_its_fields_and_leaves_as_it_is(span_sources):
    _, tracers, ended = span_sources
    sanitiser = CountsFullChecks(account=TelemetryAccount())
    tracer = tracers[0]
    made = []
    for _ in range(3):
        tracer.start_span("chat gpt-4o-mini", attributes={"gen_ai.operation.name": "chat",
                                                          "gen_ai.usage.input_tokens": 12}).end()
        made.append(ended[-1])
    assert sanitiser.each(made[:1]) == made[:1]  # the first: name, scope and resource not yet seen
    assert sanitiser.full_checks == 1
    assert sanitiser.each(made[1:]) == made[1:]  # the same shape again: no full check
    assert sanitiser.full_checks == 1
    tracer.start_span("chat gpt-4o-mini", attributes={"gen_ai.request.model": CANARY}).end()
    (copied,) = sanitiser.each([ended[-1]])  # a value that does not fit: the full check decides and counts
    assert sanitiser.full_checks == 2
    assert dict(copied.attributes) == {} and sanitiser._account.withheld == {GEN_AI_REQUEST_MODEL: 1}


def _like_the_last(change: str) -> ReadableSpan:
    """A span like `_like_the_last("")` (same name, resource and scope objects), but for one thing."""
    from opentelemetry.sdk.trace import Event
    from opentelemetry.trace import SpanContext, TraceFlags, TraceState

    vendor = TraceState([("vendor", MARK)])
    parent = SpanContext(3, 4, True, TraceFlags(1), vendor if change == "parent trace state" else TraceState())
    return ReadableSpan(
        "op" if change != "name" else f"op {MARK} sentence",
        context=SpanContext(1, 2, False, TraceFlags(1), vendor if change == "own trace state" else TraceState()),
        parent=parent, resource=SHARED_RESOURCE if change != "resource" else Resource({"k": f"v-{EACH_SECRET}"}),
        attributes={"gen_ai.operation.name": "chat", **({"gen_ai.request.model": CANARY} if change == "value" else {}),
                    **({"gen_ai.request.model": f"m-{EACH_SECRET}"} if change == "secret" else {})},
        events=(Event(f"note {MARK}", {}, timestamp=1),) if change == "event" else (),
        links=(Link(parent, {"gen_ai.prompt": MARK}),) if change == "link" else (),
        status=Status(StatusCode.ERROR, MARK) if change == "status text" else Status(StatusCode.UNSET),
        instrumentation_scope=SHARED_SCOPE if change != "scope" else InstrumentationScope(f"scope {MARK} x"))


SHARED_RESOURCE = Resource({"service.name": "svc"})
SHARED_SCOPE = InstrumentationScope("third.party", "1.0")


@pytest.mark.parametrize("change", ["", "name", "value", "secret", "event", "link", "status text",
                                    "own trace state", "parent trace state", "resource", "scope"])
def test_a_span_like_one_seen_before_but_for_one_thing_gets_the_same_verdict_at_once(change):
    options = {"secrets": [EACH_SECRET], "hash_key": b"k" * 32}
    at_once, one_by_one = SpanSanitiser(account=TelemetryAccount(), **options), SpanSanitiser(
        account=TelemetryAccount(), **options)
    seen = _like_the_last("")
    assert at_once.each([seen]) == [seen] and one_by_one(seen) is seen
    span = _like_the_last(change)
    (found,) = at_once.each([span])
    assert _leaves(found, span) == _leaves(one_by_one(span), span)
    assert (found is span) == (change == "")
    assert at_once._account.snapshot() == one_by_one._account.snapshot()


def test_an_http_client_span_keeps_its_stable_http_and_url_attributes_of_a_safe_shape():
    from cafe_otel import configure

    sink = InMemorySpanExporter()
    handle = configure(exporter=sink, environ={}, set_global=False, metrics=False)
    tracer = handle.provider.get_tracer("opentelemetry.instrumentation.httpx", "0.66b2")
    safe = {"http.request.method": "POST", "http.response.status_code": 429, "server.address": "api.openai.com",
            "server.port": 443, "url.scheme": "https", "url.path": "/v1/chat/completions",
            "http.request.resend_count": 1}
    with tracer.start_as_current_span("POST", attributes={
            **safe, "url.full": "https://api.openai.com/v1/chat/completions?key=k", "url.query": "key=k"}):
        pass
    with tracer.start_as_current_span("POST", attributes={"url.path": "/v1/users/alice@example.com"}):
        pass
    with tracer.start_as_current_span("POST", attributes={"url.path": "/v1/files?purpose=batch"}):
        pass
    handle.shutdown(2.0)
    first, *others = sink.get_finished_spans()
    assert dict(first.attributes) == safe  # the query, and the full URL that holds it, are removed
    assert all(dict(span.attributes) == {} for span in others)  # a path holding an address or a query
