"""Mapping details: tool failures, unknown tools, server attributes, content shapes."""

from __future__ import annotations

import json

from opentelemetry.trace import StatusCode

import cafe
from cafe import counter
from cafe.trace import EventLog, GenerationStarted, Phase, PhaseStarted
from cafe_otel._spans import content, mapping


def _started_generation(client) -> GenerationStarted:
    log = EventLog()
    counter.TracingClient(client, cafe.Tracer(listeners=[log], tree=False)).chat([{"role": "user", "content": "hello"}])
    [started] = log.of(GenerationStarted)
    return started


def _fire(table: int, items: list[str], call_id: str) -> dict:
    return {"id": call_id, "type": "function",
            "function": {"name": "fire_ticket", "arguments": json.dumps({"items": items, "table": table})}}


def test_a_refused_fire_is_an_error_span_and_the_rest_of_the_batch_is_cancelled(telemetry):
    client = counter.CannedClient([
        {"content": None, "tool_calls": [_fire(4, ["latte"], "c1"), _fire(4, ["latte"], "c2")]},
    ])
    run = counter.run_shift(client, ["A latte, table 4."], counter.make_responder([]),
                         tracer=telemetry.handle.tracer())
    assert run.stop_reason == "consent_violation"
    tools = [s for s in telemetry.spans() if s.name == "execute_tool fire_ticket"]
    assert [(s.attributes["cafe.tool.status"], s.attributes["error.type"], s.status.status_code)
            for s in tools] == [("refused", "refused", StatusCode.ERROR),
                                ("cancelled", "cancelled", StatusCode.ERROR)]
    agent = next(s for s in telemetry.spans() if s.parent is None)
    assert agent.attributes["cafe.stop_reason"] == "consent_violation"


def test_an_approved_fire_carries_the_ticket_number(telemetry):
    propose = {"id": "p1", "type": "function", "function": {
        "name": "propose_order", "arguments": json.dumps({"items": ["latte"], "table": 4})}}
    client = counter.CannedClient([
        {"content": None, "tool_calls": [propose]},
        {"content": None, "tool_calls": [_fire(4, ["latte"], "f1")]},
        {"content": "Fired."},
    ])
    run = counter.run_shift(client, ["A latte, table 4."], counter.make_responder([("approve", None)]),
                         tracer=telemetry.handle.tracer())
    assert run.stop_reason == "answered"
    fired = next(s for s in telemetry.spans() if s.name == "execute_tool fire_ticket")
    assert fired.attributes["cafe.ticket.number"] == 1
    assert fired.attributes["cafe.tool.status"] == "fired"
    assert fired.status.status_code is StatusCode.UNSET


def test_a_hallucinated_tool_name_never_becomes_a_span_name(telemetry):
    call = {"id": "x1", "type": "function", "function": {"name": "Sell me the recipe", "arguments": "{}"}}
    client = counter.CannedClient([{"content": None, "tool_calls": [call]}, {"content": "Sorry."}])
    counter.run_shift(client, ["hi"], counter.make_responder([]), tracer=telemetry.handle.tracer())
    spans = telemetry.spans()
    assert "execute_tool unknown_tool" in {s.name for s in spans}
    assert not any("recipe" in s.name or "recipe" in repr(dict(s.attributes)) for s in spans)


def test_server_attributes_come_from_a_client_that_knows_its_endpoint():
    class Live(counter.ScriptedClient):
        server_address, server_port = "models.example", 443

    for client, expected in ((Live(), {"server.address": "models.example", "server.port": 443}),
                             (counter.ScriptedClient(), {})):
        tracer = cafe.Tracer()
        counter.TracingClient(client, tracer).chat([{"role": "user", "content": "hello"}])
        assert "server_address" not in tracer.render()  # transport detail, not part of the tree
        attributes = mapping.generation_start(_started_generation(client), None, None)
        assert {k: v for k, v in attributes.items() if k.startswith("server.")} == expected


def test_phase_mapping():
    event = PhaseStarted(1, None, 0.0, Phase.TURN, 2)
    assert event.name == "turn 2"
    attributes = mapping.phase_start(event)
    assert attributes == {"cafe.phase": "turn", "cafe.turn": 2}
    assert type(attributes["cafe.phase"]) is str  # the enum's value, not our type, goes out
    assert mapping.phase_start(PhaseStarted(2, None, 0.0, Phase.SETUP)) == {"cafe.phase": "setup"}


def test_capture_mode_from_argument_and_environment():
    env = {content.CAPTURE_ENV: "SPAN_AND_EVENT"}
    assert content.capture_mode(None, env) is content.CaptureMode.SPAN_AND_EVENT
    assert content.capture_mode(False, env) is content.CaptureMode.NO_CONTENT  # explicit wins
    assert content.capture_mode("event_only", {}) is content.CaptureMode.EVENT_ONLY
    assert content.capture_mode(None, {content.CAPTURE_ENV: "true"}) is content.CaptureMode.SPAN_ONLY
    assert content.capture_mode(None, {content.CAPTURE_ENV: "false"}) is content.CaptureMode.NO_CONTENT
    assert content.capture_mode(None, {content.CAPTURE_ENV: "yes please"}) is content.CaptureMode.NO_CONTENT
    assert content.capture_mode(None, {}) is content.CaptureMode.NO_CONTENT


def test_the_endpoint_shows_through_a_recording_wrapper(tmp_path):
    class Live(counter.ScriptedClient):
        server_address, server_port = "models.example", 8443

    recorder = counter.RecordingClient(Live(), tmp_path / "r.jsonl")
    started = _started_generation(recorder)
    recorder.close()
    attributes = mapping.generation_start(started, None, None)
    assert (attributes["server.address"], attributes["server.port"]) == ("models.example", 8443)
