"""What a model call of a shift costs does not grow with the shift, and the history every
call shares stays read-only for its listeners.

Costs are counted (bytes held, messages read), never timed."""

from __future__ import annotations

import copy
import gc
import itertools
import tracemalloc
from typing import Any

import pytest

from cafe import Tracer
from cafe.counter import ScriptedClient, TracingClient, make_responder, run_shift
from cafe.counter.clients.base import ToolCallIdCheck
from cafe.errors import ConversationError, UnknownToolCallId
from cafe.trace.events import GenerationStarted, TraceEvent

from .helpers import call


def _script(turns: int) -> list[str]:
    # Each line names an item: a price_check call and its answer, two model calls a line.
    return ["A latte, please."] * (turns // 2)


def _held_per_call(turns: int) -> float:
    """Bytes a shift of `turns` model calls leaves held by its tracer (the in-memory tree
    and the events' inputs), per call."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracer = Tracer()
        run = run_shift(ScriptedClient(), _script(turns), make_responder([]), tracer=tracer, max_turns=turns)
        del run  # the conversation itself is the ShiftRun's, not the trace's
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(tracer.generations()) == turns
    return held / turns


def test_the_trace_of_a_call_holds_as_much_at_the_400th_call_as_at_the_40th():
    small, large = _held_per_call(40), _held_per_call(400)
    # A copy of the conversation per call would hold ten times as much per call at 400.
    assert large < 1.5 * small, (small, large)


class _CountingMessage(dict[str, Any]):
    """A message that counts how often it is read."""

    reads = 0

    def get(self, key: str, default: Any = None) -> Any:
        _CountingMessage.reads += 1
        return super().get(key, default)


def test_a_client_checks_each_message_once_not_once_a_call():
    client = ScriptedClient()
    messages: list[dict[str, Any]] = [_CountingMessage(role="system", content="s")]
    _CountingMessage.reads = 0
    for line in range(100):
        messages.append(_CountingMessage(role="user", content=f"Line {line}: what do you have?"))
        reply = client.chat(messages)["choices"][0]["message"]
        messages.append(_CountingMessage(reply))
    # Read when checked and when noted by the model (once each), and the last one again for
    # the reply: bounded by a constant per message, where reading the whole list per call
    # reads ~n²/2 = 10,000.
    assert _CountingMessage.reads <= 8 * len(messages), _CountingMessage.reads


def test_a_growing_conversation_is_still_refused_where_it_goes_wrong():
    check = ToolCallIdCheck()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"},
                                      {"role": "assistant", "tool_calls": [call("c1", "price_check", {})]}]
    check(messages)
    messages.append({"role": "tool", "tool_call_id": "c1", "content": "{}"})
    check(messages)
    messages.append({"role": "tool", "tool_call_id": "c9", "content": "{}"})
    with pytest.raises(UnknownToolCallId) as refused:
        check(messages)
    assert refused.value.index == 3  # the place in the whole conversation
    messages[3] = {"role": "tool", "tool_call_id": "c1", "content": "{}"}  # fixed after the refusal
    check(messages)
    messages.append("not a message")  # type: ignore[arg-type]
    with pytest.raises(ConversationError, match=r"messages\[4\]"):
        check(messages)


@pytest.mark.parametrize("change", ["shorter", "last replaced", "another list"])
def test_a_conversation_changed_other_than_at_its_end_is_checked_whole(change):
    check = ToolCallIdCheck()
    messages: list[dict[str, Any]] = [{"role": "assistant", "tool_calls": [call("c1", "price_check", {})]},
                                      {"role": "tool", "tool_call_id": "c1", "content": "{}"},
                                      {"role": "user", "content": "thanks"}]
    check(messages)
    unopened = {"role": "user", "content": "no call opened"}
    if change == "shorter":
        del messages[0], messages[-1]  # the tool result is left with nothing to answer
    elif change == "last replaced":
        messages[0] = unopened  # the call is gone, and the last message is another object
        messages[2] = {"role": "user", "content": "thanks"}
    else:
        messages = [unopened, *messages[1:]]
    with pytest.raises(UnknownToolCallId):
        check(messages)


def _first_inputs(tracer: Tracer) -> list[Any]:
    return [node.generation.input for node in tracer.generations() if node.generation is not None]


def test_the_calls_of_a_shift_share_one_frozen_copy_of_each_message():
    tracer = Tracer()
    run = run_shift(ScriptedClient(), _script(6), make_responder([]), tracer=tracer, max_turns=6)
    inputs = _first_inputs(tracer)
    assert [len(i) for i in inputs] == [2, 4, 6, 8, 10, 12]
    for earlier, later in itertools.pairwise(inputs):
        assert all(a is b for a, b in zip(earlier, later, strict=False))  # shared, not copied again
    for sent in inputs:
        assert sent == run.messages[: len(sent)]
        assert all(message is not original for message, original in zip(sent, run.messages, strict=False))


class _Vandal:
    """A listener that tries to change what it is given."""

    def __init__(self) -> None:
        self.refused = 0

    def on_event(self, event: TraceEvent) -> None:
        if isinstance(event, GenerationStarted):
            messages = event.request.messages
            for change in (lambda: messages[0].__setitem__("content", "changed"),
                           lambda: messages[-1].pop("content"),
                           lambda: messages[0].update(role="user")):
                try:
                    change()
                except TypeError:
                    self.refused += 1
            raise RuntimeError("and then fails")


class _Keeper:
    def __init__(self) -> None:
        self.inputs: list[Any] = []

    def on_event(self, event: TraceEvent) -> None:
        if isinstance(event, GenerationStarted):
            self.inputs.append(event.request.messages)


def test_a_listener_cannot_change_the_history_others_read():
    vandal, keeper = _Vandal(), _Keeper()
    tracer = Tracer(listeners=[vandal, keeper])
    run = run_shift(ScriptedClient(), _script(4), make_responder([]), tracer=tracer, max_turns=4)
    calls = len(keeper.inputs)
    assert vandal.refused == 3 * calls and tracer.listener_failures == calls
    assert run.messages[0]["content"] != "changed"
    for kept, node in zip(keeper.inputs, tracer.generations(), strict=True):
        assert kept == node.generation.input == run.messages[: len(kept)]
        assert kept[0]["role"] == "system" and kept[0]["content"] == run.messages[0]["content"]


def test_the_tree_hands_out_a_read_only_input_and_a_plain_copy_of_it():
    tracer = Tracer()
    run = run_shift(ScriptedClient(), _script(2), make_responder([]), tracer=tracer, max_turns=2)
    first = tracer.generations()[0].generation
    with pytest.raises(TypeError, match="read-only"):
        first.input[1]["content"] = "edited"
    second = tracer.generations()[1].generation
    with pytest.raises(TypeError):
        second.input[2]["tool_calls"].append({})
    with pytest.raises(TypeError):
        del second.input[2]["tool_calls"][0]
    mine = copy.deepcopy(first.input)
    assert type(mine) is list and type(mine[0]) is dict and mine == first.input
    mine[1]["content"] = "edited"
    mine.append({"role": "user", "content": "more"})
    assert tracer.generations()[0].generation.input == run.messages[:2]
    assert "A latte" not in repr(first.input)  # customer text stays out of a repr


def test_a_followed_conversation_changed_behind_the_tracer_is_kept_as_it_was_sent():
    tracer = Tracer()
    client = TracingClient(ScriptedClient(), tracer)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "s"}, {"role": "user", "content": "one"}]
    tracer.follow(messages)
    client.chat(messages)
    messages[1] = {"role": "user", "content": "two"}  # replaced, against the promise
    client.chat(messages)
    del messages[1]
    client.chat(messages)
    inputs = _first_inputs(tracer)
    assert [[m["content"] for m in sent] for sent in inputs] == [["s", "one"], ["s", "two"], ["s"]]


def test_a_list_nobody_follows_is_kept_exactly_as_each_call_sent_it():
    tracer = Tracer()
    client = TracingClient(ScriptedClient(), tracer)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "first"}]
    client.chat(messages)
    messages[0]["content"] = "edited in place"
    client.chat(messages)
    assert [sent[0]["content"] for sent in _first_inputs(tracer)] == ["first", "edited in place"]


def _recorded_bytes_per_call(tmp_path: Any, turns: int) -> float:
    from cafe.counter import record_shift

    path = tmp_path / f"shift-{turns}.jsonl"
    run, _ = record_shift(ScriptedClient(), _script(turns), path, responder=make_responder([]), max_turns=turns)
    return (path.stat().st_size - len(path.read_bytes().split(b"\n", 1)[0])) / run.model_calls


def test_a_recorded_call_takes_as_many_bytes_at_the_400th_call_as_at_the_40th(tmp_path: Any) -> None:
    small, large = _recorded_bytes_per_call(tmp_path, 40), _recorded_bytes_per_call(tmp_path, 400)
    # A line holding the whole conversation takes about ten times as much per call at 400.
    assert large < 1.5 * small, (small, large)
