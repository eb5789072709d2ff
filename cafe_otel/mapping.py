"""Pure functions from a cafe `SpanNode` to what its OpenTelemetry span carries.

shift -> `invoke_agent {agent}` INTERNAL, generation -> `chat {model}` CLIENT,
tool -> `execute_tool {tool}` INTERNAL, phase -> an INTERNAL span named as the phase.
Start attributes are what samplers should see (operation, provider, request model);
end attributes are what only the finished node knows (usage, response, status).
Content attributes are added only when the capture mode says so.

The response-to-attributes helpers are shared with `recording_export`, so a live shift
and a converted recording describe a model call the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import SpanKind, StatusCode

from cafe.tools import TOOL_NAMES
from cafe.trace.span import GENERATION, PHASE, SHIFT, TOOL, SpanNode
from cafe_otel import content
from cafe_otel import semconv as sc

Attributes = dict[str, Any]

# Tool statuses (cafe.dispatch / cafe.executor / cafe.loop) that mean the call did not do
# what was asked: consent refusals, aborts and duplicates, invalid arguments, and calls
# cancelled because an earlier one ended the shift.
TOOL_ERROR_STATUSES = frozenset({"refused", "aborted", "duplicate", "invalid", "cancelled"})
UNKNOWN_TOOL = "unknown_tool"


def tool_label(name: str | None) -> str:
    """A tool name safe for a span name: the model may request any string, and a span
    name is neither filtered by the metadata processor nor low-cardinality otherwise."""
    return name if name in TOOL_NAMES else UNKNOWN_TOOL


def span_name(node: SpanNode) -> str:
    if node.kind == SHIFT:
        return sc.AGENT_SPAN_NAME.format(agent=node.attrs.get("agent", "agent"))
    if node.kind == GENERATION and node.generation is not None:
        return sc.CHAT_SPAN_NAME.format(model=node.generation.model)
    if node.kind == TOOL:
        return sc.TOOL_SPAN_NAME.format(tool=tool_label(node.attrs.get("tool", node.name)))
    return node.name


def span_kind(node: SpanNode) -> SpanKind:
    # The model is reached over the network (or stands in for something that is).
    return SpanKind.CLIENT if node.kind == GENERATION else SpanKind.INTERNAL


def _drop_none(attributes: Mapping[str, Any]) -> Attributes:
    return {key: value for key, value in attributes.items() if value is not None}


def start_attributes(node: SpanNode) -> Attributes:
    attrs = node.attrs
    if node.kind == SHIFT:
        return _drop_none({
            sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.GEN_AI_PROVIDER_NAME: attrs.get("provider") or "unknown",
            sc.GEN_AI_AGENT_NAME: attrs.get("agent"),
            sc.GEN_AI_CONVERSATION_ID: attrs.get("conversation_id"),
            sc.GEN_AI_REQUEST_MODEL: attrs.get("model"),
        })
    if node.kind == GENERATION and node.generation is not None:
        g = node.generation
        found = _drop_none({
            sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
            sc.GEN_AI_PROVIDER_NAME: g.provider,
            sc.GEN_AI_REQUEST_MODEL: g.model,
            sc.GEN_AI_REQUEST_TEMPERATURE: g.temperature,
            sc.GEN_AI_CONVERSATION_ID: node.inherited("conversation_id"),
            sc.CAFE_TURN: node.inherited("turn"),
        })
        found.update(server_attributes(g.server_address, g.server_port))
        return found
    if node.kind == TOOL:
        return _drop_none({
            sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
            sc.GEN_AI_TOOL_NAME: tool_label(attrs.get("tool", node.name)),
            sc.GEN_AI_TOOL_CALL_ID: attrs.get("call_id"),
            sc.GEN_AI_TOOL_TYPE: sc.TOOL_TYPE_FUNCTION,
            sc.CAFE_TURN: node.inherited("turn"),
        })
    if node.kind == PHASE:
        return _drop_none({sc.CAFE_PHASE: attrs.get("phase"), sc.CAFE_TURN: attrs.get("turn")})
    return {}


def server_attributes(address: Any, port: Any) -> Attributes:
    """server.address/port of a model reached over the network (the live client's)."""
    return _drop_none({
        sc.SERVER_ADDRESS: address if isinstance(address, str) else None,
        sc.SERVER_PORT: port if isinstance(port, int) and not isinstance(port, bool) else None,
    })


def response_attributes(response: Mapping[str, Any] | None) -> Attributes:
    """Metadata of a chat-completions response: model, id, raw finish reasons, usage and
    the names of the tools it asked for."""
    if not response:
        return {}
    choices = response.get("choices") or []
    finish = tuple(str(c.get("finish_reason")) for c in choices if c.get("finish_reason") is not None)
    usage = response.get("usage") or {}
    message = (choices[0].get("message") if choices else None) or {}
    tools = tuple(tool_label((call.get("function") or {}).get("name"))
                  for call in message.get("tool_calls") or [])
    return _drop_none({
        sc.GEN_AI_RESPONSE_MODEL: response.get("model"),
        sc.GEN_AI_RESPONSE_ID: response.get("id"),
        sc.GEN_AI_RESPONSE_FINISH_REASONS: finish or None,
        sc.GEN_AI_USAGE_INPUT_TOKENS: _int(usage.get("prompt_tokens")),
        sc.GEN_AI_USAGE_OUTPUT_TOKENS: _int(usage.get("completion_tokens")),
        sc.CAFE_GEN_AI_TOOL_CALLS: tools or None,
    })


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def chat_content(
    messages: Sequence[Mapping[str, Any]],
    response: Mapping[str, Any] | None,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> Attributes:
    """The content attributes of one model call, as JSON strings."""
    found: Attributes = {sc.GEN_AI_INPUT_MESSAGES: content.to_json(content.input_messages(messages))}
    instructions = content.system_instructions(messages)
    if instructions:
        found[sc.GEN_AI_SYSTEM_INSTRUCTIONS] = content.to_json(instructions)
    if response:
        found[sc.GEN_AI_OUTPUT_MESSAGES] = content.to_json(content.output_messages(response))
    if tools:
        found[sc.GEN_AI_TOOL_DEFINITIONS] = content.to_json(content.tool_definitions(tools))
    return found


def end_attributes(node: SpanNode) -> Attributes:
    """Metadata known only when the node closes (content is separate: `content_attributes`)."""
    attrs = node.attrs
    found: Attributes = {}
    if node.kind == SHIFT:
        found = _drop_none({
            sc.CAFE_STOP_REASON: attrs.get("stop_reason"),
            sc.CAFE_SHIFT_TURNS: _int(attrs.get("turns")),
            sc.CAFE_SHIFT_TICKETS: _int(attrs.get("tickets")),
        })
    elif node.kind == GENERATION and node.generation is not None:
        found = response_attributes(node.generation.response)
    elif node.kind == TOOL:
        status = attrs.get("status")
        found = _drop_none({
            sc.CAFE_TOOL_STATUS: str(status) if status is not None else None,
            sc.CAFE_TICKET_NUMBER: _int(attrs.get("ticket_number")),
        })
        if status in TOOL_ERROR_STATUSES:
            found[sc.ERROR_TYPE] = str(status)
    elif node.kind == PHASE:
        found = _drop_none({sc.CAFE_STOP_REASON: attrs.get("stop_reason")})
    if node.error_type:
        found[sc.ERROR_TYPE] = node.error_type
    return found


def content_attributes(node: SpanNode) -> Attributes:
    """Content of a node (only ever called when capture is on)."""
    if node.kind == GENERATION and node.generation is not None:
        g = node.generation
        return chat_content(g.input, g.response, g.tools)
    if node.kind == TOOL and node.tool_call is not None:
        return _drop_none({
            sc.GEN_AI_TOOL_CALL_ARGUMENTS: node.tool_call.arguments,
            sc.GEN_AI_TOOL_CALL_RESULT: node.tool_call.result,
        })
    return {}


@dataclass(frozen=True)
class Outcome:
    code: StatusCode
    error_type: str | None = None


def outcome(node: SpanNode) -> Outcome:
    """ERROR with a low-cardinality error.type on an exception or a failed tool status;
    UNSET otherwise (the spec leaves OK to applications that assert success)."""
    if node.error_type:
        return Outcome(StatusCode.ERROR, node.error_type)
    if node.kind == TOOL and node.attrs.get("status") in TOOL_ERROR_STATUSES:
        return Outcome(StatusCode.ERROR, str(node.attrs["status"]))
    return Outcome(StatusCode.UNSET)
