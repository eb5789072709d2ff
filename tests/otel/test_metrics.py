"""Issue 9, part 4: GenAI client metrics (semconv 1.41.1) and our counters, from a listener."""

from __future__ import annotations

import json
import warnings

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader

import cafe
from cafe import counter
from cafe_otel import semconv as sc
from cafe_otel._metrics.listener import DURATION_BUCKETS, TOKEN_USAGE_BUCKETS, MetricsListener

CANARY = "Zanzibar-canary-7731"  # customer text that must never reach a metric


def _reader() -> tuple[InMemoryMetricReader, MeterProvider]:
    reader = InMemoryMetricReader()
    return reader, MeterProvider(metric_readers=[reader])


def _metrics(reader: InMemoryMetricReader) -> dict[str, tuple]:
    """name -> (metric, [data points])"""
    found = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "cafe_otel" and scope.schema_url == sc.SCHEMA_URL
            for metric in scope.metrics:
                found[metric.name] = (metric, list(metric.data.data_points))
    return found


def _run(client, script, decisions=(), *, listener_source=None):
    reader, provider = _reader()
    tracer = cafe.Tracer(clock=cafe.TickClock(step=0.25), listeners=[MetricsListener(provider)])
    run = counter.run_shift(client, script, counter.make_responder(list(decisions)), tracer=tracer)
    return run, tracer, _metrics(reader)


def _sum(points, **attributes) -> int:
    return sum(p.value if not isinstance(p, HistogramDataPoint) else p.sum for p in points
               if all(p.attributes.get(k) == v for k, v in attributes.items()))


def test_token_usage_and_duration_follow_the_pinned_spec_on_the_seed_shift():
    run, tracer, found = _run(counter.ScriptedClient(), counter.DEFAULT_SCRIPT)
    usage = cafe.usage_of(tracer)
    tokens, token_points = found["gen_ai.client.token.usage"]
    assert (tokens.unit, type(tokens.data).__name__) == ("{token}", "Histogram")
    # No decision given, so the order is rejected: priced, noted, proposed, answered.
    assert _sum(token_points, **{"gen_ai.token.type": "input"}) == usage.input_tokens == 280
    assert _sum(token_points, **{"gen_ai.token.type": "output"}) == usage.output_tokens == 42
    assert {tuple(p.explicit_bounds) for p in token_points} == {TOKEN_USAGE_BUCKETS}
    duration, duration_points = found["gen_ai.client.operation.duration"]
    assert duration.unit == "s"
    assert sum(p.count for p in duration_points) == run.model_calls == usage.calls == 4
    assert sum(p.sum for p in duration_points) == pytest.approx(usage.seconds)
    assert {tuple(p.explicit_bounds) for p in duration_points} == {DURATION_BUCKETS}
    [point] = duration_points
    assert dict(point.attributes) == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "cafe.scripted",
        "gen_ai.request.model": "scripted-barista-1", "gen_ai.response.model": "scripted-barista-1",
    }
    shifts = found["cafe.shifts"][1]
    assert [(dict(p.attributes), p.value) for p in shifts] == [({"cafe.stop_reason": "answered"}, 1)]
    tools = found["cafe.tool.executions"][1]
    assert [(dict(p.attributes), p.value) for p in tools] == [
        ({"gen_ai.tool.name": "price_check", "cafe.tool.status": "ok"}, 2),
        ({"gen_ai.tool.name": "propose_order", "cafe.tool.status": "rejected"}, 1)]


def test_the_bucket_boundaries_are_the_1_41_1_spec_text():
    # docs/gen-ai/gen-ai-metrics.md at v1.41.1, lines 70 and 179 (see the module docstring).
    assert [4 ** n for n in range(14)] == list(TOKEN_USAGE_BUCKETS)
    assert [round(0.01 * 2 ** n, 2) for n in range(14)] == list(DURATION_BUCKETS)


def test_metric_names_match_the_installed_conventions():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as genai
        from opentelemetry.semconv._incubating.metrics import gen_ai_metrics

    assert gen_ai_metrics.GEN_AI_CLIENT_TOKEN_USAGE == sc.METRIC_GEN_AI_CLIENT_TOKEN_USAGE
    assert gen_ai_metrics.GEN_AI_CLIENT_OPERATION_DURATION == sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION
    assert {v.value for v in genai.GenAiTokenTypeValues} == {sc.TOKEN_TYPE_INPUT, sc.TOKEN_TYPE_OUTPUT}


def _call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def test_our_counters_count_consent_tickets_repairs_and_stop_reasons_with_no_free_text():
    order = {"items": ["latte"], "table": 4}
    client = counter.CannedClient([
        {"content": None, "tool_calls": [_call("bad", "propose_order", {"items": [CANARY], "table": 4})]},
        {"content": None, "tool_calls": [_call("p1", "propose_order", order)]},
        {"content": None, "tool_calls": [_call("p2", "propose_order", order)]},
        {"content": None, "tool_calls": [_call("f1", "fire_ticket", order), _call("x1", CANARY, {"q": CANARY})]},
        {"content": f"Done, {CANARY}."},
    ])
    run, _, found = _run(client, [f"A latte for {CANARY}, table 4."], [("reject", None), ("approve", None)])
    assert run.stop_reason == "answered" and run.repairs_used == 2
    values = {name: sorted((tuple(sorted(p.attributes.items())), p.value) for p in points)
              for name, (metric, points) in found.items() if not name.startswith("gen_ai.")}
    assert values["cafe.consent.decisions"] == [((("cafe.consent.outcome", "approved"),), 1),
                                                ((("cafe.consent.outcome", "rejected"),), 1)]
    assert values["cafe.tickets.fired"] == [((), 1)]
    assert values["cafe.repairs.used"] == [((), 2)]
    assert values["cafe.shifts"] == [((("cafe.stop_reason", "answered"),), 1)]
    tools = dict(values["cafe.tool.executions"])
    assert tools == {
        (("cafe.tool.status", "invalid"), ("gen_ai.tool.name", "propose_order")): 1,
        (("cafe.tool.status", "approved"), ("gen_ai.tool.name", "propose_order")): 1,
        (("cafe.tool.status", "rejected"), ("gen_ai.tool.name", "propose_order")): 1,
        (("cafe.tool.status", "fired"), ("gen_ai.tool.name", "fire_ticket")): 1,
        (("cafe.tool.status", "invalid"), ("gen_ai.tool.name", "unknown_tool")): 1,
    }
    every_attribute = repr([dict(p.attributes) for _, points in found.values() for p in points])
    assert CANARY not in every_attribute
    for forbidden in ("gen_ai.conversation.id", "gen_ai.response.id", "gen_ai.tool.call.id", "cafe.ticket.number"):
        assert forbidden not in every_attribute


def test_a_failing_call_records_its_duration_with_error_type_and_no_tokens():
    class Boom(RuntimeError):
        pass

    class Failing(counter.ScriptedClient):
        server_address, server_port = "models.example", 8443

        def chat(self, *args, **kwargs):
            raise Boom(f"endpoint said {CANARY}")

    reader, provider = _reader()
    tracer = cafe.Tracer(listeners=[MetricsListener(provider)])
    with pytest.raises(Boom):
        counter.run_shift(Failing(), counter.DEFAULT_SCRIPT, counter.make_responder([]), tracer=tracer)
    found = _metrics(reader)
    assert "gen_ai.client.token.usage" not in found  # no count reported, so none recorded
    [point] = found["gen_ai.client.operation.duration"][1]
    assert point.count == 1
    assert dict(point.attributes) == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "cafe.scripted",
        "gen_ai.request.model": "scripted-barista-1", "server.address": "models.example", "server.port": 8443,
        "error.type": "Boom",
    }
    [shift] = found["cafe.shifts"][1]
    assert dict(shift.attributes) == {"error.type": "Boom"}
    assert CANARY not in repr([dict(p.attributes) for _, points in found.values() for p in points])


def test_metrics_and_spans_listen_to_the_same_tracer_side_by_side(telemetry):
    reader, provider = _reader()
    tracer = telemetry.handle.tracer()
    tracer.add_listener(MetricsListener(provider))
    counter.run_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, counter.make_responder([]), tracer=tracer)
    chats = [s for s in telemetry.spans() if s.name.startswith("chat ")]
    token_points = _metrics(reader)["gen_ai.client.token.usage"][1]
    assert _sum(token_points, **{"gen_ai.token.type": "input"}) == sum(
        s.attributes["gen_ai.usage.input_tokens"] for s in chats)
    assert tracer.listener_failures == 0


def test_every_metric_attribute_is_a_declared_one():
    """What the listener puts on a metric is on the declared list the Collector's metrics
    allowlist is checked against (tests/e2e/test_compose.py)."""
    from cafe.counter.clients.story import StoryClient
    from cafe.counter.demo import STORY_DECISIONS, STORY_SCRIPT

    reader = InMemoryMetricReader()
    listener = MetricsListener(MeterProvider(metric_readers=[reader], shutdown_on_exit=False))
    counter.run_shift(StoryClient(), list(STORY_SCRIPT), counter.make_responder(STORY_DECISIONS),
                   tracer=cafe.Tracer(listeners=[listener]))
    keys = {key for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics
            for metric in sm.metrics for point in metric.data.data_points for key in point.attributes}
    assert keys and keys <= sc.METRIC_ATTRIBUTES


def test_calls_recorded_from_several_threads_while_collected_all_add_up():
    """The wire instrumentor records from the handle's builder thread while café shifts
    record from theirs and the reader collects: no record is lost or counted twice."""
    import threading

    from opentelemetry.sdk.metrics.export import AggregationTemporality

    from cafe_otel._metrics.aggregation import InProcessMetrics
    from cafe_otel._metrics.listener import ChatCall, our_scope

    ours = InProcessMetrics(our_scope())
    listener = MetricsListener(ours)
    per_thread, threads = 300, 4

    def record(model: str) -> None:
        for _ in range(per_thread):
            listener.record_call(ChatCall(provider="openai", request_model=model, response_model=model,
                                          server_address="127.0.0.1", server_port=9, error_type=None,
                                          duration_s=0.05, input_tokens=2, output_tokens=1))

    def delta(_kind: str) -> AggregationTemporality:
        return AggregationTemporality.DELTA

    collected: list[int] = []

    def collect_once() -> None:
        for metric in ours.collect(delta):
            if metric.name == sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION:
                collected.extend(point.count for point in metric.data.data_points)

    def collect(until: threading.Event) -> None:
        while not until.is_set():
            collect_once()

    done = threading.Event()
    collector = threading.Thread(target=collect, args=(done,))
    collector.start()
    workers = [threading.Thread(target=record, args=(f"m{n % 2}",)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    done.set()
    collector.join()
    collect_once()  # what the last collection during the run left
    assert sum(collected) == per_thread * threads
