"""Agent and tool spans for any agent: `invoke_agent {name}` and `execute_tool {name}`.

    from cafe_otel.agent import execute_tool, invoke_agent

    with invoke_agent("support-bot", model="gpt-4o-mini"):
        reply = client.chat.completions.create(...)      # a chat span under it (the instrumentor)
        with execute_tool("lookup_order", call_id=call.id, defined=tool_names):
            ...

The café loop's shift and tool spans take their names and attributes from the same
functions (`agent_start_attributes`, `tool_label`, `tool_start_attributes`), so a café span
and any agent's look the same. An agent span adds up what the model calls under it
report (`AgentTotals`: token totals, the last temperature and finish reasons, and, with
content capture on, the first input and the last output messages); the wire instrumentor
and the café loop both add to the innermost one, found in the OpenTelemetry context.

A tool name is the agent's own, shape-checked: it leaves as it is when it looks like a name
(`IDENTIFIER_PATTERN`) and, when `defined` is given (the request's tool definitions), is one
of them; otherwise it is `unknown_tool` (a model can ask for any string, and a span name is
not filtered by the metadata processor).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from cafe_otel import semconv as sc
from cafe_otel._privacy.shapes import IDENTIFIER_PATTERN
from cafe_otel._spans.scope import otel_tracer_of

UNKNOWN_TOOL = "unknown_tool"
UNKNOWN_AGENT = "unknown_agent"
UNKNOWN_PROVIDER = "unknown"
_NAME = re.compile(IDENTIFIER_PATTERN)

# Set while a café generation's own chat span is current: the wire instrumentor then makes
# no second span for the same call.
MODEL_CALL_KEY = otel_context.create_key("cafe_otel.model_call")
# The AgentTotals of the innermost agent span.
AGENT_TOTALS_KEY = otel_context.create_key("cafe_otel.agent_totals")


def tool_label(name: str | None, defined: Collection[str] | None = None) -> str:
    """`name` when it looks like a name and (given `defined`) is one of them, else `unknown_tool`."""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        return UNKNOWN_TOOL
    if defined is not None and name not in defined:
        return UNKNOWN_TOOL
    return name


def agent_label(name: str | None) -> str:
    return name if isinstance(name, str) and _NAME.fullmatch(name) is not None else UNKNOWN_AGENT


def agent_span_name(name: str | None) -> str:
    return sc.AGENT_SPAN_NAME.format(agent=agent_label(name))


def tool_span_name(name: str | None, defined: Collection[str] | None = None) -> str:
    return sc.TOOL_SPAN_NAME.format(tool=tool_label(name, defined))


def agent_start_attributes(name: str | None, *, provider: str | None = None, model: str | None = None,
                           conversation_id: str | None = None, agent_id: str | None = None,
                           version: str | None = None) -> dict[str, Any]:
    """What an `invoke_agent` span starts with (the provider is required by the spec:
    `unknown` when the agent does not say)."""
    found: dict[str, Any] = {
        sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
        sc.GEN_AI_PROVIDER_NAME: provider or UNKNOWN_PROVIDER,
        sc.GEN_AI_AGENT_NAME: agent_label(name),
    }
    for key, value in ((sc.GEN_AI_AGENT_ID, agent_id), (sc.GEN_AI_AGENT_VERSION, version),
                       (sc.GEN_AI_CONVERSATION_ID, conversation_id), (sc.GEN_AI_REQUEST_MODEL, model)):
        if value is not None:
            found[key] = value
    return found


def tool_start_attributes(name: str | None, *, call_id: str | None = None, tool_type: str = sc.TOOL_TYPE_FUNCTION,
                          defined: Collection[str] | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {
        sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
        sc.GEN_AI_TOOL_NAME: tool_label(name, defined),
    }
    if call_id is not None:
        found[sc.GEN_AI_TOOL_CALL_ID] = call_id
    found[sc.GEN_AI_TOOL_TYPE] = tool_type
    return found


class AgentTotals:
    """What the model calls under one agent span reported, for that span's end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.temperature: float | None = None
        self.finish_reasons: tuple[str, ...] = ()
        self.first_input: str | None = None
        self.last_output: str | None = None

    def add_call(self, *, input_tokens: int | None = None, output_tokens: int | None = None,
                 temperature: float | None = None, finish_reasons: Sequence[str] = (),
                 input_messages: str | None = None, output_messages: str | None = None) -> None:
        with self._lock:
            if input_tokens is not None:
                self.input_tokens = (self.input_tokens or 0) + input_tokens
            if output_tokens is not None:
                self.output_tokens = (self.output_tokens or 0) + output_tokens
            if temperature is not None:
                self.temperature = temperature
            if finish_reasons:
                self.finish_reasons = tuple(finish_reasons)
            if input_messages is not None and self.first_input is None:
                self.first_input = input_messages
            if output_messages is not None:
                self.last_output = output_messages

    def attributes(self) -> dict[str, Any]:
        """The metadata (token totals, temperature, finish reasons) for the span's end."""
        found: dict[str, Any] = {}
        with self._lock:
            for key, value in ((sc.GEN_AI_USAGE_INPUT_TOKENS, self.input_tokens),
                               (sc.GEN_AI_USAGE_OUTPUT_TOKENS, self.output_tokens),
                               (sc.GEN_AI_REQUEST_TEMPERATURE, self.temperature)):
                if value is not None:
                    found[key] = value
            if self.finish_reasons:
                found[sc.GEN_AI_RESPONSE_FINISH_REASONS] = self.finish_reasons
        return found

    def content(self) -> dict[str, Any]:
        """The first input and the last output messages (only gathered with capture on)."""
        found: dict[str, Any] = {}
        with self._lock:
            if self.first_input is not None:
                found[sc.GEN_AI_INPUT_MESSAGES] = self.first_input
            if self.last_output is not None:
                found[sc.GEN_AI_OUTPUT_MESSAGES] = self.last_output
        return found


def current_totals() -> AgentTotals | None:
    """The totals of the innermost agent span in the current context, if any."""
    found = otel_context.get_value(AGENT_TOTALS_KEY)
    return found if isinstance(found, AgentTotals) else None


def qualified_name(kind: type[BaseException]) -> str:
    """The exception's fully qualified class name (`builtins` left out, and a class made in
    a function named without `<locals>`, which no name shape admits), never its message."""
    module, name = kind.__module__, kind.__qualname__.replace("<locals>.", "")
    return name if module == "builtins" else f"{module}.{name}"


def _failed(span: Span, error: BaseException) -> None:
    kind = qualified_name(type(error))
    span.set_attribute(sc.ERROR_TYPE, kind)
    span.set_status(Status(StatusCode.ERROR))
    # The type only: a message or a stack trace may quote customer text.
    span.add_event(sc.EXCEPTION_EVENT_NAME, {sc.EXCEPTION_TYPE: kind})


@contextmanager
def invoke_agent(name: str, *, provider: str | None = None, model: str | None = None,
                 conversation_id: str | None = None, agent_id: str | None = None, version: str | None = None,
                 tracer_provider: trace.TracerProvider | None = None,
                 content: bool = False) -> Iterator[Span]:
    """An `invoke_agent {name}` INTERNAL span, current for the block. At its end it carries
    the token totals, the last temperature and finish reasons of the model calls under it
    and, with `content` (content capture on), their first input and last output messages.
    An exception leaving the block sets `error.type` to its qualified class."""
    tracer = otel_tracer_of(tracer_provider if tracer_provider is not None else trace.get_tracer_provider())
    totals = AgentTotals()
    attributes = agent_start_attributes(name, provider=provider, model=model, conversation_id=conversation_id,
                                        agent_id=agent_id, version=version)
    with tracer.start_as_current_span(agent_span_name(name), kind=SpanKind.INTERNAL, attributes=attributes,
                                      record_exception=False, set_status_on_exception=False) as span:
        token = otel_context.attach(otel_context.set_value(AGENT_TOTALS_KEY, totals))
        try:
            yield span
        except BaseException as error:
            _failed(span, error)
            raise
        finally:
            otel_context.detach(token)
            span.set_attributes(totals.attributes())
            if content:
                span.set_attributes(totals.content())


@contextmanager
def execute_tool(name: str, *, call_id: str | None = None, tool_type: str = sc.TOOL_TYPE_FUNCTION,
                 defined: Collection[str] | None = None,
                 tracer_provider: trace.TracerProvider | None = None) -> Iterator[Span]:
    """An `execute_tool {name}` INTERNAL span, current for the block; `defined` is the
    request's tool names (a name outside them is `unknown_tool`)."""
    tracer = otel_tracer_of(tracer_provider if tracer_provider is not None else trace.get_tracer_provider())
    attributes = tool_start_attributes(name, call_id=call_id, tool_type=tool_type, defined=defined)
    with tracer.start_as_current_span(tool_span_name(name, defined), kind=SpanKind.INTERNAL, attributes=attributes,
                                      record_exception=False, set_status_on_exception=False) as span:
        try:
            yield span
        except BaseException as error:
            _failed(span, error)
            raise
