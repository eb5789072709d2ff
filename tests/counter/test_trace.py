"""The span tree: nesting, kinds, generations, rendering, clocks, usage and export."""

from __future__ import annotations

import copy
import json

import pytest

from cafe import NullTracer, TickClock, Tracer, Usage, export_fail_soft, usage_of
from cafe.counter import DEFAULT_SCRIPT, CannedClient, ScriptedClient, TracingClient, run_shift
from cafe.counter.clients.scripted import TEXT_TURN_USAGE, TOOL_TURN_USAGE

from .helpers import approve_once, call, say


def test_tick_clock_ticks():
    clock = TickClock()
    assert [clock(), clock(), clock()] == [0.0, 1.0, 2.0]
    half = TickClock(step=0.5, start=10.0)
    assert [half(), half()] == [10.0, 10.5]
    for bad in (0, -1):
        with pytest.raises(ValueError):
            TickClock(step=bad)


def test_spans_nest_and_are_found_by_kind():
    tracer = Tracer(clock=TickClock())
    with tracer.span("shift", "shift", agent="a") as opened:
        with (
            tracer.span("turn 1", "phase", turn=1),
            tracer.span("price_check", "tool", tool="price_check") as tool_scope,
        ):
            tool_scope.set(status="ok")
            assert tool_scope.attrs == {"tool": "price_check", "status": "ok"}
        with tracer.span("wrapup", "phase"):
            pass
    [shift] = tracer.roots
    turn, wrapup = shift.children
    [tool] = turn.children
    assert shift.span_id == opened.span_id and tool.span_id == tool_scope.span_id
    assert (shift.name, turn.name, tool.name, wrapup.name) == ("shift", "turn 1", "price_check", "wrapup")
    assert tool.parent is turn and turn.parent is shift and shift.parent is None
    assert tracer.nodes() == [shift, turn, tool, wrapup]
    assert tracer.nodes("phase") == [turn, wrapup]
    assert tracer.nodes("tool") == [tool]
    assert tracer.nodes("generation") == [] == tracer.generations()
    assert tool.attrs == {"tool": "price_check", "status": "ok"}
    assert tool.inherited("turn") == 1 and tool.inherited("missing") is None
    # Ticks: shift 0, turn 1, tool 2..3, turn ends 4, wrapup 5..6, shift ends 7.
    assert (shift.start, shift.end, shift.duration) == (0.0, 7.0, 7.0)
    assert (tool.duration, turn.duration, wrapup.duration) == (1.0, 3.0, 1.0)
    assert len({n.span_id for n in tracer.nodes()}) == 4


def test_a_failing_span_records_the_error_type_and_reraises():
    tracer = Tracer(clock=TickClock())
    with pytest.raises(KeyError), tracer.span("outer", "phase"), tracer.span("inner", "tool"):
        raise KeyError("x")
    outer = tracer.roots[0]
    assert outer.error_type == "KeyError" and outer.failed
    assert outer.children[0].error_type == "KeyError"
    assert outer.end is not None and outer.children[0].end is not None
    with tracer.span("after", "phase") as after:
        pass
    assert after.parent_id is None and tracer.roots[-1].span_id == after.span_id  # the stack was unwound
    assert tracer.roots[-1].parent is None


def test_render_shows_tree_kinds_durations_tokens_and_attributes():
    tracer = Tracer(clock=TickClock())
    run_shift(ScriptedClient(), DEFAULT_SCRIPT, approve_once(), tracer=tracer)
    text = tracer.render()
    lines = text.splitlines()
    assert len(lines) == len(tracer.nodes())
    assert lines[0].startswith("shift  [shift]")
    assert "stop_reason=answered" in lines[0]
    assert any(line.startswith(("├─ turn 1", "└─ turn 1")) for line in lines)
    generation_lines = [line for line in lines if "[generation]" in line]
    assert len(generation_lines) == 5
    tool_tokens = f"tokens={TOOL_TURN_USAGE[0]}+{TOOL_TURN_USAGE[1]}"
    assert tool_tokens in generation_lines[0]
    assert "tool_calls=price_check,price_check" in generation_lines[0]
    assert f"tokens={TEXT_TURN_USAGE[0]}+{TEXT_TURN_USAGE[1]}" in generation_lines[1]
    assert "tool_calls=propose_order" in generation_lines[2] and "tool_calls=fire_ticket" in generation_lines[3]
    assert all("1.000s" in line for line in generation_lines)
    assert any("│  ├─ " in line or "│  └─ " in line for line in lines)  # nested under a turn
    assert text == tracer.render()


def test_shift_phases_generations_and_tools_form_the_tree():
    tracer = Tracer(clock=TickClock())
    run = run_shift(ScriptedClient(), DEFAULT_SCRIPT, approve_once(), tracer=tracer)
    [shift] = tracer.roots
    assert shift.kind == "shift" and shift.attrs["stop_reason"] == run.stop_reason
    assert [c.name for c in shift.children] == ["setup", "turn 1", "turn 2", "turn 3", "turn 4", "turn 5",
                                                "wrapup"]
    assert all(g.parent.attrs.get("phase") == "turn" for g in tracer.generations())
    assert [t.inherited("turn") for t in tracer.nodes("tool")] == [1, 1, 3, 4]
    assert [t.attrs["status"] for t in tracer.nodes("tool")] == ["ok", "ok", "approved", "fired"]
    assert tracer.nodes("tool")[-1].attrs["ticket_number"] == 1


class _Echo:
    model, provider = "echo-1", "test"

    def __init__(self):
        self.calls = 0

    def chat(self, messages, tools=None, temperature=0.0, tool_choice=None):
        self.calls += 1
        message = {"role": "assistant", "content": "fine", "tool_calls": [call("t1", "price_check", {"item": "latte"}),
                                                                            call("t2", "close_check", {"table": 1})]}
        return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}, "model": "echo-1"}


def test_tracing_client_records_one_generation_per_chat_with_a_deep_copied_input():
    tracer = Tracer(clock=TickClock())
    inner = _Echo()
    client = TracingClient(inner, tracer)
    assert (client.model, client.provider, client.calls) == ("echo-1", "test", 0)
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "A latte."}]
    snapshot = json.loads(json.dumps(messages))
    response = client.chat(messages, None, 0.3)
    messages.append({"role": "assistant", "content": "changed later"})
    messages[1]["content"] = "mutated after the call"
    [node] = tracer.generations()
    g = node.generation
    assert g.input == snapshot
    assert (g.model, g.provider, g.temperature) == ("echo-1", "test", 0.3)
    assert g.output == "fine"
    assert g.tool_calls == ["price_check", "close_check"]
    assert g.usage == {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}
    assert g.finish_reason == "tool_calls"
    assert response is g.response
    assert client.calls == inner.calls == 1
    assert node.name == "chat echo-1"
    client.chat(messages)
    assert len(tracer.generations()) == 2


def test_tracing_client_delegates_other_attributes_and_can_be_copied():
    inner = _Echo()
    inner.server_address = "127.0.0.1"
    client = TracingClient(inner, Tracer())
    assert client.server_address == "127.0.0.1"
    with pytest.raises(AttributeError):
        _ = client.no_such_attribute
    clone = copy.copy(client)
    assert clone.inner is inner and clone.server_address == "127.0.0.1"
    deep = copy.deepcopy(client)
    assert deep.inner is not inner and deep.model == "echo-1"


def test_generation_span_records_a_failed_call():
    class Broken(_Echo):
        def chat(self, *args, **kwargs):
            raise RuntimeError("endpoint down")

    tracer = Tracer()
    with pytest.raises(RuntimeError):
        TracingClient(Broken(), tracer).chat([{"role": "user", "content": "x"}])
    [node] = tracer.generations()
    assert node.error_type == "RuntimeError"
    assert node.generation.output is None and node.generation.usage == {}


def test_run_shift_does_not_wrap_a_tracing_client_twice():
    tracer = Tracer()
    run_shift(TracingClient(ScriptedClient(), tracer), DEFAULT_SCRIPT, approve_once(), tracer=tracer)
    assert len(tracer.generations()) == 5
    assert all(not any(c.kind == "generation" for c in g.children) for g in tracer.generations())


def test_usage_of_sums_tokens_and_seconds():
    tracer = Tracer(clock=TickClock(step=0.25))
    run_shift(ScriptedClient(), DEFAULT_SCRIPT, approve_once(), tracer=tracer)
    usage = usage_of(tracer)
    prompt = 3 * TOOL_TURN_USAGE[0] + 2 * TEXT_TURN_USAGE[0]
    completion = 3 * TOOL_TURN_USAGE[1] + 2 * TEXT_TURN_USAGE[1]
    assert usage == Usage(calls=5, input_tokens=prompt, output_tokens=completion,
                          total_tokens=prompt + completion, seconds=1.25)
    assert usage_of(Tracer()) == Usage(0, 0, 0, 0, 0.0)


def test_null_tracer_has_the_interface_and_does_nothing():
    exported = []
    tracer = NullTracer(exporter=exported.append, clock=TickClock())
    assert not tracer.listening and tracer.tree is None
    with tracer.span("shift", "shift", a=1) as node:
        node.set(b=2)
        with tracer.span("inner", "tool"):
            pass
    messages = [{"role": "user", "content": "x"}]
    with tracer.generation("chat", model="m", provider="p", input=messages) as g:
        assert g.request.messages == ()  # nothing is copied for nobody
    assert tracer.nodes() == [] and tracer.nodes("tool") == [] and tracer.generations() == []
    assert tracer.roots == []
    assert tracer.render() == ""
    assert tracer.export() is None and exported == []
    assert export_fail_soft(tracer) is None
    assert usage_of(tracer).calls == 0
    client = ScriptedClient()
    run = run_shift(client, DEFAULT_SCRIPT, approve_once(), tracer=tracer)
    assert run.stop_reason == "answered" and client.calls == 5
    assert tracer.nodes() == []


def test_export_hands_the_tree_to_the_exporter_as_plain_data():
    batches = []
    tracer = Tracer(exporter=batches.append, clock=TickClock())
    run_shift(ScriptedClient(), DEFAULT_SCRIPT, approve_once(), tracer=tracer)
    tracer.export()
    [roots] = batches
    assert [root["name"] for root in roots] == ["shift"]
    json.dumps(roots)  # plain JSON data
    turn1 = roots[0]["children"][1]
    generation = turn1["children"][0]["generation"]
    assert generation["tool_calls"] == ["price_check", "price_check"]
    assert generation["input"][-1] == {"role": "user", "content": DEFAULT_SCRIPT[0]}
    assert export_fail_soft(tracer) is None and len(batches) == 2


class CollectorDown(ConnectionError):
    pass


DOWN = CollectorDown("collector at 127.0.0.1:4317 is down")


def _dead_exporter(spans):
    raise DOWN


def test_export_raises_what_the_exporter_raises_and_fail_soft_returns_it():
    tracer = Tracer(exporter=_dead_exporter, clock=TickClock())
    run = run_shift(ScriptedClient(), DEFAULT_SCRIPT, approve_once(), tracer=tracer)
    with pytest.raises(CollectorDown) as caught:
        tracer.export()
    assert caught.value is DOWN
    error = export_fail_soft(tracer)
    # The class names the failure; the message (an address here, customer text elsewhere) stays out.
    assert error == "CollectorDown"
    assert run.stop_reason == "answered"  # the shift's outcome is untouched
    assert tracer.roots[0].attrs["stop_reason"] == "answered"


def test_the_lessons_export_and_the_bounded_call_report_a_dead_exporter_alike():
    """One boundary: the lesson's `export_fail_soft` (on the caller's thread) and the bounded
    `FailSoft.call` the OTel exporters go through name the same failure the same way."""
    from cafe.trace.failsoft import FailSoft, attempt

    tracer = Tracer(exporter=_dead_exporter, clock=TickClock())
    run_shift(ScriptedClient(), DEFAULT_SCRIPT, approve_once(), tracer=tracer)
    bounded, here = FailSoft(5.0).call(tracer.export), attempt(tracer.export)
    assert export_fail_soft(tracer) == bounded.error_type == here.error_type == "CollectorDown"
    assert bounded.why == here.why == "raised CollectorDown"  # the class, never the address in the message
    assert attempt(lambda: "shipped").value == "shipped" and export_fail_soft(Tracer()) is None


def test_fail_soft_without_an_exporter_or_with_a_good_one_is_none():
    assert export_fail_soft(Tracer()) is None
    assert export_fail_soft(Tracer(exporter=lambda spans: "shipped")) is None


def test_wall_clock_tracer_measures_real_durations():
    import time

    class Slow(CannedClient):
        def chat(self, *args, **kwargs):
            time.sleep(0.05)  # a lower bound the wall clock must show; no upper bound is asserted
            return super().chat(*args, **kwargs)

    tracer = Tracer()
    run_shift(Slow([say("hi")]), ["hello"], approve_once(), tracer=tracer)
    [generation] = tracer.generations()
    assert generation.duration >= 0.05
    assert tracer.roots[0].duration >= generation.duration
    for node in tracer.nodes():
        if node.parent is not None:  # each span lies within its parent
            assert node.parent.start <= node.start and node.end <= node.parent.end


def test_durations_read_at_their_own_scale():
    from cafe.trace.render import format_seconds

    assert [format_seconds(s) for s in (0.000_000_4, 0.000_112, 0.0123, 0.999_94, 1.0, 61.5)] == [
        "0µs", "112µs", "12.3ms", "999.9ms", "1.000s", "61.500s",
    ]


def test_an_input_that_cannot_be_copied_costs_the_trace_its_copy_not_the_call():
    from cafe.errors import ConversationError

    cyclic = {"role": "user", "content": "a latte please"}
    cyclic["again"] = cyclic
    tracer = Tracer()
    client = TracingClient(ScriptedClient(), tracer)
    assert client.chat([cyclic])["choices"]  # answered, as the client alone answers it
    assert tracer.inputs_not_kept == 1
    with pytest.raises(ConversationError):  # the client's named verdict, not a TypeError from the copy
        client.chat(message for message in [{"role": "user", "content": "hi"}])  # type: ignore[arg-type]
    assert tracer.inputs_not_kept == 2
