"""Replay: the format round trip, the legacy form, mismatches with a structural diff, unused
calls, exhaustion, declared normalisation, and one-line errors that quote nothing unscrubbed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cafe import counter
from cafe.counter import RecordingClient, ReplayClient, record_shift, replay_shift
from cafe.counter.clients.canned import CannedClient
from cafe.counter.clients.scripted import ScriptedClient
from cafe.counter.consent import make_responder
from cafe.counter.transcript import transcript
from cafe.privacy import REDACTED, Scrubber
from cafe.recording import FORMAT_VERSION, RecordingExhausted, ReplayMismatch, UnusedCalls, load_recording, normalise
from cafe.recording.diff import first_difference
from cafe.recording.errors import UnusableIgnorePath
from cafe.recording.format import SHARED_VERSION
from tests.recording.helpers import CUSTOMER_TEXT, run_cli

SCRIPT = ["A latte and a chocolate croissant, please.", "Nothing else, thanks."]


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    path = tmp_path / "shift.jsonl"
    record_shift(ScriptedClient(), SCRIPT, path, responder=make_responder([("approve", None)]), seed=5,
                 wall_clock_ns=lambda: 1_700_000_000_000_000_000)
    return path


def test_header_calls_timing_and_end(recorded: Path):
    lines = [json.loads(line) for line in recorded.read_text().splitlines()]
    head = lines[0]
    assert head["format"] == "cafe-recording" and head["version"] == SHARED_VERSION
    assert head["seed"] == 5 and head["clock_origin_unix_nano"] == 1_700_000_000_000_000_000
    assert head["script"] == SCRIPT and head["model"] == "scripted-barista-1"
    assert head["recorded_at"] == "2023-11-14T22:13:20.000000Z"
    assert head["decisions"] == [["approve", None]]  # those make_responder was given
    assert [line["call"] for line in lines[1:-1]] == [1, 2, 3, 4, 5]
    assert all(set(line["timing"]) == {"start_unix_nano", "duration_ns"} for line in lines[1:-1])
    assert lines[-1]["end"]["model_calls"] == 5 and lines[-1]["end"]["stop_reason"] == "answered"
    assert recorded.stat().st_mode & 0o777 == 0o600


def test_replay_is_content_identical_with_zero_model_calls(recorded: Path):
    live = ScriptedClient()
    again = recorded.with_name("again.jsonl")
    run, _ = record_shift(live, SCRIPT, again, responder=make_responder([("approve", None)]))
    replayed, _ = replay_shift(recorded)
    assert transcript(replayed) == transcript(run)
    code, out, err = run_cli("replay", str(recorded))
    assert code == 0, err
    assert "0 model calls" in out and "transcript matches" in out


def test_legacy_request_response_lines_load_as_version_0(recorded: Path, tmp_path: Path):
    legacy = tmp_path / "legacy.jsonl"
    calls = load_recording(recorded).calls
    legacy.write_text("".join(json.dumps({"request": c.request, "response": c.response}) + "\n" for c in calls))
    recording = load_recording(legacy)
    assert recording.header.version == 0 and len(recording.calls) == 5 and recording.ending is None
    assert recording.calls[0].timing is None
    # The script is read from the last request's user messages, and the customer's decisions
    # from its propose_order results: the order was approved.
    run, _ = replay_shift(legacy)
    assert run.model_calls == 5 and [t.number for t in run.tickets] == [1]
    code, _out, err = run_cli("replay", str(legacy))
    assert code == 0, err
    code, _out, err = run_cli("replay", str(legacy), "--decision", "reject")  # another customer
    assert code == ReplayMismatch.exit_code and err.count("\n") == 1



def test_replays_of_two_recordings_without_an_id_get_two_ids_and_keep_each(tmp_path: Path):
    def legacy(name: str, script: list[str]) -> Path:
        path, plain = tmp_path / f"{name}.jsonl", tmp_path / f"{name}-plain.jsonl"
        record_shift(ScriptedClient(), script, path, responder=make_responder([("approve", None)]))
        plain.write_text("".join(json.dumps({"request": c.request, "response": c.response}) + "\n"
                                 for c in load_recording(path).calls))  # another harness's file: no id
        return plain

    first, second = legacy("first", ["A latte, please."]), legacy("second", ["A mocha, please."])
    ids = [replay_shift(path)[0].conversation_id for path in (first, first, second)]
    assert ids[0] == ids[1]  # one recording replays under one id, so its replays stay byte-identical
    assert ids[0] != ids[2]  # two recordings are not merged into one session by a backend
    assert all(i.startswith("shift-") and "latte" not in i.lower() for i in ids)

def test_a_changed_prompt_is_a_mismatch_naming_call_and_path(recorded: Path):
    changed = ["A latte and a blueberry muffin, please.", SCRIPT[1]]
    with pytest.raises(ReplayMismatch) as caught:
        replay_shift(recorded, changed)
    error = caught.value
    assert error.call == 1 and error.json_path == "$.messages[1].content"
    assert error.recorded.startswith("text(") and error.incoming.startswith("text(")
    assert "latte" not in str(error) and "muffin" not in str(error)
    assert len(str(error)) < 300


def test_mismatch_exit_code_at_the_cli(recorded: Path, tmp_path: Path):
    script = tmp_path / "script.txt"
    script.write_text("A latte and a blueberry muffin, please.\nNothing else, thanks.\n")
    code, out, err = run_cli("replay", str(recorded), "--script", str(script))
    assert code == ReplayMismatch.exit_code and out == "" and err.count("\n") == 1
    assert "call 1" in err and "$.messages[1].content" in err and "muffin" not in err


def test_one_call_fewer_names_the_first_unused_call(recorded: Path, tmp_path: Path):
    with pytest.raises(UnusedCalls) as caught:
        replay_shift(recorded, SCRIPT[:1])
    error = caught.value
    assert error.unused == 3 and error.first_call == 3
    assert "3 recorded call(s) were never made, from call 3" in str(error)
    assert "line 4: 7 messages, the last from user, 21 chars" in str(error) and "Nothing else" not in str(error)
    script = tmp_path / "short.txt"
    script.write_text(SCRIPT[0] + "\n")
    code, _, err = run_cli("replay", str(recorded), "--script", str(script))
    assert code == UnusedCalls.exit_code and err.count("\n") == 1


def test_more_calls_than_recorded_is_exhaustion(recorded: Path, tmp_path: Path):
    with pytest.raises(RecordingExhausted) as caught:
        replay_shift(recorded, [*SCRIPT, "And a cookie."])
    assert "call 6 was made, but the recording holds only 5" in str(caught.value)
    script = tmp_path / "long.txt"
    script.write_text("\n".join([*SCRIPT, "And a cookie."]) + "\n")
    code, _, err = run_cli("replay", str(recorded), "--script", str(script))
    assert code == RecordingExhausted.exit_code and err.count("\n") == 1


def test_diff_treats_json_numbers_as_numbers():
    assert first_difference({"t": 0}, {"t": 0.0}) is None
    assert first_difference({"t": 1}, {"t": True}).path == "$.t"  # a boolean is no number
    assert first_difference({"n": 10**30}, {"n": 10**30 + 1}).recorded == "integer(31 digits)"


def test_diff_describes_without_quoting_customer_text():
    recorded = {"messages": [{"role": "user", "name": "Jo Bloggs", "content": CUSTOMER_TEXT}]}
    incoming = {"messages": [{"role": "user", "name": "Jo Blogs", "content": CUSTOMER_TEXT}]}
    difference = first_difference(recorded, incoming)
    assert difference.path == "$.messages[0].name" and "Jo" not in difference.recorded + difference.incoming
    tools = first_difference({"f": {"function": {"name": "a"}}}, {"f": {"function": {"name": "b"}}})
    assert (tools.recorded, tools.incoming) == ("'a'", "'b'")
    assert first_difference({"a": 1}, {}).incoming == "absent"


# --- normalisation by declaration -----------------------------------------------------------


def _stamped(stamp: str, text: str = "A latte, please.") -> list[dict]:
    return [{"role": "system", "content": "be brief"},
            {"role": "user", "content": text, "sent_at": stamp, "meta": {"request_id": stamp}}]


@pytest.fixture
def stamped(tmp_path: Path) -> Path:
    path = tmp_path / "stamped.jsonl"
    recorder = RecordingClient(CannedClient([{"content": "Coming up."}]), path)
    recorder.chat(_stamped("2026-01-01T00:00:00Z"))
    recorder.close()
    return path


def test_declared_volatile_fields_are_ignored(stamped: Path):
    replay = ReplayClient(stamped, ignore=["messages.*.sent_at", "messages.*.meta.request_id"])
    response = replay.chat(_stamped("2026-11-29T10:00:00Z"))
    assert response["choices"][0]["message"]["content"] == "Coming up."
    replay.assert_exhausted()


def test_an_undeclared_volatile_field_still_mismatches(stamped: Path):
    with pytest.raises(ReplayMismatch) as caught:
        ReplayClient(stamped, ignore=["messages.*.sent_at"]).chat(_stamped("2026-11-29T10:00:00Z"))
    assert caught.value.json_path == "$.messages[1].meta.request_id"


def test_an_undeclared_change_next_to_a_declared_one_still_mismatches(stamped: Path):
    replay = ReplayClient(stamped, ignore=["messages.*.sent_at", "messages.*.meta.request_id"])
    with pytest.raises(ReplayMismatch) as caught:
        replay.chat(_stamped("2026-11-29T10:00:00Z", text="A mocha, please."))
    assert caught.value.json_path == "$.messages[1].content"


def test_cli_ignore_option(stamped: Path, tmp_path: Path):
    # The CLI replays a whole shift; here the declared path covers the tool_call_id.
    path = tmp_path / "shift.jsonl"
    record_shift(ScriptedClient(), SCRIPT, path, responder=make_responder([("approve", None)]))
    # Held whole (version 1), so that one line's request can be edited without the lines
    # that extend it refusing the edit.
    recording = load_recording(path)
    lines = [json.dumps({**recording.header.to_json(), "version": FORMAT_VERSION}) + "\n",
             *(json.dumps({**{key: value for key, value in call.to_json().items() if key != "extends"},
                           "request": call.request}) + "\n" for call in recording.calls),
             *([json.dumps(recording.ending.to_json()) + "\n"] if recording.ending else [])]
    # Give the recorded second request other tool_call_ids: only the declared path excuses it.
    second = json.loads(lines[2])
    changed = [m for m in second["request"]["messages"] if m.get("tool_call_id")]
    assert changed
    for message in changed:
        message["tool_call_id"] = "recorded-elsewhere"
    lines[2] = json.dumps(second) + "\n"
    path.write_text("".join(lines), encoding="utf-8")
    code, _, err = run_cli("replay", str(path))
    assert code == ReplayMismatch.exit_code and "tool_call_id" in err
    code, _, err = run_cli("replay", str(path), "--ignore", "messages.*.tool_call_id")
    assert code == 0, err


@pytest.mark.parametrize("declared", ["*", "*.model", "*.*", " *. ", "messages.*.sent_*", "**"])
def test_cli_ignore_that_would_check_next_to_nothing_is_refused(tmp_path: Path, declared: str):
    path = tmp_path / "shift.jsonl"
    record_shift(ScriptedClient(), SCRIPT, path, responder=make_responder([("approve", None)]))
    script = tmp_path / "changed.txt"
    script.write_text("A mocha, please.\nNothing else, thanks.\n", encoding="utf-8")
    code, out, err = run_cli("replay", str(path), "--script", str(script), "--ignore", declared)
    assert code == UnusableIgnorePath.exit_code and out == ""
    assert err.count("\n") == 1 and "ignore path" in err
    assert "e.g. messages.*.sent_at or metadata.request_time" in err


def test_normalise_paths():
    request = {"metadata": {"request_time": 5, "user": "u"}, "messages": [{"a": 1}, {"a": 2}]}
    assert normalise(request, ["metadata.request_time"]) == {"metadata": {"user": "u"},
                                                              "messages": [{"a": 1}, {"a": 2}]}
    assert normalise(request, ["messages.1"])["messages"] == [{"a": 1}, "<ignored>"]
    assert normalise(request, ["metadata.*"])["metadata"] == {}
    assert normalise({"m": {"x": 1}}, ["m.x"]) == normalise({"m": {}}, ["m.x"])  # present on one side only
    with pytest.raises(ValueError):
        normalise(request, ["..."])


def test_verbatim_fast_path_keeps_strict_json_types(tmp_path):
    """A request equal to the recorded one to the byte is served without scrubbing; one that
    only Python calls equal (False == 0) still goes through matching and is refused, while
    0 against 0.0 matches as before (the same JSON number)."""
    from cafe import ReplayMismatch
    from cafe.counter import ReplayClient, ScriptedClient
    from cafe.counter.recording_client import RecordingClient

    path = tmp_path / "one.jsonl"
    messages = [{"role": "user", "content": "A latte, please."}]
    recorder = RecordingClient(ScriptedClient(), path)
    recorder.chat(messages, None, 0.0)
    recorder.close()
    for temperature in (0.0, 0):
        assert ReplayClient(path).chat(messages, None, temperature)["choices"]
    with pytest.raises(ReplayMismatch) as caught:
        ReplayClient(path).chat(messages, None, False)
    assert "$.temperature" in str(caught.value)


@pytest.mark.parametrize("enabled", [True, False])
def test_loading_leaves_the_garbage_collector_as_it_found_it(tmp_path, enabled):
    import gc

    from cafe import load_recording
    from cafe.recording.errors import NotARecording

    good = tmp_path / "good.jsonl"
    counter.record_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, good, responder=counter.make_responder([]))
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"not json\n")
    (gc.enable if enabled else gc.disable)()
    try:
        assert len(load_recording(good).calls) == 4  # priced, proposed, rejected: nothing fired
        assert gc.isenabled() is enabled
        with pytest.raises(NotARecording):
            load_recording(bad)
        assert gc.isenabled() is enabled
    finally:
        gc.enable()


# The one-line replay errors quote protocol values (roles, ids, names) and keys of the
# recorded request scrubbed, whoever wrote the file: a plain file of another harness holding
# a key in a role keeps it off stderr (and CI logs) in the mismatch and unused-calls lines.

KEY = "sk-proj-Lw30LineCanary0123456"


def _plain(path: Path, *requests: dict[str, Any]) -> ReplayClient:
    reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi."}, "finish_reason": "stop"}]}
    path.write_text("".join(json.dumps({"request": r, "response": reply}) + "\n" for r in requests))
    return ReplayClient(load_recording(path), scrubber=Scrubber.from_environment({}))


@pytest.mark.parametrize(("message", "shown_as"), [
    ({"role": KEY, "content": "Hello."}, REDACTED),  # a quoted protocol value
    ({"role": "user", "content": "Hello.", KEY: "x"}, "<a key of 10 characters>"),  # a key the path names
    ({"role": "user", "content": "Hello.", "tool_call_id": f"call {KEY}"}, REDACTED),
])
def test_the_mismatch_line_quotes_the_recorded_side_scrubbed(tmp_path: Path, message: dict[str, Any],
                                                             shown_as: str) -> None:
    replay = _plain(tmp_path / "theirs.jsonl", {"messages": [message]})
    with pytest.raises(ReplayMismatch) as caught:
        replay.chat([{"role": "user", "content": "Hello."}])
    assert KEY not in str(caught.value) and KEY[8:] not in str(caught.value)
    assert shown_as in str(caught.value)


def test_the_unused_calls_line_names_the_recorded_role_scrubbed(tmp_path: Path) -> None:
    first = {"messages": [{"role": "user", "content": "Hello."}], "tools": None, "temperature": 0.0,
             "tool_choice": None}
    replay = _plain(tmp_path / "theirs.jsonl", first, {"messages": [{"role": KEY, "content": "Bye."}]})
    replay.chat([{"role": "user", "content": "Hello."}])
    with pytest.raises(UnusedCalls) as caught:
        replay.assert_exhausted()
    assert KEY not in str(caught.value) and "the last from [REDACTED]" in str(caught.value)


def test_an_ordinary_mismatch_line_is_unchanged(tmp_path: Path) -> None:
    replay = _plain(tmp_path / "theirs.jsonl", {"messages": [{"role": "system", "content": "Hello."}]})
    with pytest.raises(ReplayMismatch) as caught:
        replay.chat([{"role": "user", "content": "Hello."}])
    assert str(caught.value).endswith("at $.messages[0].role: recorded 'system', incoming 'user'")


def test_a_broad_configured_pattern_leaves_the_path_and_the_digests_readable(tmp_path: Path) -> None:
    # `\w{8}` matches `messages`, `[0-9a-f]{8}` a digest: only quoted values are scrubbed with it.
    replay = _plain(tmp_path / "theirs.jsonl", {"messages": [{"role": "user", "content": "Hello there."}]})
    replay._scrubber = Scrubber(extra_patterns=[r"\w{8}", r"[0-9a-f]{8}"])
    with pytest.raises(ReplayMismatch) as caught:
        replay.chat([{"role": "user", "content": "Hello."}])
    line = str(caught.value)
    assert "at $.messages[0].content: recorded text(12 chars, sha256 " in line and REDACTED not in line


def _canned(calls: int) -> CannedClient:
    return CannedClient([{"content": f"Coming up, number {n}."} for n in range(calls)])


def _grown_conversation(tmp_path: Path, calls: int) -> tuple[Path, list[list[dict[str, Any]]]]:
    """A recording of `calls` calls each sending the conversation before it grown by two
    messages (as a shift does), and what each call sent."""
    path = tmp_path / "grown.jsonl"
    client = RecordingClient(_canned(calls), path)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a barista."}]
    sent = []
    for turn in range(calls):
        messages.append({"role": "user", "content": f"{CUSTOMER_TEXT} {turn}"})
        answer = client.chat(messages, temperature=0.25 * (turn % 2))
        sent.append(json.loads(json.dumps(messages)))
        messages.append(answer["choices"][0]["message"])
    client.close()
    return path, sent


def test_a_request_that_extends_the_call_before_is_recorded_by_what_is_new_and_read_whole(tmp_path: Path):
    path, sent = _grown_conversation(tmp_path, 30)
    recording = load_recording(path)
    assert recording.header.version == 4
    assert [call.request["messages"] for call in recording.calls] == sent
    assert [call.request["temperature"] for call in recording.calls] == [0.25 * (n % 2) for n in range(30)]
    lines = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert "extends" not in lines[0] and all(line["extends"]["call"] == line["call"] - 1 for line in lines[1:])
    # Each line holds the two messages new since the call before (its answer, the next prompt).
    assert all(len(line["request"]["messages"]) == 2 for line in lines[1:])


def test_a_message_replaced_between_calls_is_recorded_as_sent(tmp_path: Path):
    path = tmp_path / "edited.jsonl"
    client = RecordingClient(_canned(2), path)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a barista."},
                                      {"role": "user", "content": "A latte, please."}]
    client.chat(messages)
    messages[0] = {"role": "system", "content": "You are a barista who upsells."}  # the same list and last message
    messages.append({"role": "user", "content": "And a croissant."})
    client.chat(messages)
    client.close()
    second = load_recording(path).calls[1].request["messages"]
    assert second[0]["content"] == "You are a barista who upsells." and len(second) == 3


def test_a_replay_refuses_a_message_replaced_after_the_calls_before_matched(tmp_path: Path):
    path, sent = _grown_conversation(tmp_path, 3)
    replay = ReplayClient(path)
    messages = sent[0]
    replay.chat(messages, temperature=0.0)
    messages.extend(sent[1][len(messages):])
    replay.chat(messages, temperature=0.25)
    messages[1] = {**messages[1], "content": "Something else entirely."}  # an earlier message, replaced
    messages.extend(sent[2][len(messages):])
    with pytest.raises(ReplayMismatch) as caught:
        replay.chat(messages, temperature=0.0)
    assert caught.value.call == 3 and caught.value.json_path == "$.messages[1].content"


def test_a_shift_recorded_by_what_is_new_replays_with_the_same_transcript(tmp_path: Path):
    path = tmp_path / "long.jsonl"
    run, _ = record_shift(ScriptedClient(), ["A latte, please."] * 12, path, responder=make_responder([]),
                          max_turns=40)
    assert load_recording(path).header.version == 4
    replayed, _ = replay_shift(path)
    assert transcript(replayed) == transcript(run) and replayed.model_calls == run.model_calls > 12
