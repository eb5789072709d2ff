"""A model call's reading (`cafe.apis`) as the 1.41.1 GenAI span attributes: what samplers see
at its start, what its answer adds, and (with capture on) its content."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cafe.apis import CallRequest, CallResponse, Operation, RequestContent
from cafe_otel import semconv as sc
from cafe_otel._spans import content

if TYPE_CHECKING:
    from cafe.wire import WireRequest

# The `openai.api.type` of each OpenAI-based reading.
_OPENAI_API_TYPES = {"openai.chat_completions": sc.API_TYPE_CHAT_COMPLETIONS, "openai.responses": sc.API_TYPE_RESPONSES}


def openai_api_type(asked: CallRequest) -> str | None:
    """The `openai.api.type` of a call of an OpenAI-based API (None for any other)."""
    return _OPENAI_API_TYPES.get(asked.api)


def request_attributes(asked: CallRequest, request: WireRequest) -> dict[str, Any]:
    """The start attributes of a call: what samplers should see, and every request
    parameter the 1.41.1 conventions define for its operation, when the request sets it."""
    # On every model call's path: plain ifs, in a fixed order.
    found: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: asked.operation.value, sc.GEN_AI_PROVIDER_NAME: asked.provider}
    api_type = openai_api_type(asked)
    if api_type is not None:
        found[sc.OPENAI_API_TYPE] = api_type
    if asked.model is not None:
        found[sc.GEN_AI_REQUEST_MODEL] = asked.model
    if asked.max_tokens is not None:
        found[sc.GEN_AI_REQUEST_MAX_TOKENS] = asked.max_tokens
    if asked.temperature is not None:
        found[sc.GEN_AI_REQUEST_TEMPERATURE] = asked.temperature
    if asked.top_p is not None:
        found[sc.GEN_AI_REQUEST_TOP_P] = asked.top_p
    if asked.top_k is not None:
        found[sc.GEN_AI_REQUEST_TOP_K] = asked.top_k
    if asked.frequency_penalty is not None:
        found[sc.GEN_AI_REQUEST_FREQUENCY_PENALTY] = asked.frequency_penalty
    if asked.presence_penalty is not None:
        found[sc.GEN_AI_REQUEST_PRESENCE_PENALTY] = asked.presence_penalty
    if asked.stop_sequences is not None:
        found[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = asked.stop_sequences
    if asked.seed is not None:
        found[sc.GEN_AI_REQUEST_SEED] = asked.seed
    if asked.choice_count is not None:
        found[sc.GEN_AI_REQUEST_CHOICE_COUNT] = asked.choice_count
    if asked.stream:  # the conventions: set if and only if the request streams
        found[sc.GEN_AI_REQUEST_STREAM] = True
    if asked.output_type is not None:
        found[sc.GEN_AI_OUTPUT_TYPE] = asked.output_type
    if asked.service_tier is not None:
        found[sc.OPENAI_REQUEST_SERVICE_TIER] = asked.service_tier
    if asked.encoding_formats is not None:
        found[sc.GEN_AI_REQUEST_ENCODING_FORMATS] = asked.encoding_formats
    if asked.dimensions is not None:  # what the vectors should have; the answer's own length replaces it
        found[sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = asked.dimensions
    if asked.conversation_id is not None:
        found[sc.GEN_AI_CONVERSATION_ID] = asked.conversation_id
    found[sc.SERVER_ADDRESS] = request.host
    found[sc.SERVER_PORT] = request.port if request.port is not None else (443 if request.scheme == "https" else 80)
    return found


def response_attributes(answer: CallResponse, found: dict[str, Any]) -> None:
    """Adds the end attributes the answer set to `found`."""
    if answer.id is not None:
        found[sc.GEN_AI_RESPONSE_ID] = answer.id
    if answer.model is not None:
        found[sc.GEN_AI_RESPONSE_MODEL] = answer.model
    if answer.system_fingerprint is not None:
        found[sc.OPENAI_RESPONSE_SYSTEM_FINGERPRINT] = answer.system_fingerprint
    if answer.service_tier is not None:
        found[sc.OPENAI_RESPONSE_SERVICE_TIER] = answer.service_tier
    usage = answer.usage
    if usage.input_tokens is not None:
        found[sc.GEN_AI_USAGE_INPUT_TOKENS] = usage.input_tokens
    if usage.output_tokens is not None:
        found[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = usage.output_tokens
    if usage.cache_read_input_tokens is not None:
        found[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = usage.cache_read_input_tokens
    if usage.cache_creation_input_tokens is not None:
        found[sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = usage.cache_creation_input_tokens
    if usage.reasoning_output_tokens is not None:
        found[sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = usage.reasoning_output_tokens
    if answer.finish_reasons:
        found[sc.GEN_AI_RESPONSE_FINISH_REASONS] = answer.finish_reasons
    if answer.dimension_count is not None:
        found[sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = answer.dimension_count


def carries_content(asked: CallRequest) -> bool:
    """Whether the call's span defines content attributes: the 1.41.1 embeddings span
    defines none (its input is not a conversation)."""
    return asked.operation is not Operation.EMBEDDINGS


def content_parts(said: RequestContent, answer: CallResponse) -> dict[str, Any]:
    """The content of a call (only with capture on) as the conventions structure it: the
    content event's attribute values."""
    found: dict[str, Any] = {}
    if said.system_instructions:
        found[sc.GEN_AI_SYSTEM_INSTRUCTIONS] = said.system_instructions
    if said.input_messages:
        found[sc.GEN_AI_INPUT_MESSAGES] = said.input_messages
    if answer.output_messages:
        found[sc.GEN_AI_OUTPUT_MESSAGES] = answer.output_messages
    if said.tool_definitions:
        found[sc.GEN_AI_TOOL_DEFINITIONS] = said.tool_definitions
    return found


def content_attributes(said: RequestContent, answer: CallResponse) -> dict[str, Any]:
    """The content attributes of a call (only with capture on), as JSON strings: a span's
    attribute values cannot be structured."""
    return {key: content.to_json(value) for key, value in content_parts(said, answer).items()}


def span_name(asked: CallRequest) -> str:
    """`{operation} {request model}`, or the operation alone when the request names no model."""
    return f"{asked.operation.value} {asked.model}" if asked.model else asked.operation.value
