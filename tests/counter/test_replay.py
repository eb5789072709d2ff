"""The seed's checkpoint: record the two-line shift, replay it with zero model calls, and the
two invariants of a recording (matching, exhaustion). Also the handover note's determinism."""

from __future__ import annotations

import json
import random
import time

import pytest

from cafe import RecordingExhausted, ReplayMismatch, TickClock, Tracer, UnusedCalls, load_records
from cafe.counter import (
    DEFAULT_SCRIPT,
    CannedClient,
    RecordingClient,
    ReplayClient,
    ScriptedClient,
    decisions_shown,
    handover_note,
    make_responder,
    record_shift,
    replay_shift,
    run_shift,
    transcript,
)
from cafe.counter.clients.base import make_response
from cafe.counter.handover import FLOURISHES
from cafe.recording import load_recording
from cafe.recording.writer import partial_path

from .helpers import call, calls, say

DECISIONS = [("approve", None)]


def _fresh_responder():
    return make_responder(DECISIONS)


@pytest.fixture
def recorded(tmp_path):
    """The two-line shift recorded with a ticking clock: (path, live client, run, tracer)."""
    path = tmp_path / "shift.jsonl"
    live = ScriptedClient()
    run, tracer = record_shift(
        live, DEFAULT_SCRIPT, path, responder=_fresh_responder(), tracer=Tracer(clock=TickClock())
    )
    return path, live, run, tracer


def test_checkpoint_record_then_replay_twice_with_zero_model_calls(recorded):
    path, live, run, tracer = recorded
    assert run.stop_reason == "answered"
    assert live.calls == run.model_calls == 5
    records = load_records(path)
    assert len(records) == 5
    assert all(set(r) == {"request", "response"} for r in records)
    assert records[0]["request"]["messages"][-1] == {"role": "user", "content": DEFAULT_SCRIPT[0]}

    calls_before = live.calls
    replays = [
        replay_shift(path, DEFAULT_SCRIPT, responder=_fresh_responder(), tracer=Tracer(clock=TickClock()))
        for _ in range(2)
    ]
    assert live.calls == calls_before  # 0 model calls during the replays
    (first, first_tracer), (second, second_tracer) = replays
    assert transcript(first) == transcript(run) == transcript(second)
    assert first.stop_reason == second.stop_reason == run.stop_reason
    assert first_tracer.render() == second_tracer.render()
    assert first_tracer.render() == tracer.render()
    assert first.model_calls == 5


def test_recorded_requests_and_responses_are_what_the_shift_sent_and_got(recorded):
    path, _, run, _ = recorded
    records = load_records(path)
    assistant = [m for m in run.messages if m["role"] == "assistant"]
    assert [r["response"]["choices"][0]["message"] for r in records] == json.loads(json.dumps(assistant))
    # Each request is the conversation up to that call (recorded before the loop moved on).
    lengths = [len(r["request"]["messages"]) for r in records]
    assert lengths == [2, 5, 7, 9, 11]
    assert records[4]["request"]["messages"] == json.loads(json.dumps(run.messages[:11]))


def test_replay_reads_script_and_decisions_from_a_recording_when_not_given(tmp_path):
    path = tmp_path / "shift.jsonl"
    run, _ = record_shift(ScriptedClient(), DEFAULT_SCRIPT, path, responder=_fresh_responder(),
                          decisions=DECISIONS)
    again, _ = replay_shift(path)
    assert transcript(again) == transcript(run)


def test_a_stale_script_raises_replay_mismatch_naming_call_and_path_without_customer_text(recorded):
    path, live, _, _ = recorded
    stale = DEFAULT_SCRIPT[1:]
    with pytest.raises(ReplayMismatch) as caught:
        replay_shift(path, stale, responder=_fresh_responder())
    error = caught.value
    text = str(error)
    assert error.call == 1
    assert error.json_path == "$.messages[1].content"
    assert "call 1" in text and "$.messages[1].content" in text
    for line in DEFAULT_SCRIPT:
        assert line not in text
    for word in ("latte", "croissant", "Nothing else"):
        assert word not in text
    assert live.calls == 5


def test_one_call_fewer_is_caught_by_exhaustion_not_by_matching(recorded):
    path, _, _, _ = recorded
    with pytest.raises(UnusedCalls) as caught:
        replay_shift(path, DEFAULT_SCRIPT[:1], responder=_fresh_responder())
    assert not isinstance(caught.value, ReplayMismatch)
    assert "3 recorded call(s) were never made, from call 3" in str(caught.value)
    with pytest.raises(UnusedCalls):
        replay_shift(path, DEFAULT_SCRIPT, responder=_fresh_responder(), max_turns=2)


def test_matching_alone_does_not_see_a_missing_call_assert_exhausted_does(recorded):
    path, _, _, _ = recorded
    client = ReplayClient(path)
    run = run_shift(client, DEFAULT_SCRIPT, _fresh_responder(), max_turns=2)  # every call matched
    assert run.stop_reason == "turn_cap" and client.calls == 2
    with pytest.raises(UnusedCalls):
        client.assert_exhausted()
    full = ReplayClient(path)
    run_shift(full, DEFAULT_SCRIPT, _fresh_responder())
    full.assert_exhausted()  # all three used: no error


def test_one_call_more_than_recorded_is_refused(recorded):
    path, _, _, _ = recorded
    with pytest.raises(RecordingExhausted):
        replay_shift(path, [*DEFAULT_SCRIPT, "Actually, one more thing."], responder=_fresh_responder())


def test_a_harness_change_to_the_request_is_a_mismatch(recorded):
    path, _, _, _ = recorded
    with pytest.raises(ReplayMismatch) as caught:
        replay_shift(path, DEFAULT_SCRIPT, responder=_fresh_responder(), system_prompt="You are a robot.")
    assert caught.value.json_path == "$.messages[0].content"
    with pytest.raises(ReplayMismatch) as caught:
        replay_shift(path, DEFAULT_SCRIPT, responder=_fresh_responder(), temperature=0.7)
    assert caught.value.json_path == "$.temperature"


def test_a_crash_keeps_every_finished_call(tmp_path):
    class Crashes(ScriptedClient):
        def chat(self, messages, tools=None, temperature=0.0, tool_choice=None):
            if self.calls == 2:
                raise ConnectionError("the model went away")
            return super().chat(messages, tools, temperature, tool_choice)

    path = tmp_path / "crash.jsonl"
    with pytest.raises(ConnectionError) as caught:
        record_shift(Crashes(), DEFAULT_SCRIPT, path, responder=_fresh_responder())
    # The path only ever holds a finished recording; the calls made are kept beside it.
    assert not path.exists()
    kept = partial_path(path)
    assert len(load_records(kept)) == 2
    assert caught.value.__notes__ == [f"the 2 call(s) recorded before it are kept in {kept}"]


def test_recording_client_flushes_each_line_as_it_is_written(tmp_path):
    path = tmp_path / "live.jsonl"
    recorder = RecordingClient(ScriptedClient(), path)
    try:
        recorder.chat([{"role": "user", "content": "hello"}])
        # Read while the writer is still open: the call is already on disk.
        assert len(load_records(partial_path(path))) == 1
        recorder.chat([{"role": "user", "content": "a latte"}])
        assert len(load_records(partial_path(path))) == 2
        assert not path.exists()
    finally:
        recorder.close()
    assert len(load_records(path)) == 2 and not partial_path(path).exists()


def test_a_consent_shift_replays_identically_with_a_fresh_responder(tmp_path):
    replies = [
        calls(call("p1", "propose_order", {"items": ["latte"], "table": 2}), call("f1", "fire_ticket",
                                                                                 {"items": ["latte"], "table": 2})),
        say("Fired."),
        calls(call("f2", "fire_ticket", {"items": ["latte"], "table": 2})),
    ]
    path = tmp_path / "consent.jsonl"
    run, _ = record_shift(CannedClient(replies), ["A latte.", "Again!"], path, responder=_fresh_responder())
    assert run.stop_reason == "consent_violation"
    again, _ = replay_shift(path, ["A latte.", "Again!"], responder=_fresh_responder())
    assert transcript(again) == transcript(run)
    assert [f.status for f in again.fires] == ["fired", "duplicate"]
    # A responder reused from the recording is drained: its proposal is rejected, the fire is
    # refused, and the replayed shift stops early with recorded calls left over.
    drained = _fresh_responder()
    drained("", None)
    with pytest.raises(UnusedCalls):
        replay_shift(path, ["A latte.", "Again!"], responder=drained)


def test_a_recording_made_with_make_responder_keeps_its_decisions_for_the_replay(tmp_path):
    path = tmp_path / "shift.jsonl"
    run, _ = record_shift(ScriptedClient(), DEFAULT_SCRIPT, path, responder=make_responder([("approve", None)]))
    assert load_recording(path).header.decisions == [["approve", None]]
    again, _ = replay_shift(path)  # the customer who approved, rebuilt from the header
    assert transcript(again) == transcript(run) and [t.number for t in again.tickets] == [1]


@pytest.mark.parametrize("decisions", [
    [("approve", None)],
    [("reject", None)],
    [("edit", {"items": ["latte"], "table": 4}), ("approve", None)],
])
def test_a_recording_without_decisions_replays_the_customer_its_conversation_shows(tmp_path, decisions):
    path = tmp_path / "shift.jsonl"
    queue = list(decisions)

    def customer(rendered, ticket):  # a responder of the caller's own
        return queue.pop(0) if queue else ("reject", None)

    run, _ = record_shift(ScriptedClient(), DEFAULT_SCRIPT, path, responder=customer)
    recording = load_recording(path)
    assert recording.header.decisions is None
    assert decisions_shown(recording) == decisions
    again, _ = replay_shift(path)
    assert transcript(again) == transcript(run)
    # A plain {request, response} file of the same calls shows the same customer.
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps({"request": c.request, "response": c.response}) + "\n"
                             for c in recording.calls))
    assert decisions_shown(load_recording(plain)) == decisions


def test_decisions_shown_reads_nothing_it_cannot_understand(tmp_path):
    path = tmp_path / "odd.jsonl"
    proposal = {"role": "assistant", "content": None,
                "tool_calls": [call("p1", "propose_order", {"items": ["latte"], "table": 1})]}
    odd = [{"role": "user", "content": "hi"}, proposal,
           {"role": "tool", "tool_call_id": "p1", "content": "not json"},
           {"role": "tool", "tool_call_id": "p1", "content": json.dumps({"status": "rounds_exhausted"})},
           {"role": "tool", "tool_call_id": "p1", "content": json.dumps({"status": "approved"})}]
    response = make_response({"role": "assistant", "content": "ok"}, model="m", response_id="r1", usage=(1, 1))
    path.write_text(json.dumps({"request": {"messages": odd}, "response": response}) + "\n")
    assert decisions_shown(load_recording(path)) == []  # stops at an outcome that is no answer


# --- the handover note ------------------------------------------------------------------

FIXED_NOW = 1_800_000_000.25


def test_handover_note_is_identical_across_replays_with_injected_clock_and_fresh_rng(recorded):
    path, _, run, _ = recorded
    notes = []
    for _ in range(2):
        replayed, _ = replay_shift(path, DEFAULT_SCRIPT, responder=_fresh_responder())
        notes.append(handover_note(replayed, clock=lambda: FIXED_NOW, rng=random.Random(7)))
    assert notes[0] == notes[1]
    assert notes[0] == handover_note(run, clock=lambda: FIXED_NOW, rng=random.Random(7))
    assert "2027-01-15 08:00:00.250000 UTC" in notes[0]
    assert notes[0].splitlines()[-1] in FLOURISHES
    assert "answered" in notes[0] and "5 model call(s)" in notes[0]
    assert "ticket 1 (turn 4, approval A1): table 1, 2 item(s), EUR 3.70" in notes[0]


def test_handover_note_from_wall_clock_and_global_rng_differs(recorded):
    path, _, _, _ = recorded
    replayed, _ = replay_shift(path, DEFAULT_SCRIPT, responder=_fresh_responder())
    notes = {handover_note(replayed, clock=time.time, rng=random) for _ in range(20)}
    assert len(notes) > 1


def test_a_shared_seeded_rng_drifts_between_runs_in_one_process(recorded):
    _, _, run, _ = recorded
    shared = random.Random(7)
    notes = {handover_note(run, clock=lambda: FIXED_NOW, rng=shared) for _ in range(20)}
    assert len(notes) > 1
    fresh = {handover_note(run, clock=lambda: FIXED_NOW, rng=random.Random(7)) for _ in range(20)}
    assert len(fresh) == 1


def test_handover_note_lists_tickets_and_refused_fires():
    replies = [
        calls(call("p1", "propose_order", {"items": ["latte", "croissant"], "table": 3}),
              call("f1", "fire_ticket", {"items": ["latte", "croissant"], "table": 3})),
        say("Fired."),
        calls(call("f2", "fire_ticket", {"items": ["latte", "croissant"], "table": 3})),
    ]
    run = run_shift(CannedClient(replies), ["Latte and croissant.", "Again!"], _fresh_responder())
    note = handover_note(run, clock=lambda: FIXED_NOW, rng=random.Random(7))
    assert "ticket 1 (turn 1, approval A1): table 3, 2 item(s), EUR 3.50" in note
    assert "fire duplicate at turn 3 (f2)" in note
    quiet = run_shift(ScriptedClient(), DEFAULT_SCRIPT, make_responder([("reject", None)]))
    assert "no tickets fired" in handover_note(quiet, clock=lambda: FIXED_NOW, rng=random.Random(7))
