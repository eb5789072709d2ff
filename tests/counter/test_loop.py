"""The shift loop: stop reasons, messages as sent, bad tool input and the repair budget,
and the refusal of an unopened tool_call_id by every client."""

from __future__ import annotations

import json

import pytest

from cafe import Tracer, UnknownToolCallId
from cafe.counter import (
    DEFAULT_SCRIPT,
    MENU,
    STOP_REASONS,
    SYSTEM_PROMPT,
    TOOL_SCHEMAS,
    CannedClient,
    LiveClient,
    LiveSettings,
    RecordingClient,
    ReplayClient,
    ScriptedClient,
    TracingClient,
    make_responder,
    record_shift,
    run_shift,
    transcript,
)
from cafe.counter.clients import Secret
from cafe.counter.clients.scripted import TEXT_TURN_USAGE, TOOL_TURN_USAGE
from cafe.counter.menu import EIGHTY_SIXED
from cafe.errors import ConversationError

from .helpers import approve_once, call, calls, say, tool_results


def test_stop_reasons_are_the_named_five():
    assert set(STOP_REASONS) == {
        "answered", "script_done", "turn_cap", "consent_violation", "retries_exhausted",
    }


def test_default_shift_prices_proposes_and_fires_one_ticket_under_consent():
    client = ScriptedClient()
    run = run_shift(client, DEFAULT_SCRIPT, approve_once())
    assert run.stop_reason == "answered"
    assert client.calls == run.model_calls == run.turns_used == 5
    assert run.messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    users = [m["content"] for m in run.messages if m["role"] == "user"]
    assert users == list(DEFAULT_SCRIPT)
    results = list(tool_results(run).values())
    prices = {r["item"]: r["price_eur"] for r in results if "price_eur" in r}
    assert prices == {"latte": MENU["latte"].price_eur, "chocolate croissant": MENU["chocolate croissant"].price_eur}
    [ticket] = run.tickets
    assert (ticket.number, ticket.ticket.table, ticket.ticket.items) == (1, 1, ("latte", "chocolate croissant"))
    assert [fire.status for fire in run.fires] == ["fired"]
    assert run.repair_state == "passed" and run.repairs_used == 0


def test_the_scripted_model_proposes_for_the_table_named_and_never_fires_without_approval():
    run = run_shift(ScriptedClient(), ["An espresso for table 7, please.", "That's all."], make_responder([]))
    proposed = [call["function"] for m in run.messages for call in m.get("tool_calls") or []
                if call["function"]["name"] != "price_check"]
    assert [(f["name"], json.loads(f["arguments"])) for f in proposed] == [
        ("propose_order", {"items": ["espresso"], "table": 7})]
    assert run.tickets == [] and run.fires == [] and run.stop_reason == "answered"


def test_the_scripted_model_leaves_an_eighty_sixed_item_out_of_the_order():
    gone = sorted(EIGHTY_SIXED)[0]
    run = run_shift(ScriptedClient(), [f"A latte and a {gone}, please.", "That's all."], approve_once())
    [ticket] = run.tickets
    assert ticket.ticket.items == ("latte",)


def test_the_scripted_model_reads_each_message_once_and_rebuilds_its_notes_for_another_list():
    client = ScriptedClient()
    run = run_shift(client, DEFAULT_SCRIPT, approve_once())
    # The same conversation up to the customer's second line, handed over as a fresh list:
    # the notes come from that list alone, so the order is proposed again, not forgotten.
    second = next(i for i, m in enumerate(run.messages) if m.get("content") == DEFAULT_SCRIPT[1])
    reply = client.chat([dict(m) for m in run.messages[:second + 1]], TOOL_SCHEMAS)
    [proposal] = reply["choices"][0]["message"]["tool_calls"]
    assert proposal["function"]["name"] == "propose_order"
    # Only the greeting line, in yet another list: nothing priced, so nothing to propose.
    reply = client.chat([run.messages[0], {"role": "user", "content": "Nothing else, thanks."}], TOOL_SCHEMAS)
    assert reply["choices"][0]["message"]["content"] == "What can I get you today?"


def test_empty_script_is_script_done_without_a_model_call():
    client = ScriptedClient()
    run = run_shift(client, [], approve_once())
    assert run.stop_reason == "script_done"
    assert client.calls == 0
    assert [m["role"] for m in run.messages] == ["system"]


class ToolHappy:
    """A model that always calls a tool."""

    model, provider = "tool-happy", "test"

    def __init__(self):
        self.calls = 0

    def chat(self, messages, tools=None, temperature=0.0, tool_choice=None):
        self.calls += 1
        message = calls(call(f"c{self.calls}", "price_check", {"item": "espresso"}))
        return {"choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}, "model": self.model}


@pytest.mark.parametrize("max_turns", [1, 3, 8])
def test_a_model_that_always_calls_tools_hits_the_turn_cap(max_turns):
    client = ToolHappy()
    run = run_shift(client, ["An espresso?"], approve_once(), max_turns=max_turns)
    assert run.stop_reason == "turn_cap"
    assert client.calls == run.turns_used == max_turns


def test_default_turn_cap_is_eight():
    client = ToolHappy()
    run = run_shift(client, ["An espresso?"], approve_once())
    assert (run.stop_reason, client.calls) == ("turn_cap", 8)


def test_more_customer_lines_than_turns_hits_the_turn_cap():
    client = ScriptedClient()
    run = run_shift(client, [f"hello {i}" for i in range(5)], approve_once(), max_turns=3)
    assert (run.stop_reason, client.calls) == ("turn_cap", 3)


class Recorder:
    """Wraps a client, keeps each response it handed out and each request it saw."""

    def __init__(self, inner):
        self.inner = inner
        self.model, self.provider = inner.model, inner.provider
        self.responses, self.requests = [], []

    @property
    def calls(self):
        return self.inner.calls

    def chat(self, messages, tools=None, temperature=0.0, tool_choice=None):
        self.requests.append(json.loads(json.dumps({"messages": messages, "tools": tools})))
        response = self.inner.chat(messages, tools, temperature, tool_choice)
        self.responses.append(response)
        return response


def test_the_assistant_message_is_appended_verbatim():
    odd = {"content": "Hello!", "refusal": None, "annotations": [], "x_vendor": {"keep": [1, 2]}}
    client = Recorder(CannedClient([calls(call("c1", "price_check", {"item": "latte"})), odd]))
    run = run_shift(client, ["A latte?"], approve_once())
    assistant = [m for m in run.messages if m["role"] == "assistant"]
    sent = [r["choices"][0]["message"] for r in client.responses]
    assert assistant == sent
    assert assistant[1]["x_vendor"] == {"keep": [1, 2]} and "annotations" in assistant[1]


def test_each_call_gets_the_tool_schemas_and_the_conversation_so_far():
    client = Recorder(ScriptedClient())
    run = run_shift(client, DEFAULT_SCRIPT, approve_once())
    assert all(r["tools"] == json.loads(json.dumps(TOOL_SCHEMAS)) for r in client.requests)
    assert [len(r["messages"]) for r in client.requests] == [2, 5, 7, 9, 11]
    assert client.requests[-1]["messages"] == json.loads(json.dumps(run.messages[:-1]))


def test_tool_messages_are_compact_json_with_sorted_keys_one_per_call_in_order():
    client = CannedClient([
        calls(
            call("a", "check_allergens", {"item": "croissant", "allergen": "Milk"}),
            call("b", "price_check", {"item": "cheese omelette"}),
            call("c", "close_check", {"table": 9}),
        ),
        say("Done."),
    ])
    run = run_shift(client, ["Is there milk in the croissant?"], approve_once())
    tool_messages = [m for m in run.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["a", "b", "c"]
    for message in tool_messages:
        decoded = json.loads(message["content"])
        assert message["content"] == json.dumps(decoded, sort_keys=True, separators=(",", ":"))
    results = tool_results(run)
    assert results["a"]["contains"] is True
    assert set(results["a"]["allergens"]) == set(MENU["croissant"].allergens)
    assert results["b"]["available"] is False
    assert results["b"]["alternative"] in MENU
    assert results["c"] == {"table": 9, "tickets": [], "total_eur": 0.0}


def test_allergen_check_says_no_for_an_allergen_not_listed():
    client = CannedClient([
        calls(call("a", "check_allergens", {"item": "espresso", "allergen": "milk"})),
        say("No milk in an espresso."),
    ])
    results = tool_results(run_shift(client, ["Milk in the espresso?"], approve_once()))
    assert results["a"]["contains"] is False and results["a"]["allergens"] == []


# --- bad tool input and the repair budget -----------------------------------------------

BAD_CALLS = {
    "invalid_json": (call("x", "price_check", '{"item": "latte"'), ["not valid JSON"]),
    "unknown_tool": (call("x", "make_coffee", {"item": "latte"}), ["'make_coffee'"]),
    "bad_args": (call("x", "close_check", {"table": "four"}), ["arguments.table"]),
    "unknown_item": (call("x", "price_check", {"item": "mocha"}), ["arguments.item", "'mocha'"]),
    "86d_order": (call("x", "propose_order", {"items": ["cheese omelette"], "table": 1}),
                  ["arguments.items[0]", "86'd", "tomato toast"]),
    "dict_args": ({"id": "x", "type": "function",
                   "function": {"name": "price_check", "arguments": {"item": "latte"}}}, ["string"]),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_tool_input_comes_back_as_an_error_result(case):
    bad, needles = BAD_CALLS[case]
    tracer = Tracer()
    client = CannedClient([calls(bad), say("Sorry, let me fix that.")])
    run = run_shift(client, ["A latte, please."], approve_once(), tracer=tracer)
    assert run.stop_reason == "answered"
    result = tool_results(run)["x"]
    assert result["error"].startswith("invalid call to ")
    problems = " | ".join(result["problems"])
    for needle in needles:
        assert needle in problems
    assert result["retries_left"] == 1
    assert [e.status for e in run.tool_log] == ["invalid"]
    # The re-ask: the next model call sees the error result as the latest message.
    second_input = tracer.generations()[1].generation.input
    assert second_input[-1]["role"] == "tool" and json.loads(second_input[-1]["content"]) == result
    assert run.repairs_used == 1 and run.repair_state == "passed"
    assert run.approvals == [] and run.tickets == []


def test_a_repaired_call_passes_within_the_budget():
    client = CannedClient([
        calls(call("c1", "price_check", {"item": "Latte"})),
        calls(call("c2", "price_check", {"item": "latt"})),
        calls(call("c3", "price_check", {"item": "latte"})),
        say("A latte is 1.60."),
    ])
    run = run_shift(client, ["How much is a latte?"], approve_once())
    results = tool_results(run)
    assert [results[c]["retries_left"] for c in ("c1", "c2")] == [1, 0]
    assert results["c3"]["item"] == "latte"
    assert (run.stop_reason, run.repairs_used, run.repair_state) == ("answered", 2, "passed")


def test_the_budget_runs_out_with_retries_exhausted():
    client = CannedClient([
        calls(call("c1", "price_check", "{not json")),
        calls(call("c2", "price_check", {"item": "mocha"})),
        calls(call("c3", "fire_ticket", {"items": [], "table": True}), call("c4", "price_check", {"item": "latte"})),
        say("never asked"),
    ])
    run = run_shift(client, ["A mocha?", "Hello?"], approve_once())
    assert run.stop_reason == "retries_exhausted"
    assert run.repair_state == "retries_exhausted"
    assert run.repairs_used == 3
    assert client.calls == 3
    assert [(e.call_id, e.status) for e in run.tool_log] == [
        ("c1", "invalid"), ("c2", "invalid"), ("c3", "invalid"), ("c4", "cancelled"),
    ]
    assert run.fires == []  # the invalid fire never reached the executor
    assert len(tool_results(run)["c3"]["problems"]) == 2


@pytest.mark.parametrize("limit", [0, 1, 4])
def test_the_repair_limit_is_a_parameter(limit):
    replies = [calls(call(f"c{i}", "price_check", {"item": "mocha"})) for i in range(limit + 1)]
    client = CannedClient([*replies, say("unreached")])
    run = run_shift(client, ["A mocha?"], approve_once(), max_repairs=limit)
    assert run.stop_reason == "retries_exhausted"
    assert client.calls == limit + 1


# --- tool_call_id hygiene, in every client -------------------------------------------------

GHOST = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "A latte."},
    {"role": "tool", "tool_call_id": "call_ghost", "content": "{}"},
]
LATE = [
    {"role": "system", "content": "s"},
    {"role": "tool", "tool_call_id": "c1", "content": "{}"},
    {"role": "assistant", "content": None, "tool_calls": [call("c1", "price_check", {"item": "latte"})]},
]


def _assert_refused(client, messages, index):
    before = client.calls
    with pytest.raises(UnknownToolCallId) as caught:
        client.chat(messages, TOOL_SCHEMAS)
    assert caught.value.index == index
    assert messages[index]["tool_call_id"] in str(caught.value)
    assert client.calls == before


@pytest.mark.parametrize("messages,index", [(GHOST, 2), (LATE, 1)])
def test_scripted_and_canned_clients_refuse_an_unopened_tool_call_id(messages, index):
    _assert_refused(ScriptedClient(), messages, index)
    _assert_refused(CannedClient([say("hi")]), messages, index)
    _assert_refused(TracingClient(ScriptedClient(), Tracer()), messages, index)


def test_an_unhashable_tool_call_id_is_refused_by_name_not_a_type_error():
    # A list where an id belongs: a call cannot open it, and a result naming one answers nothing.
    odd_open = [{"role": "system", "content": "s"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": ["c1"], "function": {}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "{}"}]
    odd_answer = [{"role": "system", "content": "s"}, {"role": "tool", "tool_call_id": ["c1"], "content": "{}"}]
    with pytest.raises(ConversationError, match=r"messages\[1\]\.tool_calls\[0\]"):
        ScriptedClient().chat(odd_open, TOOL_SCHEMAS)
    with pytest.raises(UnknownToolCallId) as caught:
        ScriptedClient().chat(odd_answer, TOOL_SCHEMAS)
    assert caught.value.index == 1


def test_live_client_refuses_before_any_connection(network_attempts):
    client = LiveClient(
        LiveSettings("http://127.0.0.1:9/v1", Secret("sk-canary-never-sent-000000"), "m"), max_retries=0
    )
    _assert_refused(client, GHOST, 2)
    assert network_attempts == []  # it never tried to connect


def test_recording_and_replay_clients_refuse_an_unopened_tool_call_id(tmp_path):
    path = tmp_path / "shift.jsonl"
    record_shift(ScriptedClient(), DEFAULT_SCRIPT, path, responder=approve_once())
    _assert_refused(ReplayClient(path), GHOST, 2)
    fresh = tmp_path / "refused.jsonl"
    recorder = RecordingClient(ScriptedClient(), fresh)
    _assert_refused(recorder, GHOST, 2)
    recorder.close()
    lines = fresh.read_text(encoding="utf-8").splitlines()
    assert all('"request"' not in line for line in lines)  # nothing recorded for the refused call


def test_the_shift_itself_never_sends_an_unopened_id():
    # Every tool message of a busy shift answers an id opened by an earlier assistant message.
    client = CannedClient([
        calls(call("p1", "propose_order", {"items": ["latte"], "table": 1}), call("bad", "nope", "{}")),
        calls(call("f1", "fire_ticket", {"items": ["latte"], "table": 1})),
        say("Done."),
    ])
    run = run_shift(client, ["A latte."], make_responder([("approve", None)]))
    opened: set[str] = set()
    for message in run.messages:
        if message["role"] == "assistant":
            opened |= {c["id"] for c in message.get("tool_calls") or []}
        if message["role"] == "tool":
            assert message["tool_call_id"] in opened


def test_scripted_usage_blocks_are_fixed_small_numbers():
    client = ScriptedClient()
    first = client.chat([{"role": "user", "content": "A latte"}])
    second = client.chat([{"role": "user", "content": "hello"}])
    assert (first["usage"]["prompt_tokens"], first["usage"]["completion_tokens"]) == TOOL_TURN_USAGE
    assert (second["usage"]["prompt_tokens"], second["usage"]["completion_tokens"]) == TEXT_TURN_USAGE
    for response in (first, second):
        usage = response["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert response["choices"][0]["index"] == 0
        assert response["model"] == client.model
    assert first["choices"][0]["finish_reason"] == "tool_calls"
    assert second["choices"][0]["finish_reason"] == "stop"


def test_scripted_client_replies_by_the_last_message():
    client = ScriptedClient()
    named = client.chat([{"role": "user", "content": "An iced latte and an espresso"}])["choices"][0]["message"]
    assert [json.loads(c["function"]["arguments"]) for c in named["tool_calls"]] == [
        {"item": "iced latte"}, {"item": "espresso"},
    ]
    assert {c["function"]["name"] for c in named["tool_calls"]} == {"price_check"}
    assert len({c["id"] for c in named["tool_calls"]}) == 2
    after_tool = client.chat([
        {"role": "user", "content": "latte"},
        {"role": "assistant", "content": None, "tool_calls": [call("c", "price_check", {"item": "latte"})]},
        {"role": "tool", "tool_call_id": "c", "content": "{}"},
    ])["choices"][0]["message"]
    other = client.chat([{"role": "user", "content": "Good morning!"}])["choices"][0]["message"]
    for message in (after_tool, other):
        assert message["role"] == "assistant" and message["content"] and "tool_calls" not in message
    assert after_tool["content"] != other["content"]
    assert client.calls == 3


def test_transcript_is_canonical_and_comparable():
    messages = [
        {"role": "user", "content": "A latte."},
        {"role": "assistant", "content": None, "tool_calls": [
            call("c1", "price_check", '{ "item" : "latte" }'),
            call("c2", "price_check", '{"item": "lat'),
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"a":1}'},
    ]
    text = transcript(messages)
    assert text.splitlines() == [
        "user: A latte.",
        'assistant -> price_check({"item":"latte"}) [c1]',
        'assistant -> price_check({"item": "lat) [c2]',
        'tool[c1]: {"a":1}',
    ]
    respaced = json.loads(json.dumps(messages))
    respaced[1]["tool_calls"][0]["function"]["arguments"] = '{"item":"latte"}'
    assert transcript(respaced) == text  # argument whitespace is not a difference
    respaced[0]["content"] = "A latte!"
    assert transcript(respaced) != text
    run = run_shift(ScriptedClient(), DEFAULT_SCRIPT, approve_once())
    assert transcript(run) == transcript(run.messages)
