"""Every client that speaks the Responses API, for real, against the local server: the `openai`
SDK (plain, `responses.stream`, `stream=True`, function tools, async), the OpenAI Agents SDK
(its default model API: `Runner.run_sync`, `Runner.run_streamed`, structured output),
langchain-openai (`use_responses_api=True`) and pydantic-ai (`OpenAIResponsesModel`).

Each program is recorded once with telemetry on; then the recording replays strictly with
the server down (no request), a changed request fails in one line naming the field, every
model call was one GenAI span with its metrics and no conformance violation, and `cafe view`
of the recording shows the conversation, the tools and the usage."""

from __future__ import annotations

import asyncio
import html
import io
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from pydantic import BaseModel

import cafe.wire as wire
from cafe.cli import main
from cafe.recording import load_recording
from cafe.recording.errors import ReplayMismatch
from cafe_otel import MetricsOptions, configure
from cafe_otel import semconv as sc
from cafe_otel.instrumentation import OpenAIWireInstrumentor
from tests.genai_schemas import span_violations
from tests.wire.openai_server import Received
from tests.wire.responses_server import ResponsesServer

KEY = "sk-test-responses-0123456789abcdef"
MODEL = "gpt-4.1"
INSTRUCTIONS = "You take orders at a cafe."
ASKED = "A latte, please."
PRICE_CHECK = {
    "type": "function", "name": "price_check", "description": "The price of an item on the menu.", "strict": True,
    "parameters": {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"],
                   "additionalProperties": False},
}


def price_check(item: str) -> str:
    """The price of an item on the menu."""
    return json.dumps({"item": item, "price_eur": 1.6})


class Order(BaseModel):
    item: str
    count: int


# --- the programs: (base url, instructions) -> what the program got ---------------------
def _openai(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0)


def openai_plain(base_url: str, instructions: str) -> Any:
    """A function call answered through `previous_response_id`."""
    client = _openai(base_url)
    first = client.responses.create(model=MODEL, instructions=instructions, input=ASKED, tools=[PRICE_CHECK])
    call = first.output[0]
    assert call.type == "function_call"
    second = client.responses.create(model=MODEL, instructions=instructions, previous_response_id=first.id,
                                     tools=[PRICE_CHECK], input=[{"type": "function_call_output",
                                                                  "call_id": call.call_id,
                                                                  "output": price_check(**json.loads(call.arguments))}])
    return [call.arguments, second.output_text]


def openai_stream_helper(base_url: str, instructions: str) -> Any:
    """`responses.stream`, with reasoning, to the final response."""
    with _openai(base_url).responses.stream(model=MODEL, instructions=instructions, input=ASKED,
                                            reasoning={"effort": "low", "summary": "auto"},
                                            max_output_tokens=64) as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()
    return [deltas, final.output_text, [item.type for item in final.output]]


def openai_stream_true(base_url: str, instructions: str) -> Any:
    """`stream=True` events, a function call, and the whole history sent back."""
    client = _openai(base_url)
    history: list[Any] = [{"role": "user", "content": ASKED}]
    said = []
    for _turn in range(2):
        done = None
        for event in client.responses.create(model=MODEL, instructions=instructions, input=history,
                                             tools=[PRICE_CHECK], stream=True):
            said.append(event.type)
            if event.type == "response.completed":
                done = event.response
        assert done is not None
        history += [item.model_dump(exclude_none=True) for item in done.output]
        history += [{"type": "function_call_output", "call_id": item.call_id,
                     "output": price_check(**json.loads(item.arguments))}
                    for item in done.output if item.type == "function_call"]
    return said


def openai_async(base_url: str, instructions: str) -> Any:
    """AsyncOpenAI: a plain call and a streamed one."""
    async def calls() -> Any:
        client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)
        plain = await client.responses.create(model=MODEL, instructions=instructions, input=ASKED)
        kinds = [event.type async for event in await client.responses.create(
            model=MODEL, instructions=instructions, input="And a croissant.", stream=True)]
        await client.close()
        return [plain.output_text, kinds]
    return asyncio.run(calls())


def _agent(instructions: str, **extra: Any) -> Any:
    from agents import Agent, function_tool

    return Agent(name="barista", instructions=instructions, model=MODEL, **extra,
                 tools=[] if "output_type" in extra else [function_tool(price_check)])


def _run_config(base_url: str) -> Any:
    """The SDK's default provider (the Responses API) on the local server; its traces off, so
    that nothing reaches for the service (a replay answers its upload: tests/wire/test_telemetry.py)."""
    from agents import RunConfig
    from agents.models.openai_provider import OpenAIProvider

    client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)
    return RunConfig(model_provider=OpenAIProvider(openai_client=client), tracing_disabled=True)


def agents_run_sync(base_url: str, instructions: str) -> Any:
    from agents import Runner

    result = Runner.run_sync(_agent(instructions), ASKED, run_config=_run_config(base_url))
    return str(result.final_output)


def agents_run_streamed(base_url: str, instructions: str) -> Any:
    from agents import Runner

    async def run() -> Any:
        result = Runner.run_streamed(_agent(instructions), ASKED, run_config=_run_config(base_url))
        kinds = [event.type async for event in result.stream_events()]
        return [str(result.final_output), sorted(set(kinds))]
    return asyncio.run(run())


def agents_structured_output(base_url: str, instructions: str) -> Any:
    from agents import Runner

    result = Runner.run_sync(_agent(instructions, output_type=Order), ASKED, run_config=_run_config(base_url))
    return result.final_output.model_dump()


def langchain_responses(base_url: str, instructions: str) -> Any:
    """`ChatOpenAI(use_responses_api=True)` with a bound tool: invoked, then streamed."""
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model=MODEL, base_url=base_url, api_key=KEY, max_retries=0,  # type: ignore[arg-type]
                       use_responses_api=True).bind_tools([tool(price_check)])
    messages: list[Any] = [SystemMessage(instructions), HumanMessage(ASKED)]
    asked = model.invoke(messages)
    messages += [asked, *(ToolMessage(price_check(**call["args"]), tool_call_id=call["id"])
                          for call in asked.tool_calls)]
    said = "".join(str(chunk.text) for chunk in model.stream(messages))
    return [[call["name"] for call in asked.tool_calls], said]


def pydantic_ai_responses(base_url: str, instructions: str) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIResponsesModel(MODEL, provider=OpenAIProvider(base_url=base_url, api_key=KEY))
    agent = Agent(model, instructions=instructions, tools=[price_check])
    return agent.run_sync(ASKED).output


@dataclass(frozen=True)
class Client:
    name: str
    run: Callable[[str, str], Any]
    streamed: tuple[bool, ...]  # each model call's, in order
    tools: tuple[str, ...] = ()  # the tool calls the model asks for
    instructions_at: str = "$.instructions"  # where a changed instruction shows in the request
    needs: str | None = None  # the module it needs (a test extra)


CLIENTS = [
    Client("openai plain", openai_plain, (False, False), ("price_check",)),
    Client("openai responses.stream", openai_stream_helper, (True,)),
    Client("openai stream=True", openai_stream_true, (True, True), ("price_check",)),
    Client("openai async", openai_async, (False, True)),
    Client("agents run_sync", agents_run_sync, (False, False), ("price_check",), needs="agents"),
    Client("agents run_streamed", agents_run_streamed, (True, True), ("price_check",), needs="agents"),
    Client("agents structured output", agents_structured_output, (False,), needs="agents"),
    Client("langchain-openai", langchain_responses, (False, True), ("price_check",), "$.input[0].content",
           needs="langchain_openai"),
    Client("pydantic-ai", pydantic_ai_responses, (False, False), ("price_check",), needs="pydantic_ai"),
]


# --- recording each program once, with telemetry on -------------------------------------
class KeptMetrics(MetricExporter):
    def __init__(self) -> None:
        super().__init__()
        self.last: Any = None

    def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        self.last = metrics_data
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None

    def points(self, name: str) -> list[Any]:
        return [point for resource in (self.last.resource_metrics if self.last else ())
                for scope in resource.scope_metrics for metric in scope.metrics if metric.name == name
                for point in metric.data.data_points]


@dataclass
class Recorded:
    client: Client
    path: Path
    live: Any
    spans: list[ReadableSpan]
    metrics: KeptMetrics
    received: list[Received]
    server: ResponsesServer


@pytest.fixture(scope="module", params=CLIENTS, ids=[client.name for client in CLIENTS])
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    client: Client = request.param
    if client.needs:
        pytest.importorskip(client.needs)
    path = tmp_path_factory.mktemp("responses") / "agent.jsonl"
    spans, metrics = InMemorySpanExporter(), KeptMetrics()
    handle = configure(exporter=spans, environ={}, set_global=False, capture_content=True,
                       metrics=MetricsOptions(exporter=metrics))
    instrumentor = OpenAIWireInstrumentor()
    with ResponsesServer.running() as server:
        instrumentor.instrument(telemetry=handle)
        try:
            with wire.record(path):
                live = client.run(server.base_url, INSTRUCTIONS)
        finally:
            instrumentor.uninstrument()
            handle.shutdown(5.0)
        yield Recorded(client, path, live, list(spans.get_finished_spans()), metrics, list(server.received), server)


def _model_calls(recorded: Recorded) -> list[Received]:
    return [received for received in recorded.received if received.path == "/v1/responses"]


def test_each_client_replays_strictly_with_the_server_down(recorded: Recorded) -> None:
    calls = _model_calls(recorded)
    assert len(calls) == len(recorded.client.streamed)
    assert [bool((call.body or {}).get("stream")) for call in calls] == list(recorded.client.streamed)
    server = recorded.server
    before = len(server.received)
    server.down()
    try:
        with wire.replay(recorded.path) as source:
            replayed = recorded.client.run(server.base_url, INSTRUCTIONS)
    finally:
        server.down(False)
    assert replayed == recorded.live
    assert source.served == len(calls)
    assert len(server.received) == before  # no request reached the server


def test_a_changed_request_fails_in_one_line_naming_the_field(recorded: Recorded) -> None:
    server = recorded.server
    before = len(server.received)
    server.down()
    try:
        with pytest.raises(ReplayMismatch) as caught, wire.replay(recorded.path):
            recorded.client.run(server.base_url, "You take orders at a bakery.")
    finally:
        server.down(False)
    line = str(caught.value)
    assert "\n" not in line and KEY not in line and "bakery" not in line
    assert f"call 1: the request differs from the recording at {recorded.client.instructions_at}:" in line
    assert len(server.received) == before


def test_each_model_call_is_one_genai_span_with_its_usage(recorded: Recorded) -> None:
    calls = _model_calls(recorded)
    spans = [span for span in recorded.spans if (span.attributes or {}).get(sc.GEN_AI_OPERATION_NAME)]
    assert len(spans) == len(calls)
    for span, streamed in zip(sorted(spans, key=lambda s: s.start_time or 0), recorded.client.streamed, strict=True):
        attributes = dict(span.attributes or {})
        assert span.name == f"chat {MODEL}" and span.kind is SpanKind.CLIENT
        assert attributes[sc.GEN_AI_OPERATION_NAME] == "chat"
        assert attributes[sc.GEN_AI_PROVIDER_NAME] == "openai"
        assert attributes[sc.OPENAI_API_TYPE] == "responses"
        assert attributes[sc.GEN_AI_REQUEST_MODEL] == MODEL
        assert attributes[sc.GEN_AI_RESPONSE_MODEL] == f"{MODEL}-2025-04-14"
        assert attributes.get(sc.GEN_AI_REQUEST_STREAM, False) is streamed  # set only when it streams
        assert (sc.GEN_AI_REQUEST_STREAM in attributes) is streamed
        assert attributes[sc.GEN_AI_RESPONSE_ID].startswith("resp_")
        assert attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] in (("stop",), ("tool_call",))
        assert attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] > 0 and attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] > 0
        assert (sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK in attributes) is streamed
        assert span_violations(attributes) == []
    asked = [part["name"] for span in spans for message in json.loads(dict(span.attributes or {})[
        sc.GEN_AI_OUTPUT_MESSAGES]) for part in message["parts"] if part["type"] == "tool_call"]
    assert tuple(asked) == recorded.client.tools
    answered = [call.response["usage"] for call in load_recording(recorded.path).calls]
    assert sorted((dict(span.attributes or {})[sc.GEN_AI_USAGE_INPUT_TOKENS],
                   dict(span.attributes or {})[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) for span in spans) == sorted(
        (usage["input_tokens"], usage["output_tokens"]) for usage in answered)


def test_each_model_call_records_the_chat_metrics(recorded: Recorded) -> None:
    metrics = recorded.metrics
    calls = len(recorded.client.streamed)
    streamed = sum(recorded.client.streamed)
    durations = metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION)
    assert sum(point.count for point in durations) == calls
    assert {point.attributes[sc.GEN_AI_OPERATION_NAME] for point in durations} == {"chat"}
    assert {point.attributes[sc.GEN_AI_PROVIDER_NAME] for point in durations} == {"openai"}
    usage = metrics.points(sc.METRIC_GEN_AI_CLIENT_TOKEN_USAGE)
    by_type = {point.attributes[sc.GEN_AI_TOKEN_TYPE]: point for point in usage}
    assert by_type["input"].count == calls and by_type["output"].count == calls
    spans = [dict(span.attributes or {}) for span in recorded.spans
             if (span.attributes or {}).get(sc.GEN_AI_OPERATION_NAME)]
    assert by_type["output"].sum == sum(span[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for span in spans)
    first = metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK)
    assert sum(point.count for point in first) == streamed
    per_chunk = metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK)
    assert (sum(point.count for point in per_chunk) > 0) is (streamed > 0)


def _page_text(page: str) -> str:
    text = re.sub(r"<style.*?</style>", "", page, flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text)))


def test_cafe_view_shows_the_conversation_the_tools_and_the_usage(recorded: Recorded, tmp_path: Path) -> None:
    page = tmp_path / "run.html"
    out, err = io.StringIO(), io.StringIO()
    code = main(["view", str(recorded.path), "-o", str(page)], environ={}, out=out, err=err)
    assert code == 0, err.getvalue()
    shown = _page_text(page.read_text(encoding="utf-8"))
    calls = load_recording(recorded.path).calls
    assert f"{len(calls)} model call(s)" in shown
    assert ASKED in shown and INSTRUCTIONS in shown
    for tool in recorded.client.tools:
        assert f"execute_tool {tool}" in shown
    for call in calls:
        usage = call.response["usage"]
        assert f"{usage['input_tokens']}+{usage['output_tokens']} tokens" in shown
    assert "no usage" not in shown and "0 message(s)" not in shown and "?:" not in shown
