"""Every attribute name, span-name format and pinned version, in one place.

The GenAI conventions are in Development status and moved out of core semconv after
1.41.1, the last core release that carries them. The installed
`opentelemetry-semantic-conventions` marks its GenAI constants deprecated ("moved"), so we
keep plain strings of our own, pinned to 1.41.1; `tests/otel/test_semconv.py` checks them
against the installed package so that a rename upstream shows up as a failing test.
"""

from __future__ import annotations

GENAI_SEMCONV_VERSION = "1.41.1"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{GENAI_SEMCONV_VERSION}"
INSTRUMENTATION_NAME = "cafe_otel"

# --- GenAI metadata attributes (semconv 1.41.1) ---------------------------------------
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
# Request parameters and response facts a chat call carries (registry.yaml, openai.md).
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TOP_P = "gen_ai.request.top_p"
GEN_AI_REQUEST_FREQUENCY_PENALTY = "gen_ai.request.frequency_penalty"
GEN_AI_REQUEST_PRESENCE_PENALTY = "gen_ai.request.presence_penalty"
GEN_AI_REQUEST_STOP_SEQUENCES = "gen_ai.request.stop_sequences"
GEN_AI_REQUEST_SEED = "gen_ai.request.seed"
GEN_AI_REQUEST_CHOICE_COUNT = "gen_ai.request.choice.count"
GEN_AI_REQUEST_STREAM = "gen_ai.request.stream"
GEN_AI_OUTPUT_TYPE = "gen_ai.output.type"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_AGENT_ID = "gen_ai.agent.id"
GEN_AI_AGENT_VERSION = "gen_ai.agent.version"
OPENAI_API_TYPE = "openai.api.type"
OPENAI_REQUEST_SERVICE_TIER = "openai.request.service_tier"
OPENAI_RESPONSE_SERVICE_TIER = "openai.response.service_tier"
OPENAI_RESPONSE_SYSTEM_FINGERPRINT = "openai.response.system_fingerprint"
GEN_AI_REQUEST_TOP_K = "gen_ai.request.top_k"
GEN_AI_REQUEST_ENCODING_FORMATS = "gen_ai.request.encoding_formats"
GEN_AI_EMBEDDINGS_DIMENSION_COUNT = "gen_ai.embeddings.dimension.count"
PROVIDER_OPENAI = "openai"
API_TYPE_CHAT_COMPLETIONS = "chat_completions"
API_TYPE_RESPONSES = "responses"
OUTPUT_TYPES = frozenset({"text", "json", "image", "speech"})

# --- GenAI content attributes: set only when content capture is on -------------------
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
GEN_AI_TOOL_DEFINITIONS = "gen_ai.tool.definitions"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
CONTENT_ATTRIBUTES = frozenset({
    GEN_AI_INPUT_MESSAGES, GEN_AI_OUTPUT_MESSAGES, GEN_AI_SYSTEM_INSTRUCTIONS,
    GEN_AI_TOOL_DEFINITIONS, GEN_AI_TOOL_CALL_ARGUMENTS, GEN_AI_TOOL_CALL_RESULT,
})
# The event that carries content when capture is EVENT_ONLY or SPAN_AND_EVENT.
CONTENT_EVENT_NAME = "gen_ai.client.inference.operation.details"

# --- Operation names and well-known values --------------------------------------------
OP_INVOKE_AGENT = "invoke_agent"
OP_CHAT = "chat"
OP_EMBEDDINGS = "embeddings"
OP_EXECUTE_TOOL = "execute_tool"
TOOL_TYPE_FUNCTION = "function"

# --- General conventions --------------------------------------------------------------
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
EXCEPTION_EVENT_NAME = "exception"
EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"
EXCEPTION_STACKTRACE = "exception.stacktrace"
SERVICE_NAME = "service.name"
SERVICE_VERSION = "service.version"
SERVICE_INSTANCE_ID = "service.instance.id"
# Low-cardinality HTTP/RPC metadata a third-party client span commonly carries.
HTTP_REQUEST_METHOD = "http.request.method"
HTTP_RESPONSE_STATUS_CODE = "http.response.status_code"
HTTP_REQUEST_RESEND_COUNT = "http.request.resend_count"
URL_SCHEME = "url.scheme"
URL_PATH = "url.path"
URL_FULL = "url.full"  # never sent: it holds the query (cafe_otel._privacy.http_names reads it)
# The pre-stable HTTP names the contrib instrumentations write by default: never sent, read
# as the stable ones above (cafe_otel._privacy.http_names).
HTTP_METHOD_OLD = "http.method"
HTTP_STATUS_CODE_OLD = "http.status_code"
HTTP_URL_OLD = "http.url"
NET_PEER_NAME_OLD = "net.peer.name"
NET_PEER_PORT_OLD = "net.peer.port"
NETWORK_PROTOCOL_NAME = "network.protocol.name"
NETWORK_PROTOCOL_VERSION = "network.protocol.version"
RPC_SYSTEM = "rpc.system"
RPC_SERVICE = "rpc.service"
RPC_METHOD = "rpc.method"
RPC_GRPC_STATUS_CODE = "rpc.grpc.status_code"

# --- Event names an exported span may carry as they are (any other is renamed) -------
# The exception event, the 1.41.1 content event, and the earlier GenAI message events
# that other instrumentations still emit (their content attributes are removed unless
# content capture is on).
KNOWN_EVENT_NAMES = frozenset({
    EXCEPTION_EVENT_NAME, CONTENT_EVENT_NAME, "gen_ai.system.message", "gen_ai.user.message",
    "gen_ai.assistant.message", "gen_ai.tool.message", "gen_ai.choice",
})

# --- Our own namespace: facts the conventions have no attribute for -------------------
CAFE_PHASE = "cafe.phase"
CAFE_TURN = "cafe.turn"
CAFE_STOP_REASON = "cafe.stop_reason"
CAFE_SHIFT_TURNS = "cafe.shift.turns"
CAFE_SHIFT_TICKETS = "cafe.shift.tickets"
CAFE_TOOL_STATUS = "cafe.tool.status"
CAFE_TICKET_NUMBER = "cafe.ticket.number"
# Requested tool names live inside gen_ai.output.messages (content); the metadata view
# needs them without the content, so they get a key of ours.
CAFE_GEN_AI_TOOL_CALLS = "cafe.gen_ai.tool_calls"
CAFE_CONSENT_OUTCOME = "cafe.consent.outcome"  # a metric attribute (cafe_otel._metrics.listener)
CAFE_RECORDING_VERSION = "cafe.recording.version"
CAFE_RECORDING_CALL = "cafe.recording.call"

# --- Metrics (semconv 1.41.1, docs/gen-ai/gen-ai-metrics.md and model/gen-ai/metrics.yaml) ---
METRIC_GEN_AI_CLIENT_TOKEN_USAGE = "gen_ai.client.token.usage"
METRIC_GEN_AI_CLIENT_OPERATION_DURATION = "gen_ai.client.operation.duration"
# Streaming calls only (the spec: SHOULD NOT be reported otherwise).
METRIC_GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK = "gen_ai.client.operation.time_to_first_chunk"
METRIC_GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK = "gen_ai.client.operation.time_per_output_chunk"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"
TOKEN_TYPE_INPUT = "input"
TOKEN_TYPE_OUTPUT = "output"
# Ours: counters of the shift's own facts, metadata only and bounded.
CAFE_SHIFTS = "cafe.shifts"
CAFE_TOOL_EXECUTIONS = "cafe.tool.executions"
CAFE_TICKETS_FIRED = "cafe.tickets.fired"
CAFE_CONSENT_DECISIONS = "cafe.consent.decisions"
CAFE_REPAIRS_USED = "cafe.repairs.used"
# Every attribute a metric may carry: bounded values only (the Collector's metrics
# allowlist, collector-config/collector.yaml `redaction/metrics`, lists the same keys).
METRIC_ATTRIBUTES = frozenset({
    GEN_AI_OPERATION_NAME, GEN_AI_PROVIDER_NAME, GEN_AI_REQUEST_MODEL, GEN_AI_RESPONSE_MODEL,
    GEN_AI_TOKEN_TYPE, ERROR_TYPE, SERVER_ADDRESS, SERVER_PORT, CAFE_STOP_REASON, GEN_AI_TOOL_NAME,
    CAFE_TOOL_STATUS, CAFE_CONSENT_OUTCOME, OPENAI_RESPONSE_SERVICE_TIER, OPENAI_RESPONSE_SYSTEM_FINGERPRINT,
})

# --- Span names -----------------------------------------------------------------------
AGENT_SPAN_NAME = "invoke_agent {agent}"
CHAT_SPAN_NAME = "chat {model}"
TOOL_SPAN_NAME = "execute_tool {tool}"

# --- The metadata allowlist -----------------------------------------------------------
# What MetadataOnlySpanProcessor lets through, on our spans and everyone else's. Anything
# not listed is removed: a key we do not know could carry a prompt, a URL with a query
# string or a database statement. Listing a key is not enough: its values must also fit
# the key's declared shape (cafe_otel._privacy.shapes), or they are withheld.
METADATA_ALLOWLIST = frozenset({
    GEN_AI_OPERATION_NAME, GEN_AI_PROVIDER_NAME, GEN_AI_AGENT_NAME, GEN_AI_CONVERSATION_ID,
    GEN_AI_REQUEST_MODEL, GEN_AI_REQUEST_TEMPERATURE, GEN_AI_RESPONSE_MODEL, GEN_AI_RESPONSE_ID,
    GEN_AI_RESPONSE_FINISH_REASONS, GEN_AI_USAGE_INPUT_TOKENS, GEN_AI_USAGE_OUTPUT_TOKENS,
    GEN_AI_TOOL_NAME, GEN_AI_TOOL_CALL_ID, GEN_AI_TOOL_TYPE,
    GEN_AI_REQUEST_MAX_TOKENS, GEN_AI_REQUEST_TOP_P, GEN_AI_REQUEST_FREQUENCY_PENALTY,
    GEN_AI_REQUEST_PRESENCE_PENALTY, GEN_AI_REQUEST_STOP_SEQUENCES, GEN_AI_REQUEST_SEED,
    GEN_AI_REQUEST_CHOICE_COUNT, GEN_AI_REQUEST_STREAM, GEN_AI_OUTPUT_TYPE,
    GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
    GEN_AI_AGENT_ID, GEN_AI_AGENT_VERSION, OPENAI_API_TYPE, OPENAI_REQUEST_SERVICE_TIER,
    OPENAI_RESPONSE_SERVICE_TIER, OPENAI_RESPONSE_SYSTEM_FINGERPRINT,
    GEN_AI_REQUEST_TOP_K, GEN_AI_REQUEST_ENCODING_FORMATS, GEN_AI_EMBEDDINGS_DIMENSION_COUNT,
    ERROR_TYPE, SERVER_ADDRESS, SERVER_PORT, EXCEPTION_TYPE,
    CAFE_PHASE, CAFE_TURN, CAFE_STOP_REASON, CAFE_SHIFT_TURNS, CAFE_SHIFT_TICKETS,
    CAFE_TOOL_STATUS, CAFE_TICKET_NUMBER, CAFE_GEN_AI_TOOL_CALLS, CAFE_RECORDING_VERSION,
    CAFE_RECORDING_CALL,
    HTTP_REQUEST_METHOD, HTTP_RESPONSE_STATUS_CODE, HTTP_REQUEST_RESEND_COUNT, URL_SCHEME, URL_PATH,
    NETWORK_PROTOCOL_NAME,
    NETWORK_PROTOCOL_VERSION, RPC_SYSTEM, RPC_SERVICE, RPC_METHOD, RPC_GRPC_STATUS_CODE,
})
