"""Shifts exported through cafe_otel reach Jaeger intact, minus everything not on the allowlist.

Canary text is planted in every place a shift carries conversation text: the customer's
lines, the system prompt, the model's output and a tool's arguments (echoed in its
result). With content capture off cafe_otel never sends it; with it on, cafe_otel sends it
and the Collector's redaction allowlist removes it (defense in depth). A control sends the
same content-capturing shift straight to Jaeger, bypassing the Collector, and the canary
shows up there: its absence elsewhere is the Collector's doing, not a blind spot of the
query API.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

import cafe
import cafe.counter
from otelstack import Collector, Jaeger

from .shifts import AGENT, SCRIPTED_MODEL, TOOL, Shifts, run_shifts
from .spans import ALLOWED_KEYS, MODEL, SPAN_NAMES, SPANS_PER_TRACE, emit_spans
from .spans import TOOL as TOOL_NAME

pytestmark = pytest.mark.e2e

CANARY = "CANARY-customer-text-7f3a9c"
CANNED_MODEL = "canned-barista-1"
LINES = (f"A latte and a chocolate croissant, please. {CANARY}", f"Nothing else, thanks. {CANARY}")
SYSTEM_PROMPT = f"{cafe.counter.SYSTEM_PROMPT}\n{CANARY} (house notes)"
CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
)
# Shift 0: the scripted barista (two price checks). Shift 1: canned replies whose output
# and tool arguments carry the canary (an item no menu has: echoed in the tool result).
CANNED_REPLIES = (
    {
        "content": f"{CANARY} let me look that up",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": TOOL, "arguments": json.dumps({"item": f"{CANARY} special"})},
            },
        ],
    },
    {"content": f"{CANARY} sorry, that is not on the menu"},
    {"content": f"{CANARY} see you soon"},
)
SCRIPTED_SPAN_NAMES = Counter(
    [f"invoke_agent {AGENT}", "setup", "turn 1", "turn 2", "turn 3", "turn 4", "turn 5", "wrapup"]
    + [f"chat {SCRIPTED_MODEL}"] * 5
    + [f"execute_tool {TOOL}"] * 2 + ["execute_tool propose_order", "execute_tool fire_ticket"]
)
# The seed shift's tree, children sorted by name: (name, [children]).
SCRIPTED_TREE = (
    f"invoke_agent {AGENT}",
    [
        ("setup", []),
        ("turn 1", [(f"chat {SCRIPTED_MODEL}", []), (f"execute_tool {TOOL}", []), (f"execute_tool {TOOL}", [])]),
        ("turn 2", [(f"chat {SCRIPTED_MODEL}", [])]),
        ("turn 3", [(f"chat {SCRIPTED_MODEL}", []), ("execute_tool propose_order", [])]),
        ("turn 4", [(f"chat {SCRIPTED_MODEL}", []), ("execute_tool fire_ticket", [])]),
        ("turn 5", [(f"chat {SCRIPTED_MODEL}", [])]),
        ("wrapup", []),
    ],
)
CANNED_TREE = (
    f"invoke_agent {AGENT}",
    [
        ("setup", []),
        ("turn 1", [(f"chat {CANNED_MODEL}", []), (f"execute_tool {TOOL}", [])]),
        ("turn 2", [(f"chat {CANNED_MODEL}", [])]),
        ("turn 3", [(f"chat {CANNED_MODEL}", [])]),
        ("wrapup", []),
    ],
)


def tags(span: dict) -> dict:
    return {tag["key"]: tag["value"] for tag in span["tags"]}


def same_id(a: str, b: str) -> bool:
    # Jaeger's JSON may drop leading zeros of an id.
    return int(a, 16) == int(b, 16)


def service_of(trace: dict, span: dict) -> str:
    return trace["processes"][span["processID"]]["serviceName"]


def client_for(i: int):
    return cafe.counter.ScriptedClient() if i == 0 else cafe.counter.CannedClient(CANNED_REPLIES)


def canary_shifts(endpoint: str, service: str, *, capture_content: bool) -> Shifts:
    """The scripted shift and the canned shift, canaries everywhere, exported to `endpoint`."""
    shifts = run_shifts(
        endpoint,
        service,
        2,
        client=client_for,
        lines=LINES,
        system_prompt=SYSTEM_PROMPT,
        capture_content=capture_content,
    )
    # The canary really is in the shifts: customer lines, model output, tool result.
    scripted, canned = shifts.runs
    assert scripted.stop_reason == canned.stop_reason == "answered"
    assert any(CANARY in str(m.get("content")) for m in scripted.messages if m["role"] == "user")
    assert any(CANARY in str(m.get("content")) for m in canned.messages if m["role"] == "assistant")
    assert any(CANARY in str(m.get("content")) for m in canned.messages if m["role"] == "tool")
    assert shifts.account.exported == shifts.spans and shifts.account.dropped == 0, shifts.summary
    return shifts


def tree_of(trace: dict) -> tuple:
    """The trace as (name, [children]) with children sorted by name; exactly one root."""
    ids = {int(span["spanID"], 16) for span in trace["spans"]}
    children: dict[int | None, list[dict]] = {}
    for span in trace["spans"]:
        refs = [ref for ref in span["references"] if ref["refType"] == "CHILD_OF"]
        assert len(refs) <= 1, refs
        parent = int(refs[0]["spanID"], 16) if refs else None
        assert parent is None or parent in ids, f"{span['operationName']}: parent not in the trace"
        if refs:
            assert same_id(refs[0]["traceID"], span["traceID"])
        children.setdefault(parent, []).append(span)

    def build(span: dict) -> tuple:
        kids = [build(kid) for kid in children.get(int(span["spanID"], 16), [])]
        return (span["operationName"], sorted(kids, key=lambda kid: (kid[0], repr(kid[1]))))

    (root,) = children[None]
    return build(root)


def by_id(jaeger: Jaeger, shifts: Shifts) -> dict[str, tuple[dict, str]]:
    """Each shift's trace from Jaeger's /api/traces/{id}: {trace id: (trace, raw body)}."""
    return {trace_id: jaeger.trace(trace_id) for trace_id in shifts.trace_ids}


def check_shift_metadata(trace: dict, shifts: Shifts, index: int, model: str) -> None:
    """Names, GenAI metadata, token totals and service of shift `index` as Jaeger has it."""
    run, tracer = shifts.runs[index], shifts.tracers[index]
    conversation = f"{shifts.service}-{index}"
    spans = trace["spans"]
    (agent,) = [s for s in spans if s["operationName"] == f"invoke_agent {AGENT}"]
    chats = [s for s in spans if s["operationName"] == f"chat {model}"]
    tools = [s for s in spans if s["operationName"].startswith("execute_tool ")]
    assert {service_of(trace, s) for s in spans} == {shifts.service}

    a = tags(agent)
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.agent.name"] == AGENT
    assert a["gen_ai.request.model"] == model
    assert a["gen_ai.conversation.id"] == conversation
    assert a["cafe.stop_reason"] == run.stop_reason

    by_span_id = {int(s["spanID"], 16): s for s in spans}

    def parent_name(span: dict) -> str:
        (ref,) = span["references"]
        return by_span_id[int(ref["spanID"], 16)]["operationName"]

    usage = cafe.usage_of(tracer)
    assert len(chats) == usage.calls == run.model_calls
    for chat in chats:
        c = tags(chat)
        assert parent_name(chat) == f"turn {c['cafe.turn']}"
        assert c["gen_ai.operation.name"] == "chat"
        assert c["gen_ai.request.model"] == model
        assert c["gen_ai.response.model"] == model
        assert c["gen_ai.conversation.id"] == conversation
        assert isinstance(c["gen_ai.usage.input_tokens"], int)
    assert sum(tags(c)["gen_ai.usage.input_tokens"] for c in chats) == usage.input_tokens > 0
    assert sum(tags(c)["gen_ai.usage.output_tokens"] for c in chats) == usage.output_tokens > 0

    tool_calls = run.state.tool_log
    assert len(tools) == len(tool_calls)
    assert sorted(tags(t)["gen_ai.tool.call.id"] for t in tools) == sorted(e.call_id for e in tool_calls)
    for tool in tools:
        t = tags(tool)
        assert parent_name(tool) == f"turn {t['cafe.turn']}"
        assert t["gen_ai.operation.name"] == "execute_tool"
        assert f"execute_tool {t['gen_ai.tool.name']}" == tool["operationName"]
    for span in spans:
        name = span["operationName"]
        if name in ("setup", "wrapup"):
            assert tags(span)["cafe.phase"] == name
        elif name.startswith("turn "):
            assert tags(span)["cafe.phase"] == "turn"
            assert f"turn {tags(span)['cafe.turn']}" == name


def test_shift_arrives_with_names_parents_and_genai_metadata_and_no_content(
    jaeger: Jaeger, collector: Collector
) -> None:
    shifts = canary_shifts(collector.otlp_grpc, "e2e-shift", capture_content=False)
    scripted_spans, canned_spans = (len(t.nodes()) for t in shifts.tracers)
    assert scripted_spans == sum(SCRIPTED_SPAN_NAMES.values())

    spans = jaeger.wait_for_spans("e2e-shift", shifts.spans, timeout=30)
    ids = [span["spanID"] for span in spans]
    assert len(ids) == len(set(ids)) == shifts.spans
    assert {int(i, 16) for i in ids} == shifts.span_ids
    assert collector.metric("otelcol_receiver_accepted_spans") == shifts.account.exported

    traces = by_id(jaeger, shifts)
    (scripted, raw_scripted), (canned, raw_canned) = (traces[t] for t in shifts.trace_ids)
    assert Counter(s["operationName"] for s in scripted["spans"]) == SCRIPTED_SPAN_NAMES
    assert tree_of(scripted) == SCRIPTED_TREE
    assert tree_of(canned) == CANNED_TREE
    assert len(canned["spans"]) == canned_spans
    check_shift_metadata(scripted, shifts, 0, SCRIPTED_MODEL)
    check_shift_metadata(canned, shifts, 1, CANNED_MODEL)

    _, raw_all = jaeger.traces("e2e-shift")
    for raw in (raw_scripted, raw_canned, raw_all):
        assert CANARY not in raw
        for key in CONTENT_KEYS:
            assert f'"{key}"' not in raw
    # cafe_otel sent no content, and every metadata key it sends is allowed: nothing removed.
    for trace in (scripted, canned):
        for span in trace["spans"]:
            assert "redaction.redacted.count" not in tags(span), span["operationName"]


def test_every_metadata_key_cafe_otel_sends_survives_the_collector(jaeger: Jaeger, collector: Collector) -> None:
    shifts = run_shifts(collector.otlp_grpc, "e2e-meta", 1)
    (trace_id,) = shifts.trace_ids
    jaeger.wait_for_spans("e2e-meta", shifts.spans, timeout=30)
    trace, _ = jaeger.trace(trace_id)
    (agent,) = [s for s in trace["spans"] if s["references"] == []]
    assert tags(agent)["cafe.shift.turns"] == shifts.runs[0].turns_used
    assert not [s["operationName"] for s in trace["spans"] if "redaction.redacted.count" in tags(s)]


def test_content_captured_at_the_source_is_removed_by_the_collector(jaeger: Jaeger, collector: Collector) -> None:
    # Control: the same content-capturing shifts straight to Jaeger carry the canary.
    direct = canary_shifts(jaeger.otlp_grpc, "e2e-direct", capture_content=True)
    via = canary_shifts(collector.otlp_grpc, "e2e-captured", capture_content=True)
    jaeger.wait_for_spans("e2e-direct", direct.spans, timeout=30)
    spans = jaeger.wait_for_spans("e2e-captured", via.spans, timeout=30)
    assert len(spans) == len({s["spanID"] for s in spans}) == via.spans
    assert {int(s["spanID"], 16) for s in spans} == via.span_ids
    assert collector.metric("otelcol_receiver_accepted_spans") == via.account.exported

    direct_traces, via_traces = by_id(jaeger, direct), by_id(jaeger, via)
    for index, (d_id, v_id) in enumerate(zip(direct.trace_ids, via.trace_ids, strict=True)):
        d_trace, d_raw = direct_traces[d_id]
        v_trace, v_raw = via_traces[v_id]
        # cafe_otel did send the content: customer lines, system prompt, model output, tool I/O.
        assert d_raw.count(CANARY) >= 3
        d_keys = {key for s in d_trace["spans"] for key in tags(s)}
        assert {
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        } <= d_keys
        # Through the Collector: no canary and no content key, the metadata intact.
        assert CANARY not in v_raw
        for key in CONTENT_KEYS:
            assert f'"{key}"' not in v_raw
        assert tree_of(v_trace) == tree_of(d_trace) == (SCRIPTED_TREE if index == 0 else CANNED_TREE)
        check_shift_metadata(v_trace, via, index, SCRIPTED_MODEL if index == 0 else CANNED_MODEL)
        # The Collector's redaction did the removing: on each span its count equals the
        # number of keys the same span has when it bypasses the Collector and lacks here.
        d_spans = {span_key(s): tags(s) for s in d_trace["spans"]}
        v_spans = {span_key(s): tags(s) for s in v_trace["spans"]}
        assert d_spans.keys() == v_spans.keys()
        for key, v_tags in v_spans.items():
            removed = set(d_spans[key]) - set(v_tags)
            assert set(v_tags) - set(d_spans[key]) <= {"redaction.redacted.count"}, key
            if removed & set(CONTENT_KEYS):
                assert v_tags["redaction.redacted.count"] == len(removed), (key, removed)
            if key[0].startswith(("chat ", "execute_tool ")):
                assert removed & set(CONTENT_KEYS), f"{key}: no content was removed from it"
    _, raw_all = jaeger.traces("e2e-captured")
    assert CANARY not in raw_all


def span_key(span: dict) -> tuple:
    """What identifies a span across two runs of the same shift."""
    t = tags(span)
    return (span["operationName"], t.get("cafe.turn"), t.get("gen_ai.tool.call.id"))


def test_collector_strips_keys_off_its_allowlist(jaeger: Jaeger, collector: Collector) -> None:
    """Content cafe_otel would never send (canary under a resource, scope, event and
    unlisted span key), sent with the plain SDK: the Collector's own redaction removes it."""
    trace_ids = emit_spans(collector.otlp_grpc, "e2e-foreign", 3, canary=CANARY)
    spans = jaeger.wait_for_spans("e2e-foreign", 3 * SPANS_PER_TRACE, timeout=30)
    assert len(spans) == len({s["spanID"] for s in spans}) == 3 * SPANS_PER_TRACE

    for trace_id in trace_ids:
        trace, raw = jaeger.trace(trace_id)
        assert CANARY not in raw
        by_name = {span["operationName"]: span for span in trace["spans"]}
        assert sorted(by_name) == sorted(SPAN_NAMES)
        root = by_name[SPAN_NAMES[0]]
        assert root["references"] == []
        for child in (by_name[f"chat {MODEL}"], by_name[f"execute_tool {TOOL_NAME}"]):
            (ref,) = child["references"]
            assert ref["refType"] == "CHILD_OF"
            assert same_id(ref["spanID"], root["spanID"])
            assert same_id(ref["traceID"], trace_id)
        assert service_of(trace, root) == "e2e-foreign"
        assert tags(by_name[f"execute_tool {TOOL_NAME}"])["gen_ai.tool.name"] == TOOL_NAME
        chat = tags(by_name[f"chat {MODEL}"])
        assert chat["gen_ai.request.model"] == MODEL
        assert chat["gen_ai.usage.input_tokens"] == 12
        assert chat["gen_ai.operation.name"] == "chat"
        # The content attribute was removed; `summary: info` leaves only a count.
        assert "gen_ai.input.messages" not in chat
        assert chat["redaction.redacted.count"] >= 1

    _, raw_all = jaeger.traces("e2e-foreign")
    assert CANARY not in raw_all
    for key in ALLOWED_KEYS:
        assert f'"{key}"' in raw_all, f"allowed key {key} missing from Jaeger's answer"

    # Control: sent straight to Jaeger, bypassing the collector, the canary does show up
    # (span attribute, event, resource), so its absence above is the collector's doing.
    emit_spans(jaeger.otlp_grpc, "e2e-control", 1, canary=CANARY)
    jaeger.wait_for_spans("e2e-control", SPANS_PER_TRACE, timeout=30)
    assert jaeger.traces("e2e-control")[1].count(CANARY) >= 3
