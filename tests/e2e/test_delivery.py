"""Spans sent to the Collector reach Jaeger intact, minus everything not on the allowlist."""

from __future__ import annotations

import pytest

from .spans import AGENT, ALLOWED_KEYS, MODEL, SPAN_NAMES, SPANS_PER_TRACE, TOOL, emit_spans
from .stack import Collector, Jaeger

pytestmark = pytest.mark.e2e

CANARY = "CANARY-customer-text-7f3a9c"


def tags(span: dict) -> dict:
    return {tag["key"]: tag["value"] for tag in span["tags"]}


def same_id(a: str, b: str) -> bool:
    # Jaeger's JSON may drop leading zeros of an id.
    return int(a, 16) == int(b, 16)


def test_spans_arrive_with_names_parents_and_allowed_attributes(jaeger: Jaeger, collector: Collector) -> None:
    trace_ids = emit_spans(collector.otlp_grpc, "e2e-delivery", 3, canary=CANARY)
    spans = jaeger.wait_for_spans("e2e-delivery", 3 * SPANS_PER_TRACE, timeout=30)
    assert len(spans) == 3 * SPANS_PER_TRACE

    for trace_id in trace_ids:
        trace, raw = jaeger.trace(trace_id)
        assert CANARY not in raw
        by_name = {span["operationName"]: span for span in trace["spans"]}
        assert sorted(by_name) == sorted(SPAN_NAMES)
        root = by_name[f"invoke_agent {AGENT}"]
        assert root["references"] == []
        for child in (by_name[f"chat {MODEL}"], by_name[f"execute_tool {TOOL}"]):
            (ref,) = child["references"]
            assert ref["refType"] == "CHILD_OF"
            assert same_id(ref["spanID"], root["spanID"])
            assert same_id(ref["traceID"], trace_id)
        chat = tags(by_name[f"chat {MODEL}"])
        assert chat["gen_ai.request.model"] == MODEL
        assert chat["gen_ai.usage.input_tokens"] == 12
        assert chat["gen_ai.operation.name"] == "chat"
        # The content attribute was removed; `summary: info` leaves only a count.
        assert "gen_ai.input.messages" not in chat
        assert chat["redaction.redacted.count"] >= 1
        assert tags(by_name[f"execute_tool {TOOL}"])["gen_ai.tool.name"] == TOOL
        assert service_of(trace, root) == "e2e-delivery"

    _, raw_all = jaeger.traces("e2e-delivery")
    assert CANARY not in raw_all
    for key in ALLOWED_KEYS:
        assert f'"{key}"' in raw_all, f"allowed key {key} missing from Jaeger's answer"

    # Control: sent straight to Jaeger, bypassing the collector, the canary does
    # show up (span attribute, event, resource), so its absence above is the
    # collector's doing and not a blind spot of the query API.
    emit_spans(jaeger.otlp_grpc, "e2e-control", 1, canary=CANARY)
    jaeger.wait_for_spans("e2e-control", SPANS_PER_TRACE, timeout=30)
    assert jaeger.traces("e2e-control")[1].count(CANARY) >= 3


def service_of(trace: dict, span: dict) -> str:
    return trace["processes"][span["processID"]]["serviceName"]
