"""Pure functions from cafe's typed trace events to what their OpenTelemetry spans carry.

The one mapping: the live span listener, a replay and `cafe export` all go through here.

shift -> `invoke_agent {agent}` INTERNAL, generation -> `chat {model}` CLIENT (a call read
from a recorded exchange: `{operation} {model}`, by its API's reading),
tool -> `execute_tool {tool}` INTERNAL, phase -> an INTERNAL span named as the phase,
a plain `Tracer.span` -> an INTERNAL span with its name and nothing else.
Start attributes are what samplers should see (operation, provider, request model);
end attributes are what only the ended event knows (usage, response, status). Content
attributes are added only when the capture mode says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cafe.apis import openai_chat
from cafe.trace import (
    GenerationEnded,
    GenerationResult,
    GenerationStarted,
    PhaseEnded,
    PhaseStarted,
    ShiftEnded,
    ShiftStarted,
    ToolEnded,
    ToolStarted,
)
from cafe_otel import agent
from cafe_otel import semconv as sc
from cafe_otel._spans import content
from cafe_otel._wire.attributes import carries_content, content_attributes, openai_api_type, response_attributes

Attributes = dict[str, Any]

UNKNOWN_TOOL = agent.UNKNOWN_TOOL
UNKNOWN_PROVIDER = agent.UNKNOWN_PROVIDER


def tool_label(name: str | None, defined: bool) -> str:
    """A tool name safe for a span name or a metric attribute: one the agent defines (the
    model may request any string, and a span name is neither filtered by the metadata
    processor nor low-cardinality otherwise). Names heard on the wire go through the same
    check with the request's tool definitions (`cafe_otel.agent.tool_label`)."""
    return agent.tool_label(name, (name,) if defined and name is not None else ())


_NONE_DEFINED: frozenset[str] = frozenset()


def _defined_tools(tools: Sequence[Mapping[str, Any]] | None) -> frozenset[str]:
    """The names a request's tool definitions give: chat-completions `function` tools, and
    the flat `{"type": "function", "name": ...}` of the Responses API."""
    names = set()
    for tool in tools or ():
        # `dict` first: a check of the exact type costs little, where the ABC's costs about a
        # thousand instructions, and this runs on the calling thread for every call.
        if not isinstance(tool, (dict, Mapping)):
            continue
        function = tool.get("function")
        name = function.get("name") if isinstance(function, (dict, Mapping)) else tool.get("name")
        if isinstance(name, str):
            names.add(name)
    return frozenset(names)


def _drop_none(attributes: Mapping[str, Any]) -> Attributes:
    return {key: value for key, value in attributes.items() if value is not None}


def _str(value: Any) -> str | None:
    # Enum members go out as their plain value: an exporter must not see our types.
    return None if value is None else str(value.value if hasattr(value, "value") else value)


# --- shift ------------------------------------------------------------------------------
def shift_name(event: ShiftStarted) -> str:
    return agent.agent_span_name(event.agent)


def shift_start(event: ShiftStarted) -> Attributes:
    return agent.agent_start_attributes(event.agent, provider=event.provider, model=event.model,
                                        conversation_id=event.conversation_id)


def shift_end(event: ShiftEnded) -> Attributes:
    return _with_error(_drop_none({
        sc.CAFE_STOP_REASON: _str(event.stop_reason),
        sc.CAFE_SHIFT_TURNS: event.turns,
        sc.CAFE_SHIFT_TICKETS: event.tickets,
    }), event.error_type)


# --- phase ------------------------------------------------------------------------------
def phase_start(event: PhaseStarted) -> Attributes:
    return _drop_none({sc.CAFE_PHASE: event.phase.value, sc.CAFE_TURN: event.turn})


def phase_end(event: PhaseEnded) -> Attributes:
    return _with_error(_drop_none({sc.CAFE_STOP_REASON: _str(event.stop_reason)}), event.error_type)


# --- generation -------------------------------------------------------------------------
def generation_name(event: GenerationStarted) -> str:
    reading = event.request.reading
    if reading is not None and reading.request is not None:
        return f"{reading.request.operation.value} {event.request.model}"
    return sc.CHAT_SPAN_NAME.format(model=event.request.model)


def generation_start(event: GenerationStarted, conversation_id: str | None, turn: int | None) -> Attributes:
    """`conversation_id` and `turn` are the enclosing shift's and turn's."""
    # On every model call's path: plain ifs, in the order the attributes have always had
    # (the golden OTLP bytes depend on it).
    r = event.request
    asked = r.reading.request if r.reading is not None else None
    found: Attributes = {sc.GEN_AI_OPERATION_NAME: asked.operation.value if asked is not None else sc.OP_CHAT}
    if r.provider is not None:
        found[sc.GEN_AI_PROVIDER_NAME] = r.provider
    if asked is not None and (api_type := openai_api_type(asked)) is not None:
        found[sc.OPENAI_API_TYPE] = api_type
    if r.model is not None:
        found[sc.GEN_AI_REQUEST_MODEL] = r.model
    if r.temperature is not None:
        found[sc.GEN_AI_REQUEST_TEMPERATURE] = r.temperature
    if conversation_id is not None:
        found[sc.GEN_AI_CONVERSATION_ID] = conversation_id
    if turn is not None:
        found[sc.CAFE_TURN] = turn
    if r.server_address is not None or r.server_port is not None:
        found.update(server_attributes(r.server_address, r.server_port))
    return found


def server_attributes(address: Any, port: Any) -> Attributes:
    """server.address/port of a model reached over the network (the live client's)."""
    return _drop_none({
        sc.SERVER_ADDRESS: address if isinstance(address, str) else None,
        sc.SERVER_PORT: port if isinstance(port, int) and not isinstance(port, bool) else None,
    })


def result_attributes(result: GenerationResult | None, defined: frozenset[str] = _NONE_DEFINED) -> Attributes:
    """Metadata of a model's answer: model, id, raw finish reasons, usage and the names of
    the tools it asked for (made safe)."""
    found: Attributes = {}
    if result is None:
        return found
    if result.model is not None:
        found[sc.GEN_AI_RESPONSE_MODEL] = result.model
    if result.response_id is not None:
        found[sc.GEN_AI_RESPONSE_ID] = result.response_id
    if result.finish_reasons:
        found[sc.GEN_AI_RESPONSE_FINISH_REASONS] = result.finish_reasons
    if result.input_tokens is not None:
        found[sc.GEN_AI_USAGE_INPUT_TOKENS] = result.input_tokens
    if result.output_tokens is not None:
        found[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = result.output_tokens
    if result.tool_calls:
        found[sc.CAFE_GEN_AI_TOOL_CALLS] = tuple(
            name if name in defined else UNKNOWN_TOOL for name in result.tool_calls)
    return found


def generation_end(event: GenerationEnded) -> Attributes:
    asked = event.result is not None and bool(event.result.tool_calls)  # the names are only checked then
    found = result_attributes(event.result, _defined_tools(event.request.tools) if asked else _NONE_DEFINED)
    if event.request.reading is not None:  # what its API's reading adds: cache and reasoning tokens, tier
        response_attributes(event.request.reading.response, found)
    if event.error is not None:  # error_type is a property: not asked on every call
        found[sc.ERROR_TYPE] = event.error_type
    return found


def chat_content(
    messages: Sequence[Mapping[str, Any]],
    response: Mapping[str, Any] | None,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> Attributes:
    """The content attributes of one model call, as JSON strings."""
    # The system prompt is part of the chat history here: it stays in the input messages.
    found: Attributes = {sc.GEN_AI_INPUT_MESSAGES: content.to_json(openai_chat.input_messages(messages))}
    if response:
        answer = openai_chat.API.response(response, content=True)
        found[sc.GEN_AI_OUTPUT_MESSAGES] = content.to_json(answer.output_messages or [])
    if tools:
        found[sc.GEN_AI_TOOL_DEFINITIONS] = content.to_json(openai_chat.tool_definitions(tools))
    return found


def generation_content(event: GenerationEnded) -> Attributes:
    r = event.request
    if r.reading is not None:  # read by its API's reading: its content is the reading's
        said, asked = r.reading.content, r.reading.request
        if said is None or asked is None or not carries_content(asked):
            return {}  # the 1.41.1 embeddings span defines no content attributes
        return content_attributes(said, r.reading.response)
    return chat_content(r.messages, event.result.response if event.result else None, r.tools)


# --- tool -------------------------------------------------------------------------------
def tool_name(event: ToolStarted) -> str:
    return agent.tool_span_name(event.name, (event.name,) if event.defined else ())


def tool_start(event: ToolStarted, turn: int | None) -> Attributes:
    found = agent.tool_start_attributes(event.name, call_id=event.call_id,
                                        defined=(event.name,) if event.defined else ())
    if turn is not None:
        found[sc.CAFE_TURN] = turn
    return found


def tool_end(event: ToolEnded) -> Attributes:
    status = event.status
    found = _drop_none({
        sc.CAFE_TOOL_STATUS: _str(status),
        sc.CAFE_TICKET_NUMBER: event.ticket_number,
    })
    if status is not None and status.failed:
        found[sc.ERROR_TYPE] = status.value
    return _with_error(found, event.error_type)


def tool_content(event: ToolEnded) -> Attributes:
    return _drop_none({sc.GEN_AI_TOOL_CALL_ARGUMENTS: event.arguments, sc.GEN_AI_TOOL_CALL_RESULT: event.result})


def tool_error_type(event: ToolEnded) -> str | None:
    """ERROR with a low-cardinality error.type on an exception or a failed tool status."""
    if event.error is not None:
        return event.error_type
    return event.status.value if event.status is not None and event.status.failed else None


# --- shared -----------------------------------------------------------------------------
def _with_error(found: Attributes, error_type: str | None) -> Attributes:
    if error_type:
        found[sc.ERROR_TYPE] = error_type
    return found


def error_attributes(error_type: str | None) -> Attributes:
    return _with_error({}, error_type)
