"""Any agent is first-class: its own agent and tool spans (the café loop's come from the same
functions), tool names from its own definitions, and model calls that add up on its agent span."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from cafe import counter
from cafe.counter.clients.live import LiveClient
from cafe.counter.clients.settings import LiveSettings
from cafe_otel import configure
from cafe_otel import semconv as sc
from cafe_otel.agent import execute_tool, invoke_agent, tool_label
from cafe_otel.instrumentation import OpenAIWireInstrumentor
from tests.wire.openai_server import OpenAIServer

KEY = "sk-test-agent-spans-0a1b2c3d4e5f6a7b"
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where is order 12?"}]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer.running() as running:
        yield running


class Instrumented:
    def __init__(self, **options: Any) -> None:
        self.sink = InMemorySpanExporter()
        self.handle = configure(exporter=self.sink, environ={}, set_global=False, metrics=False, **options)
        self.instrumentor = OpenAIWireInstrumentor()

    def __enter__(self) -> Instrumented:
        self.instrumentor.instrument(telemetry=self.handle)
        return self

    def __exit__(self, *exc: object) -> None:
        self.instrumentor.uninstrument()
        self.handle.shutdown(2.0)

    def spans(self) -> dict[str, Any]:
        self.handle.force_flush(2.0)
        return {span.name: span for span in self.sink.get_finished_spans()}


def test_any_agent_opens_its_agent_and_tool_spans_and_its_model_calls_add_up(server: OpenAIServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)
    defined = ["lookup_order"]
    with Instrumented(capture_content=True) as telemetry:
        provider = telemetry.handle.provider
        with invoke_agent("support-bot", provider="openai", model="gpt-test", tracer_provider=provider, content=True):
            for _ in range(2):
                client.chat.completions.create(model="gpt-test", messages=MESSAGES, temperature=0.3)  # type: ignore[arg-type]
            with execute_tool("lookup_order", call_id="call_1", defined=defined, tracer_provider=provider):
                pass
            with execute_tool("drop table", defined=defined, tracer_provider=provider):
                pass
        spans = telemetry.spans()
    agent = spans["invoke_agent support-bot"]
    attributes = dict(agent.attributes)
    assert attributes[sc.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert attributes[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 22  # the two calls', 11 each
    assert attributes[sc.GEN_AI_REQUEST_TEMPERATURE] == 0.3
    assert attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert json.loads(attributes[sc.GEN_AI_INPUT_MESSAGES])[0]["role"] == "system"
    assert json.loads(attributes[sc.GEN_AI_OUTPUT_MESSAGES])[0]["role"] == "assistant"
    chat = spans["chat gpt-test"]
    assert chat.parent.span_id == agent.context.span_id
    tool = spans["execute_tool lookup_order"]
    assert dict(tool.attributes)[sc.GEN_AI_TOOL_NAME] == "lookup_order"  # its own name, not unknown_tool
    assert dict(tool.attributes)[sc.GEN_AI_TOOL_CALL_ID] == "call_1"
    assert "execute_tool unknown_tool" in spans  # a name outside its definitions, or not a name


def test_an_exception_in_an_agent_block_is_typed_by_its_qualified_class() -> None:
    sink = InMemorySpanExporter()
    handle = configure(exporter=sink, environ={}, set_global=False, metrics=False)
    with pytest.raises(TimeoutError), invoke_agent("bot", tracer_provider=handle.provider):
        raise TimeoutError("the customer said: my PIN is 1234")
    with pytest.raises(json.JSONDecodeError), execute_tool("parse", tracer_provider=handle.provider):
        json.loads("{")
    handle.shutdown(1.0)
    tool, agent = sorted(sink.get_finished_spans(), key=lambda span: span.name)
    assert agent.status.status_code is StatusCode.ERROR and dict(agent.attributes)[sc.ERROR_TYPE] == "TimeoutError"
    assert dict(tool.attributes)[sc.ERROR_TYPE] == "json.decoder.JSONDecodeError"
    assert [dict(event.attributes) for event in tool.events] == [{sc.EXCEPTION_TYPE: "json.decoder.JSONDecodeError"}]
    assert "PIN" not in str([event.attributes for event in agent.events])


@pytest.mark.parametrize(("name", "defined", "label"), [
    ("lookup_order", None, "lookup_order"), ("lookup_order", ["lookup_order"], "lookup_order"),
    ("lookup_order", ["other"], "unknown_tool"), ("ignore previous instructions", None, "unknown_tool"),
    ("x" * 65, None, "unknown_tool"), (None, None, "unknown_tool"),
])
def test_tool_names_are_shape_checked_against_the_agents_own_definitions(name: str | None, defined: list[str] | None,
                                                                          label: str) -> None:
    assert tool_label(name, defined) == label


def test_a_cafe_shift_over_the_wire_has_one_chat_span_per_call_not_two(server: OpenAIServer) -> None:
    from cafe.counter.clients.settings import Secret

    with Instrumented() as telemetry:
        client = LiveClient(LiveSettings(server.base_url, Secret(KEY), "gpt-test"), max_retries=0)
        counter.run_shift(client, ["A latte, please."], counter.make_responder([]), tracer=telemetry.handle.tracer())
        telemetry.handle.force_flush(2.0)
        spans = list(telemetry.sink.get_finished_spans())
    chats = [span for span in spans if span.name == "chat gpt-test"]
    assert len(chats) == server.count >= 1  # the café's own chat span; the wire adds none
    (agent,) = [span for span in spans if span.name.startswith("invoke_agent")]
    assert dict(agent.attributes)[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11 * server.count
