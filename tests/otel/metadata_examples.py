"""Legitimate metadata for every shaped key, and canary-carrying free text, for the
metadata-only processor's tests."""

from __future__ import annotations

from hypothesis import strategies as st

from cafe_otel.semconv import CONTENT_ATTRIBUTES

MARK = "Zq9CANARY"  # in every planted value; no key, name or id of ours contains it

# Real values as providers, instrumentations and the harness send them: they must pass unchanged.
LEGIT: dict[str, object] = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.agent.name": "cafe-counter",
    "gen_ai.conversation.id": "shift-0123456789ab",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.request.temperature": 0.7,
    "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
    "gen_ai.response.id": "chatcmpl-abc123",
    "gen_ai.response.finish_reasons": ("stop", "tool_calls"),
    "gen_ai.usage.input_tokens": 1200,
    "gen_ai.usage.output_tokens": 37,
    "gen_ai.tool.name": "price_check",
    "gen_ai.tool.call.id": "call_abc123",
    "gen_ai.tool.type": "function",
    "gen_ai.request.max_tokens": 256,
    "gen_ai.request.top_p": 0.95,
    "gen_ai.request.top_k": 40.0,
    "gen_ai.request.encoding_formats": ("float", "base64"),
    "gen_ai.embeddings.dimension.count": 1536,
    "gen_ai.request.frequency_penalty": 0.5,
    "gen_ai.request.presence_penalty": -0.5,
    "gen_ai.request.stop_sequences": ("###", "</s>"),
    "gen_ai.request.seed": 42,
    "gen_ai.request.choice.count": 2,
    "gen_ai.request.stream": True,
    "gen_ai.output.type": "json",
    "gen_ai.response.time_to_first_chunk": 0.35,
    "gen_ai.usage.cache_read.input_tokens": 1024,
    "gen_ai.usage.cache_creation.input_tokens": 0,
    "gen_ai.usage.reasoning.output_tokens": 64,
    "gen_ai.agent.id": "asst_5j66UpCpwteGg4YSxUnt7lPY",
    "gen_ai.agent.version": "1.2.0",
    "openai.api.type": "chat_completions",
    "openai.request.service_tier": "auto",
    "openai.response.service_tier": "default",
    "openai.response.system_fingerprint": "fp_44709d6fcb",
    "error.type": "openai.APIConnectionError",
    "server.address": "api.openai.com",
    "server.port": 443,
    "exception.type": "TimeoutError",
    "cafe.phase": "turn",
    "cafe.turn": 2,
    "cafe.stop_reason": "answered",
    "cafe.shift.turns": 3,
    "cafe.shift.tickets": 1,
    "cafe.tool.status": "ok",
    "cafe.ticket.number": 17,
    "cafe.gen_ai.tool_calls": ("price_check", "fire_ticket"),
    "cafe.recording.version": 1,
    "cafe.recording.call": 3,
    "http.request.method": "POST",
    "http.response.status_code": 200,
    "http.request.resend_count": 2,
    "url.scheme": "https",
    "url.path": "/v1/chat/completions",
    "network.protocol.name": "http",
    "network.protocol.version": "1.1",
    "rpc.system": "grpc",
    "rpc.service": "opentelemetry.proto.collector.trace.v1.TraceService",
    "rpc.method": "Export",
    "rpc.grpc.status_code": 14,
}
# More real values a shape must let through.
MORE_LEGIT: list[tuple[str, object]] = [
    ("gen_ai.request.model", "meta-llama/Llama-3.1-8B-Instruct"),
    ("gen_ai.response.model", "claude-3-5-sonnet@20240620"),
    ("gen_ai.response.id", "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b"),
    ("gen_ai.response.finish_reasons", ("end_turn",)),
    ("gen_ai.response.finish_reasons", ("MAX_TOKENS",)),
    ("gen_ai.tool.call.id", "toolu_01A09q90qw90lq917835lq9"),
    ("gen_ai.provider.name", "aws.bedrock"),
    ("server.address", "127.0.0.1"),
    ("server.address", "::1"),
    ("error.type", "500"),
    ("error.type", "_OTHER"),
    ("http.request.method", "_OTHER"),
]


def free_text(draw_text: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[str]:
    """Customer-like text around the canary: it has spaces and punctuation, as text does."""
    draw_text = draw_text if draw_text is not None else st.text(max_size=12)
    return st.tuples(draw_text, draw_text).map(lambda pair: f"{pair[0]} {MARK}, thanks! {pair[1]}")


def canary_value(key: str) -> st.SearchStrategy[object]:
    """What a careless instrumentation or an echoing server could put under `key`."""
    text = free_text()
    return st.one_of(text, st.lists(text, min_size=1, max_size=3).map(tuple))


METADATA_KEYS = sorted(key for key in LEGIT if key not in CONTENT_ATTRIBUTES)
