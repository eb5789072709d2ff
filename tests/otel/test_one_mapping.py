"""Issue 9, part 2: one mapping. A live shift, its replay and `cafe export` of its recording
go through the same span listener, so their spans agree in everything but times and ids."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import cafe
from cafe import counter
from cafe.recording.format import Timing
from cafe_otel import AdvancedOptions, SequentialIdGenerator, configure, export_recording
from cafe_otel._offline.recording_export import calls_only_events, shift_events

ORIGIN = 1_767_225_600_000_000_000


def _tree(spans: Sequence[ReadableSpan]) -> list[tuple]:
    """(name, kind, attributes, children) with children in creation order (sequential ids):
    everything but times and ids."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        by_parent.setdefault(span.parent.span_id if span.parent else None, []).append(span)

    def build(parent: int | None) -> list[tuple]:
        children = sorted(by_parent.get(parent, []), key=lambda s: s.context.span_id)
        return [(s.name, s.kind.name, dict(s.attributes or {}), s.status.status_code.name,
                 [e.name for e in s.events], build(s.context.span_id)) for s in children]

    return build(None)


def _handle(sink: InMemorySpanExporter):
    return configure("cafe", exporter=sink, environ={},
                     advanced=AdvancedOptions(replay=True, id_generator=SequentialIdGenerator()))


def _three_ways(tmp_path: Path, client, script, decisions) -> tuple[list, list, list]:
    """Spans of the live (recorded) shift, of its replay and of `export_recording`."""
    path = tmp_path / "shift.jsonl"
    live_sink = InMemorySpanExporter()
    live = _handle(live_sink)
    run, _ = counter.record_shift(client, script, path, responder=counter.make_responder(decisions),
                               decisions=decisions, tracer=live.tracer())
    live.shutdown(2.0)

    replay_sink = InMemorySpanExporter()
    replay = _handle(replay_sink)
    replayed, _ = counter.replay_shift(path, tracer=replay.tracer(cafe.TickClock(), origin_unix_nano=ORIGIN))
    replay.shutdown(2.0)
    assert replayed.stop_reason == run.stop_reason

    export_sink = InMemorySpanExporter()
    exported = _handle(export_sink)
    count = export_recording(path, exported.provider)
    exported.shutdown(2.0)
    spans = [list(s.get_finished_spans()) for s in (live_sink, replay_sink, export_sink)]
    assert count == len(spans[2])
    return spans[0], spans[1], spans[2]


def test_the_built_in_shift_live_replayed_and_exported_gives_the_same_spans(tmp_path):
    live, replayed, exported = _three_ways(tmp_path, counter.ScriptedClient(), counter.DEFAULT_SCRIPT,
                                           counter.DEFAULT_DECISIONS)
    assert len(live) == 17
    assert _tree(live) == _tree(replayed) == _tree(exported)
    # Times may differ, but each export sits on its recording's timeline, not the wall clock now.
    calls = cafe.load_recording(tmp_path / "shift.jsonl").calls
    chats = sorted((s for s in exported if s.name.startswith("chat ")), key=lambda s: s.start_time)
    assert [s.start_time for s in chats] == [c.timing.start_unix_nano for c in calls]


def test_a_shift_with_consent_a_ticket_and_a_refused_fire_agrees_three_ways(tmp_path):
    def call(call_id: str, name: str, arguments: dict) -> dict:
        return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}

    order = {"items": ["latte"], "table": 4}
    client = counter.CannedClient([
        {"content": None, "tool_calls": [call("p1", "propose_order", order)]},
        {"content": None, "tool_calls": [call("f1", "fire_ticket", order)]},
        {"content": None, "tool_calls": [call("f2", "fire_ticket", order), call("x1", "Sell me the recipe", {})]},
    ])
    live, replayed, exported = _three_ways(tmp_path, client, ["A latte, table 4."], [["approve", None]])
    assert _tree(live) == _tree(replayed) == _tree(exported)
    tools = {(s.name, s.attributes["cafe.tool.status"], s.attributes.get("error.type")) for s in exported
             if s.name.startswith("execute_tool ")}
    assert tools == {("execute_tool propose_order", "approved", None), ("execute_tool fire_ticket", "fired", None),
                     ("execute_tool fire_ticket", "duplicate", "duplicate"),
                     ("execute_tool unknown_tool", "cancelled", "cancelled")}
    agent = next(s for s in exported if s.parent is None)
    assert (agent.attributes["cafe.stop_reason"], agent.attributes["cafe.shift.tickets"]) == ("consent_violation", 1)


def test_a_recording_that_does_not_replay_exports_its_calls_through_the_same_mapping(tmp_path):
    """A plain file from another harness (its requests are not what cafe would send): the
    calls alone, as `invoke_agent` and one `chat` per call, mapped like the live ones."""
    path = tmp_path / "shift.jsonl"
    counter.record_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, path, responder=counter.make_responder([]))
    recording = cafe.load_recording(path)
    foreign = tmp_path / "foreign.jsonl"
    lines = []
    for c in recording.calls:
        request = dict(c.request, messages=[{"role": "user", "content": "another harness's prompt"}])
        lines.append(json.dumps({"request": request, "response": c.response}))
    foreign.write_text("\n".join(lines) + "\n", encoding="utf-8")
    other = cafe.load_recording(foreign)
    assert [type(e).__name__ for e in shift_events(other)] == [type(e).__name__ for e in calls_only_events(other)]

    sink = InMemorySpanExporter()
    handle = _handle(sink)
    assert export_recording(foreign, handle.provider) == 5  # the order was rejected: 4 calls
    handle.shutdown(2.0)
    spans = list(sink.get_finished_spans())
    chats = [s for s in spans if s.name == "chat scripted-barista-1"]
    assert len(chats) == 4 and all(s.kind.name == "CLIENT" for s in chats)
    live_sink = InMemorySpanExporter()
    live = _handle(live_sink)
    counter.run_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, counter.make_responder([]),
                      tracer=live.tracer())
    live.shutdown(2.0)
    live_chats = sorted((s for s in live_sink.get_finished_spans() if s.name.startswith("chat ")),
                        key=lambda s: s.start_time)
    # Same keys and values, except what a headerless file of calls cannot know.
    unknown = {"cafe.turn": None, "gen_ai.conversation.id": None, "gen_ai.provider.name": "unknown"}
    for ours, theirs in zip(chats, live_chats, strict=True):
        expected = {k: unknown.get(k, v) for k, v in theirs.attributes.items()}
        assert dict(ours.attributes) == {k: v for k, v in expected.items() if v is not None}


@pytest.mark.parametrize("capture", ["SPAN_ONLY", "NO_CONTENT"])
def test_export_carries_content_only_when_asked(tmp_path, capture):
    path = tmp_path / "shift.jsonl"
    counter.record_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, path, responder=counter.make_responder([]))
    sink = InMemorySpanExporter()
    handle = configure("cafe", exporter=sink, environ={}, capture_content=capture,
                       advanced=AdvancedOptions(replay=True))
    export_recording(path, handle.provider, capture_content=capture)
    handle.shutdown(2.0)
    text = repr([dict(s.attributes) for s in sink.get_finished_spans()])
    assert ("A latte and a chocolate croissant" in text) is (capture == "SPAN_ONLY")


@settings(database=None, max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(timings=st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 10**8)), min_size=4, max_size=4),
       origin=st.one_of(st.none(), st.integers(0, 2 * 10**9)))
def test_any_recorded_timeline_puts_chats_at_their_calls_and_parents_around_children(tmp_path, timings, origin):
    """Recorded calls may overlap or run backwards (a stalled or stepped wall clock): each
    `chat` still sits at its recorded window and every span holds its children."""
    path = tmp_path / "timeline.jsonl"
    if not path.exists():
        counter.record_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, path,
                             responder=counter.make_responder([]))
    recording = cafe.load_recording(path)
    calls = [replace(c, timing=Timing(start, duration)) for c, (start, duration) in zip(recording.calls, timings,
                                                                                      strict=True)]
    recording = replace(recording, calls=calls, header=replace(recording.header, clock_origin_unix_nano=origin))
    sink = InMemorySpanExporter()
    handle = _handle(sink)
    assert export_recording(recording, handle.provider) == 14  # the order rejected: 4 calls
    handle.shutdown(2.0)
    spans = list(sink.get_finished_spans())
    by_id = {s.context.span_id: s for s in spans}
    chats = sorted((s for s in spans if s.name.startswith("chat ")), key=lambda s: s.context.span_id)
    assert [(s.start_time, s.end_time) for s in chats] == [(a, a + d) for a, d in timings]
    for span in spans:
        assert span.start_time <= span.end_time
        if span.parent is not None:
            parent = by_id[span.parent.span_id]
            assert parent.start_time <= span.start_time and span.end_time <= parent.end_time
