"""Acceptance (issue 11, "Leaks"): a canary in every field a third-party span or a server
reply can carry never leaves: not through the in-memory exporter, not in the OTLP bytes.
Legitimate metadata still passes unchanged."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags, TraceState

from cafe import counter
from cafe.counter.cli import plugin as COUNTER
from cafe.counter.clients import LiveClient, LiveSettings, Secret
from cafe_otel import BatchOptions, MetadataOnlySpanProcessor, MetricsOptions, TelemetryAccount, configure, encode
from cafe_otel._privacy.processor import HASH_MARKER, sanitise_span
from cafe_otel._privacy.shapes import REDACTED_NAME, SHAPES
from cafe_otel.semconv import GEN_AI_OUTPUT_MESSAGES, METADATA_ALLOWLIST

from .conftest import SEED_DECISIONS
from .echo_server import echo_server, planted_reply
from .metadata_examples import LEGIT, MARK, METADATA_KEYS, canary_value, free_text

KEY = "live-echo-5e4d3c2b1a0f9e8d"  # fits no scrub pattern: only the client's secrets() name it
ID_KEYS = sorted(key for key, shape in SHAPES.items() if shape.on_mismatch == "hash")


def _pipeline(**options):
    sink = InMemorySpanExporter()
    account = TelemetryAccount()
    provider = TracerProvider(resource=Resource({"service.name": "leaks"}))
    provider.add_span_processor(MetadataOnlySpanProcessor(SimpleSpanProcessor(sink), account=account, **options))
    return provider, sink, account


@pytest.fixture(scope="module")
def pipeline():
    provider, sink, account = _pipeline()
    yield provider, sink, account
    provider.shutdown()


def _remote_parent(trace_state: TraceState):
    context = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1), trace_state=trace_state)
    return trace.set_span_in_context(NonRecordingSpan(context))


planted = st.fixed_dictionaries({key: canary_value(key) for key in METADATA_KEYS})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    span_values=planted,
    event_values=planted,
    link_values=planted,
    span_name=free_text(),
    event_name=free_text(),
    description=free_text(),
    scope_name=free_text(),
    vendor_state=free_text(st.text(alphabet="abcxyz019 ", max_size=8)).map(lambda t: t.replace(",", ";").strip()),
)
def test_a_canary_in_every_field_of_a_third_party_span_never_leaves(
    pipeline, span_values, event_values, link_values, span_name, event_name, description, scope_name, vendor_state
):
    provider, sink, account = pipeline
    sink.clear()
    before = account.withheld
    state = TraceState([("vendor", vendor_state.replace("=", ":")), ("ot", f"th:{MARK}")])
    tracer = provider.get_tracer(scope_name, f"1.0 {MARK}", attributes=dict(span_values))
    with tracer.start_as_current_span("parent", context=_remote_parent(state)) as parent:
        link = Link(parent.get_span_context(), dict(link_values))
        with tracer.start_as_current_span(span_name, links=[link], attributes=dict(span_values)) as span:
            span.add_event(event_name, dict(event_values))
            span.add_event("exception", {"exception.type": "ValueError", "exception.message": description})
            span.set_status(Status(StatusCode.ERROR, description))
    spans = sink.get_finished_spans()
    assert len(spans) == 2
    data = encode(spans)
    assert MARK.encode() not in data
    assert MARK not in repr([(s.to_json(), s.instrumentation_scope) for s in spans])
    assert all(not s.context.trace_state for s in spans)  # a parent's trace state is not handed on
    child = next(s for s in spans if s.name != "parent")
    assert child.name == REDACTED_NAME
    assert (child.instrumentation_scope.name, child.instrumentation_scope.version) == (REDACTED_NAME, None)
    assert [e.name for e in child.events] == [REDACTED_NAME, "exception"]
    assert dict(child.events[1].attributes) == {"exception.type": "ValueError"}
    assert child.status.status_code is StatusCode.ERROR and child.status.description is None
    # Identifiers that do not fit are replaced by a keyed hash (the spans they join still join).
    hashed = {key for key in ID_KEYS if isinstance(span_values[key], str)}  # an array is withheld
    assert set(child.attributes) == hashed
    assert all(child.attributes[key].startswith(HASH_MARKER) for key in hashed)
    # Each withheld value is counted by key, the value itself never kept.
    after = account.withheld
    for key in METADATA_KEYS:
        assert after.get(key, 0) - before.get(key, 0) >= 3  # span, event and link (and the scope)
    assert after["span.name"] > before.get("span.name", 0) and after["tracestate"] > before.get("tracestate", 0)
    assert MARK not in repr(account) and MARK not in str(after)


def test_legitimate_metadata_passes_unchanged_everywhere():
    provider, sink, account = _pipeline()
    state = TraceState([("ot", "th:8;rv:0123456789abcd")])
    tracer = provider.get_tracer("opentelemetry.instrumentation.httpx", "0.51b0",
                                 schema_url="https://opentelemetry.io/schemas/1.41.1",
                                 attributes={"rpc.system": "grpc"})
    with tracer.start_as_current_span("parent", context=_remote_parent(state)) as parent:
        link = Link(parent.get_span_context(), LEGIT)
        with tracer.start_as_current_span("chat gpt-4o-mini", links=[link], attributes=LEGIT) as span:
            span.add_event("gen_ai.choice", LEGIT)
    child = next(s for s in sink.get_finished_spans() if s.name != "parent")
    assert child.name == "chat gpt-4o-mini"
    assert dict(child.attributes) == LEGIT
    assert dict(child.events[0].attributes) == LEGIT and child.events[0].name == "gen_ai.choice"
    assert dict(child.links[0].attributes) == LEGIT
    assert dict(child.context.trace_state) == {"ot": "th:8;rv:0123456789abcd"}
    scope = child.instrumentation_scope
    assert (scope.name, scope.version, scope.schema_url) == (
        "opentelemetry.instrumentation.httpx", "0.51b0", "https://opentelemetry.io/schemas/1.41.1")
    assert account.withheld == {}


def test_a_name_that_fits_one_field_is_not_taken_for_another():
    provider, sink, account = _pipeline()
    tracer = provider.get_tracer("x")
    for _ in range(2):  # the second time, names already seen are remembered
        with tracer.start_as_current_span("retry") as span:
            span.add_event("retry")
    assert [(s.name, [e.name for e in s.events]) for s in sink.get_finished_spans()] == [
        ("retry", [REDACTED_NAME]), ("retry", [REDACTED_NAME])]
    assert account.withheld == {"event.name": 2}


def test_a_secret_added_later_is_caught_in_values_that_fit_before():
    sink = InMemorySpanExporter()
    processor = MetadataOnlySpanProcessor(SimpleSpanProcessor(sink))
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("x")
    attributes = {"gen_ai.request.model": "m-" + KEY, "gen_ai.agent.name": KEY}
    with tracer.start_as_current_span("s", attributes=attributes):
        pass
    processor.add_secrets([KEY])
    with tracer.start_as_current_span("s", attributes=attributes):
        pass
    first, second = sink.get_finished_spans()
    assert dict(first.attributes) == attributes and dict(second.attributes) == {}


def test_a_clean_span_is_handed_on_as_is_and_nothing_is_counted():
    provider, sink, account = _pipeline()
    with provider.get_tracer("x").start_as_current_span("execute_tool price_check", attributes=LEGIT):
        pass
    span = sink.get_finished_spans()[0]
    assert sanitise_span(span) is span
    assert account.withheld == {}


def test_the_hash_is_keyed_and_a_replay_key_makes_it_repeatable():
    provider, sink, _ = _pipeline(hash_key=b"fixed")
    other, other_sink, _ = _pipeline()
    value = f"resp {MARK}, please!"
    for tracer_provider in (provider, other):
        with tracer_provider.get_tracer("x").start_as_current_span("s", attributes={"gen_ai.response.id": value}):
            pass
    ours = sink.get_finished_spans()[0].attributes["gen_ai.response.id"]
    theirs = other_sink.get_finished_spans()[0].attributes["gen_ai.response.id"]
    assert ours.startswith(HASH_MARKER) and len(ours) == len(HASH_MARKER) + 16
    assert ours != theirs  # a random key per processor: no guessing the text from the hash
    again, again_sink, _ = _pipeline(hash_key=b"fixed")
    with again.get_tracer("x").start_as_current_span("s", attributes={"gen_ai.response.id": value}):
        pass
    assert again_sink.get_finished_spans()[0].attributes["gen_ai.response.id"] == ours


def test_a_metadata_value_holding_a_secret_is_withheld():
    provider, sink, account = _pipeline(secrets=[KEY])
    with provider.get_tracer("x").start_as_current_span("s", attributes={"gen_ai.response.id": KEY,
                                                                          "gen_ai.request.model": KEY}):
        pass
    span = sink.get_finished_spans()[0]
    assert dict(span.attributes) == {}  # an id-shaped key is not hashed either: withheld
    assert account.withheld == {"gen_ai.response.id": 1, "gen_ai.request.model": 1}


def test_a_placeholder_key_does_not_withhold_metadata_that_happens_to_contain_it():
    provider, sink, _ = _pipeline(secrets=["x"])
    with provider.get_tracer("x").start_as_current_span("s", attributes={"gen_ai.request.model": "mixtral-8x7b"}):
        pass
    assert dict(sink.get_finished_spans()[0].attributes) == {"gen_ai.request.model": "mixtral-8x7b"}


def test_an_allowlisted_key_without_a_shape_is_refused():
    with pytest.raises(ValueError, match="without a declared shape: note"):
        MetadataOnlySpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), allowlist=[*METADATA_ALLOWLIST, "note"])


# --- server replies: what the model or the server controls ----------------------------

CANARY_REPLY = planted_reply(
    response_id=f"chatcmpl {MARK} {{n}}!", model=f"gpt {MARK}, echo!", finish_reason=f"{MARK} said stop!",
    call_id=f"call {MARK} {{n}}!", tool_name=f"lookup {MARK} now!",
    text=f"Your key is {{authorization}}; {MARK}, see you!")
LEGIT_REPLY = planted_reply(
    response_id="chatcmpl-abc123{n}", model="gpt-4o-mini", finish_reason="stop", call_id="call_abc123{n}",
    tool_name="price_check", text="Anything else?")


def _live_shift(base_url: str, **options):
    sink = InMemorySpanExporter()
    client = LiveClient(LiveSettings(base_url, Secret(KEY), "gpt-4o-mini"), max_retries=0, timeout=10)
    handle = configure(exporter=sink, environ={}, secrets=client.secrets(), **options,
                       batch=BatchOptions(schedule_delay=0.05))
    run = counter.run_shift(client, counter.DEFAULT_SCRIPT, counter.make_responder(SEED_DECISIONS),
                            tracer=handle.tracer())
    handle.shutdown(5.0)  # returns once flushed; the bound only matters on a loaded machine
    return run, list(sink.get_finished_spans()), handle.account


@pytest.mark.parametrize("capture", [False, True])
def test_canaries_in_a_server_reply_never_leave(capture):
    with echo_server(CANARY_REPLY) as url:
        run, spans, account = _live_shift(url, capture_content=capture)
    assert run.model_calls >= 2
    data = encode(spans)
    if not capture:
        assert MARK.encode() not in data
    assert KEY.encode() not in data and KEY[3:].encode() not in data
    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert all(s.name == "chat gpt-4o-mini" for s in chats)
    for chat in chats:
        assert chat.attributes["gen_ai.response.id"].startswith(HASH_MARKER)
        assert "gen_ai.response.model" not in chat.attributes
        assert "gen_ai.response.finish_reasons" not in chat.attributes
    tools = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert tools and all(s.attributes["gen_ai.tool.call.id"].startswith(HASH_MARKER) for s in tools)
    assert all(s.attributes["gen_ai.tool.name"] == "unknown_tool" for s in tools)
    assert account.withheld["gen_ai.response.id"] == len(chats)
    assert f"{sum(account.withheld.values())} values withheld (not metadata-shaped)" in account.summary()
    assert account.dropped == 0  # the spans themselves all went on
    if capture:
        # Content is customer text by definition (opted in), but the echoed key is scrubbed
        # from it exactly as a recording is scrubbed of it.
        outputs = "".join(s.attributes.get(GEN_AI_OUTPUT_MESSAGES, "") for s in chats)
        assert MARK in outputs and "Your key is [REDACTED]" in outputs


def test_a_legitimate_server_reply_passes_unchanged():
    with echo_server(LEGIT_REPLY) as url:
        _, spans, account = _live_shift(url)
    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert [s.attributes["gen_ai.response.id"] for s in chats][:2] == ["chatcmpl-abc1231", "chatcmpl-abc1232"]
    assert {s.attributes["gen_ai.response.model"] for s in chats} == {"gpt-4o-mini"}
    assert chats[0].attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert chats[0].attributes["cafe.gen_ai.tool_calls"] == ("price_check",)
    tool = next(s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool")
    assert tool.name == "execute_tool price_check" and tool.attributes["gen_ai.tool.call.id"] == "call_abc1231"
    assert account.withheld == {}


def test_content_of_a_third_party_span_is_scrubbed_of_the_secrets_it_was_given():
    handle_sink = InMemorySpanExporter()
    handle = configure(exporter=handle_sink, environ={}, capture_content=True,
                       batch=BatchOptions(schedule_delay=0.05))
    handle.add_secrets([KEY])
    tracer = handle.provider.get_tracer("openllmetry")
    with tracer.start_as_current_span("chat gpt-4o-mini",
                                      attributes={GEN_AI_OUTPUT_MESSAGES: f'[{{"content": "key {KEY}"}}]'}):
        pass
    handle.shutdown(2.0)
    span = handle_sink.get_finished_spans()[0]
    assert span.attributes[GEN_AI_OUTPUT_MESSAGES] == '[{"content": "key [REDACTED]"}]'


def _live_cli_shift(reply: dict, options: list[str], environ: dict[str, str]):
    """`cafe shift` against a live echo server, over OTLP/HTTP to a receiver with the live key
    set: (exit code, stdout, stderr, the receiver)."""
    from cafe.cli import main
    from cafe_otel._cli.plugin import plugin

    from .test_cli_plugin import Receiver

    receiver = Receiver()
    receiver.thread.start()
    try:
        with echo_server(reply) as url:
            out, err = io.StringIO(), io.StringIO()
            code = main(["shift", "--seed", "1", *options, "--otlp-protocol", "http/protobuf",
                         f"--otlp={receiver.url}"],
                        environ={"COURSE_MODE": "live", "CAFE_BASE_URL": url, "CAFE_API_KEY": KEY,
                                 "CAFE_MODEL": "gpt-4o-mini", **environ},
                        out=out, err=err, load_plugins=lambda warn: [COUNTER, plugin])
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
    return code, out.getvalue(), err.getvalue(), receiver


def test_the_cli_hands_the_live_clients_key_to_telemetry_and_content_is_scrubbed_of_it():
    reply = planted_reply(response_id="chatcmpl-1", model="gpt-4o-mini", finish_reason="stop", call_id="call_{n}",
                          tool_name="price_check", text="Your key is {authorization}, as you asked.")
    code, out, err, receiver = _live_cli_shift(reply, ["--capture-content"], {})
    assert code == 0, err
    assert KEY in out  # the echo really happened (the transcript is the operator's own)
    raw = receiver.raw()
    assert b"Your key is [REDACTED], as you asked." in raw
    assert KEY.encode() not in raw


# --- metrics: a server's model name becomes a metric attribute -------------------------

class KeptMetrics(MetricExporter):
    """Keeps each export as the OTLP bytes a metrics exporter would send."""

    def __init__(self) -> None:
        super().__init__()
        self.data = b""

    def export(self, metrics_data, timeout_millis: float = 10_000, **kwargs) -> MetricExportResult:
        self.data += encode_metrics(metrics_data).SerializeToString()
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
        return None


def _live_shift_metrics(base_url: str) -> tuple[bytes, TelemetryAccount]:
    metrics = KeptMetrics()
    client = LiveClient(LiveSettings(base_url, Secret(KEY), "gpt-4o-mini"), max_retries=0, timeout=10)
    handle = configure(exporter=InMemorySpanExporter(), environ={}, secrets=client.secrets(),
                       batch=BatchOptions(schedule_delay=0.05), metrics=MetricsOptions(exporter=metrics))
    counter.run_shift(client, counter.DEFAULT_SCRIPT, counter.make_responder(SEED_DECISIONS), tracer=handle.tracer())
    handle.shutdown(5.0)
    assert b"gen_ai.client.token.usage" in metrics.data  # the export did happen
    return metrics.data, handle.account


def test_a_canary_in_a_server_reply_never_reaches_a_metric():
    with echo_server(CANARY_REPLY) as url:
        data, account = _live_shift_metrics(url)
    assert MARK.encode() not in data
    assert b"gen_ai.response.model" not in data  # "gpt <canary>, echo!" fits no model shape
    # Left off every point it would have been on: tokens (input, output) and duration, per call.
    assert account.withheld["gen_ai.response.model"] >= 3


def test_a_server_that_names_the_key_as_its_model_does_not_put_it_on_a_metric():
    reply = planted_reply(response_id="chatcmpl-abc{n}", model=KEY, finish_reason="stop",
                          call_id="call_abc{n}", tool_name="price_check", text="Anything else?")
    with echo_server(reply) as url:
        data, account = _live_shift_metrics(url)
    assert KEY.encode() not in data  # it fits the model shape: only the secret check stops it
    assert account.withheld["gen_ai.response.model"] >= 3


def test_a_legitimate_response_model_is_on_the_metrics():
    with echo_server(LEGIT_REPLY) as url:
        data, account = _live_shift_metrics(url)
    assert b"gen_ai.response.model" in data and b"gpt-4o-mini" in data
    assert account.withheld == {}


# --- the resource: the operator's variables, built before the live key is known -----------

def test_a_live_key_pasted_into_the_resource_leaves_with_no_span_and_no_metric_point():
    code, _, err, receiver = _live_cli_shift(
        LEGIT_REPLY, [], {"OTEL_RESOURCE_ATTRIBUTES": f"deployment.environment=prod,note=key {KEY}",
                          "OTEL_SERVICE_NAME": "counter"})
    assert code == 0, err
    assert receiver.spans() and receiver.metric_points()  # both signals really left
    raw = receiver.raw()
    assert KEY.encode() not in raw
    assert b"deployment.environment" in raw and b"counter" in raw  # the rest of the resource stays


def test_a_secret_added_after_configure_is_kept_out_of_the_resource_and_counted():
    spans, metrics = InMemorySpanExporter(), KeptMetrics()
    handle = configure(exporter=spans, environ={"OTEL_RESOURCE_ATTRIBUTES": f"team=bar,token={KEY}"},
                       batch=BatchOptions(schedule_delay=0.05), metrics=MetricsOptions(exporter=metrics))
    counter.run_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, counter.make_responder(SEED_DECISIONS),
                   tracer=handle.tracer())
    assert handle.force_flush(5.0)
    assert spans.get_finished_spans()[0].resource.attributes["token"] == KEY  # not a secret yet: it left
    assert KEY.encode() in metrics.data
    spans.clear()
    metrics.data = b""
    handle.add_secrets([KEY])
    run = counter.run_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, counter.make_responder(SEED_DECISIONS),
                         tracer=handle.tracer())
    handle.shutdown(5.0)
    exported = spans.get_finished_spans()
    assert exported and all("token" not in span.resource.attributes for span in exported)
    assert all(span.resource.attributes["team"] == "bar" for span in exported)
    assert KEY.encode() not in metrics.data and b"team" in metrics.data
    assert handle.account.withheld["resource"] >= len(exported) + 1  # each span, and the metric export
    assert run.model_calls > 0


# --- the secret patterns: a value of its key's shape may still be a secret ------------------

# One key of each family the recordings are scrubbed of, each short enough to fit the shapes of
# an id, a finish reason and a service tier (the shape check alone lets them through).
FAMILIES = {
    "openai": "sk-proj-Ab3dEf6hIj9lMn2pQr5t",
    "github": "ghp_Ab3dEf6hIj9lMn2pQr5tUv",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "slack": "xoxb-1234567890-Ab3dEf6hIj",
    "stripe": "sk_live_Ab3dEf6hIj9lMn2p",
}
SERVER_FIELDS = ("gen_ai.response.id", "gen_ai.response.model", "gen_ai.response.finish_reasons",
                 "openai.response.system_fingerprint", "openai.response.service_tier")


def _wire_calls(base_url: str, *, calls: int = 2, environ: dict[str, str] | None = None):
    """`calls` real `openai` SDK calls under our instrumentor; (spans, metric bytes, account)."""
    import openai

    from cafe_otel.instrumentation import OpenAIWireInstrumentor

    spans, metrics = InMemorySpanExporter(), KeptMetrics()
    handle = configure(exporter=spans, environ=environ or {}, set_global=False,
                       batch=BatchOptions(schedule_delay=0.05), metrics=MetricsOptions(exporter=metrics))
    instrumentor = OpenAIWireInstrumentor()
    instrumentor.instrument(telemetry=handle)
    try:
        client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0)
        for _ in range(calls):
            client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "a latte"}])
    finally:
        instrumentor.uninstrument()
        handle.shutdown(5.0)
    return list(spans.get_finished_spans()), metrics.data, handle.account


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_server_reply_whose_fields_hold_a_secret_of_any_family_leaves_none_of_it(family):
    secret = FAMILIES[family]
    reply = planted_reply(response_id=secret, model=secret, finish_reason=secret, call_id="call_{n}",
                          tool_name="price_check", text="Anything else?")
    with echo_server(reply, odd={"system_fingerprint": secret, "service_tier": secret}) as url:
        spans, metric_data, account = _wire_calls(url)
    assert len(spans) == 2 and metric_data  # both signals left
    assert secret.encode() not in encode(spans) and secret.encode() not in metric_data
    for span in spans:
        assert not set(SERVER_FIELDS) & set(span.attributes), dict(span.attributes)  # withheld, not hashed
        assert span.attributes["gen_ai.request.model"] == "gpt-4o-mini"  # the rest of the span is there
    for field in SERVER_FIELDS:
        assert account.withheld[field] >= 2, account.withheld  # counted, on each call's span


def test_server_fields_without_a_secret_still_leave_as_they_are():
    reply = planted_reply(response_id="chatcmpl-abc123", model="gpt-4o-mini-2024-07-18", finish_reason="stop",
                          call_id="call_{n}", tool_name="price_check", text="Anything else?")
    with echo_server(reply, odd={"system_fingerprint": "fp_44709d6fcb", "service_tier": "default"}) as url:
        spans, _, account = _wire_calls(url)
    assert {key: spans[0].attributes[key] for key in SERVER_FIELDS} == {
        "gen_ai.response.id": "chatcmpl-abc123", "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.finish_reasons": ("stop",), "openai.response.system_fingerprint": "fp_44709d6fcb",
        "openai.response.service_tier": "default"}
    assert account.withheld == {}


def test_a_configured_scrub_pattern_keeps_its_secrets_out_of_telemetry_too():
    secret = "acme_q8w7e6r5t4y3"  # no default family: only the operator's own pattern names it
    reply = planted_reply(response_id=secret, model="gpt-4o-mini", finish_reason="stop", call_id="call_{n}",
                          tool_name="price_check", text="Anything else?")
    with echo_server(reply) as url:
        spans, _, account = _wire_calls(url, environ={"CAFE_SCRUB_PATTERNS": r"acme_[a-z0-9]{12}"})
    assert secret.encode() not in encode(spans)
    assert "gen_ai.response.id" not in spans[0].attributes and account.withheld["gen_ai.response.id"] == 2


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_secret_of_any_family_in_any_field_of_a_third_party_span_never_leaves(family):
    secret = FAMILIES[family]
    provider, sink, account = _pipeline()
    tracer = provider.get_tracer(secret, secret, attributes={"gen_ai.agent.version": secret})
    with tracer.start_as_current_span("parent") as parent:
        link = Link(parent.get_span_context(), {"gen_ai.conversation.id": secret})
        with tracer.start_as_current_span(f"chat {secret}", links=[link],
                                          attributes={"gen_ai.tool.call.id": secret,
                                                      "gen_ai.response.finish_reasons": ("stop", secret),
                                                      "gen_ai.request.model": "gpt-4o-mini"}) as span:
            span.add_event("gen_ai.choice", {"gen_ai.response.id": secret})
    provider.shutdown()
    spans = sink.get_finished_spans()
    assert secret.encode() not in encode(spans) and secret not in repr([s.to_json() for s in spans])
    child = next(s for s in spans if s.name != "parent")
    assert child.name == REDACTED_NAME and dict(child.attributes) == {"gen_ai.request.model": "gpt-4o-mini"}
    assert dict(child.events[0].attributes) == {} and dict(child.links[0].attributes) == {}
    scope = child.instrumentation_scope
    assert (scope.name, scope.version, dict(scope.attributes or {})) == (REDACTED_NAME, None, {})
    assert {"span.name", "gen_ai.tool.call.id", "gen_ai.response.finish_reasons", "gen_ai.response.id",
            "gen_ai.conversation.id", "scope.name", "scope.version", "gen_ai.agent.version"} <= set(account.withheld)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_secret_of_any_family_in_the_resource_variables_leaves_with_no_span_and_no_point(family):
    secret = FAMILIES[family]
    spans, metrics = InMemorySpanExporter(), KeptMetrics()
    environ = {"OTEL_RESOURCE_ATTRIBUTES": f"deployment.environment=prod,note={secret},{secret}=x,db.password=hunter22",
               "OTEL_SERVICE_NAME": "counter"}
    handle = configure(exporter=spans, environ=environ, set_global=False, batch=BatchOptions(schedule_delay=0.05),
                       metrics=MetricsOptions(exporter=metrics))
    counter.run_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, counter.make_responder(SEED_DECISIONS),
                   tracer=handle.tracer())
    handle.shutdown(5.0)
    exported = spans.get_finished_spans()
    assert exported and metrics.data
    for data in (encode(exported), metrics.data):
        assert secret.encode() not in data and b"hunter22" not in data
        assert b"deployment.environment" in data and b"counter" in data  # the rest of the resource stays
    assert {"note", secret, "db.password"}.isdisjoint(exported[0].resource.attributes)
    assert handle.account.withheld["resource"] >= len(exported)
