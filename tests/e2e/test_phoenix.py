"""Arize Phoenix (a real GenAI consumer, Elastic License 2.0) receives a café shift and a plain
`openai` program run under `opentelemetry-instrument`, content capture on, and shows what its
users expect: chat spans as LLM spans with model, tokens and messages (the system prompt
first), tool and agent spans in one tree, the failed call as an error, and no key stored.

Phoenix reads the GenAI conventions itself: on ingest it derives OpenInference attributes
(`openinference.span.kind`, `llm.*`, `tool.*`, `session.id`) from `gen_ai.*` ones and keeps
both, so its REST API (`/v1/projects/{name}/spans`) shows what its pages show.

Phoenix lives in its own cached venv (scripts/phoenix-venv.sh, keyed by
tests/e2e/phoenix-requirements.txt, under ~/.cache/cafe-otel/phoenix); one server for the
module, on free 127.0.0.1 ports with a temporary working directory, started in its own session
and stopped by that session only. Missing, the tests skip with the command that installs it,
or fail when CAFE_E2E_STRICT=1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cafe import counter
from cafe_otel import configure
from otelstack.procs import free_ports
from tests.e2e.consumers import ConsumerServer, call_json, consumer_command
from tests.e2e.programs import (
    RESPONSES_ORDER,
    RESPONSES_PROGRAM,
    RESPONSES_QUESTION,
    RESPONSES_SYSTEM,
    RESPONSES_TOOL_OUTPUT,
    run_instrumented,
)
from tests.otel.test_zero_code import _instrument_command
from tests.wire.anthropic_server import REPLY_WORDS, AnthropicServer
from tests.wire.openai_server import OpenAIServer, answer_text
from tests.wire.responses_server import ResponsesServer

pytestmark = pytest.mark.e2e

KEY = "sk-e2e-phoenix-5c4b3a2918f7e6d5"
SDK_SYSTEM = "You are the espresso bar's helper."
SDK_MESSAGES = [{"role": "system", "content": SDK_SYSTEM}, {"role": "user", "content": "A flat white?"}]
# A plain program, unchanged: its first call meets the rate limit the test plans.
SDK_PROGRAM = f"""
import openai

client = openai.OpenAI(max_retries=0)
messages = {SDK_MESSAGES!r}
try:
    client.chat.completions.create(model="sdk-failing", messages=messages)
except openai.RateLimitError:
    print("rate limited")
client.chat.completions.create(model="sdk-model", messages=messages, max_tokens=6)
for _chunk in client.chat.completions.create(model="sdk-stream", messages=messages, stream=True,
                                             stream_options={{"include_usage": True}}):
    pass
"""
RESPONSES_KEY = "sk-e2e-phoenix-responses-7a6b5c4d3e2f"
ANTHROPIC_KEY = "e2e-phoenix-anthropic-credential-0a1b2c"
# A plain program on the `anthropic` SDK: a tool round trip with a cached system prompt, a
# stream, and an embeddings call of the `openai` SDK beside it.
ANTHROPIC_PROGRAM = f"""
import anthropic
import openai

system = [{{"type": "text", "text": {SDK_SYSTEM!r}, "cache_control": {{"type": "ephemeral"}}}}]
tools = [{{"name": "price_check", "description": "The price of a menu item.",
          "input_schema": {{"type": "object", "properties": {{"item": {{"type": "string"}}}}}}}}]
order = [{{"role": "user", "content": "A flat white?"}}]
client = anthropic.Anthropic(max_retries=0)
first = client.messages.create(model="claude-e2e", max_tokens=64, system=system, tools=tools, messages=order)
(call,) = [block for block in first.content if block.type == "tool_use"]
client.messages.create(model="claude-e2e", max_tokens=64, system=system, tools=tools, messages=[
    *order, {{"role": "assistant", "content": first.content}},
    {{"role": "user", "content": [{{"type": "tool_result", "tool_use_id": call.id, "content": "3.20"}}]}}])
with client.messages.stream(model="claude-stream", max_tokens=64, system=system, messages=order) as stream:
    stream.until_done()
openai.OpenAI(max_retries=0).embeddings.create(model="embed-e2e", input=["a flat white"], encoding_format="float")
"""
# Phoenix's start is mostly importing its server (18 s of CPU) and migrating a new database:
# 60 to 68 s on a 2-core box at load 10 to 13, over 90 s at load 19; the bound leaves room
# above that, as MLflow's does.
READY_TIMEOUT_S = 240.0


class Phoenix(ConsumerServer):
    def __init__(self, command: Path, workdir: Path) -> None:
        ports = free_ports("http", "grpc")
        self.url = f"http://127.0.0.1:{ports['http']}"
        self.home = workdir / "home"
        self.home.mkdir()
        environ = {key: value for key, value in os.environ.items() if not key.startswith(("PHOENIX_", "OTEL_"))}
        environ.update({
            "PHOENIX_WORKING_DIR": str(self.home), "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(ports["http"]), "PHOENIX_GRPC_PORT": str(ports["grpc"]),
            # Nothing leaves the machine, and its log stays short.
            "PHOENIX_TELEMETRY_ENABLED": "false", "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
            "PHOENIX_LOG_MIGRATIONS": "false", "PHOENIX_DB_LOGGING_LEVEL": "warning",
        })
        super().__init__("phoenix", [str(command), "serve"], workdir, environ)

    def spans(self, project: str, expected: int, timeout: float = 60.0) -> list[dict[str, Any]]:
        """The project's spans once `expected` have arrived (a project exists from its first span)."""
        deadline = time.monotonic() + timeout
        found: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            try:
                found = call_json(f"{self.url}/v1/projects/{project}/spans?limit=1000")["data"]
            except urllib.error.HTTPError as error:
                if error.code != 404:
                    raise
            if len(found) >= expected:
                break
            time.sleep(0.5)
        return found

    def stored_bytes(self) -> bytes:
        """Every byte Phoenix wrote: its database (with the write-ahead log) and its output."""
        files = sorted(path for path in self.log.parent.rglob("*") if path.is_file())
        return b"".join(path.read_bytes() for path in files)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    server = Phoenix(consumer_command("phoenix"), tmp_path_factory.mktemp("phoenix"))
    try:
        server.wait_ready(f"{server.url}/healthz", timeout=READY_TIMEOUT_S)
        yield server
    finally:
        server.stop()


def _by_name(spans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        found.setdefault(span["name"], []).append(span)
    return found


def _messages(attributes: dict[str, Any], direction: str) -> list[tuple[str, str | None]]:
    """(role, content) of Phoenix's flattened `llm.{input,output}_messages.N.message.*`."""
    found = []
    index = 0
    while f"llm.{direction}_messages.{index}.message.role" in attributes:
        prefix = f"llm.{direction}_messages.{index}.message."
        found.append((attributes[prefix + "role"], attributes.get(prefix + "content")))
        index += 1
    return found


def test_phoenix_shows_a_cafe_shift_as_one_agent_tree_of_llm_and_tool_spans(phoenix: Phoenix) -> None:
    handle = configure(service_name="cafe-e2e", endpoint=phoenix.url, protocol="http/protobuf",
                       capture_content=True, metrics=False, set_global=False,
                       environ={"OTEL_RESOURCE_ATTRIBUTES": "openinference.project.name=cafe-shift"})
    counter.run_shift(counter.ScriptedClient(), list(counter.DEFAULT_SCRIPT), counter.make_responder([]),
                      tracer=handle.tracer())
    handle.shutdown(30.0)
    assert handle.account.dropped == 0, handle.account.summary()
    exported = handle.account.exported

    spans = phoenix.spans("cafe-shift", expected=exported)
    assert len(spans) == exported, phoenix.tail()
    assert len({span["context"]["trace_id"] for span in spans}) == 1
    ids = {span["context"]["span_id"] for span in spans}
    (root,) = [span for span in spans if span["parent_id"] is None]
    assert all(span["parent_id"] in ids for span in spans if span is not root)
    assert root["name"] == "invoke_agent cafe-counter" and root["span_kind"] == "AGENT"
    assert all(span["status_code"] != "ERROR" for span in spans)

    chats = [span for span in spans if span["name"].startswith("chat ")]
    tools = [span for span in spans if span["name"].startswith("execute_tool ")]
    assert chats and tools
    conversation = root["attributes"]["gen_ai.conversation.id"]
    for chat in chats:
        attributes = chat["attributes"]
        assert chat["span_kind"] == "LLM"
        assert attributes["llm.model_name"] == "scripted-barista-1"
        prompt, completion = attributes["llm.token_count.prompt"], attributes["llm.token_count.completion"]
        assert prompt > 0 and completion > 0 and attributes["llm.token_count.total"] == prompt + completion
        assert _messages(attributes, "input")[0][0] == "system"  # the system prompt, first in the history
        assert _messages(attributes, "output")[0][0] == "assistant"
        assert attributes["session.id"] == conversation
        assert attributes["llm.tools.0.tool.json_schema"]  # the tools the model was offered
    # The agent's totals are its chats' sums, as Phoenix shows them on the trace's root.
    assert root["attributes"]["llm.token_count.prompt"] == sum(
        chat["attributes"]["llm.token_count.prompt"] for chat in chats)
    assert root["attributes"]["llm.token_count.completion"] == sum(
        chat["attributes"]["llm.token_count.completion"] for chat in chats)
    for tool in tools:
        attributes = tool["attributes"]
        assert tool["span_kind"] == "TOOL"
        assert f"execute_tool {attributes['tool.name']}" == tool["name"]
        assert attributes["tool.id"] == attributes["gen_ai.tool.call.id"]
        assert json.loads(attributes["output.value"]) == json.loads(attributes["gen_ai.tool.call.result"])
    # The shift's own steps (setup, turns, wrap-up) carry no GenAI operation: Phoenix has no
    # kind for them and shows them as UNKNOWN.
    steps = [span for span in spans if "gen_ai.operation.name" not in span["attributes"]]
    assert steps and {span["span_kind"] for span in steps} == {"UNKNOWN"}


def test_phoenix_shows_a_plain_openai_program_under_opentelemetry_instrument(
        phoenix: Phoenix, tmp_path: Path) -> None:
    command = _instrument_command()
    program = tmp_path / "agent.py"
    program.write_text(SDK_PROGRAM, encoding="utf-8")
    with OpenAIServer.running() as server:
        server.fail_next(429)
        environ = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "OPENAI_"))}
        environ.update({
            "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": KEY,
            "OTEL_SERVICE_NAME": "plain-agent", "OTEL_RESOURCE_ATTRIBUTES": "openinference.project.name=plain-sdk",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url,
            "OTEL_METRICS_EXPORTER": "none", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
        })
        done = subprocess.run([str(command), sys.executable, str(program)], env=environ, capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rate limited" in done.stdout
    assert "cafe-otel: telemetry: 3 spans exported, 0 dropped" in done.stderr

    spans = phoenix.spans("plain-sdk", expected=3)
    by_name = _by_name(spans)
    assert set(by_name) == {"chat sdk-failing", "chat sdk-model", "chat sdk-stream"}, phoenix.tail()
    (failing,), (plain,), (streamed,) = (by_name[name] for name in ("chat sdk-failing", "chat sdk-model",
                                                                   "chat sdk-stream"))
    for span, model in ((failing, "sdk-failing"), (plain, "sdk-model"), (streamed, "sdk-stream")):
        attributes = span["attributes"]
        assert span["span_kind"] == "LLM" and span["parent_id"] is None
        assert attributes["llm.model_name"] == model and attributes["llm.provider"] == "openai"
        assert _messages(attributes, "input") == [("system", SDK_SYSTEM), ("user", "A flat white?")]

    assert failing["status_code"] == "ERROR" and failing["attributes"]["error.type"] == "429"
    assert "llm.token_count.prompt" not in failing["attributes"]
    for span, request in ((plain, {"messages": SDK_MESSAGES, "max_tokens": 6}),
                          (streamed, {"messages": SDK_MESSAGES})):
        attributes = span["attributes"]
        assert span["status_code"] != "ERROR"
        reply = answer_text(request)
        assert _messages(attributes, "output") == [("assistant", reply)]
        assert attributes["llm.token_count.prompt"] == 11  # what the local server reports
        assert attributes["llm.token_count.completion"] == len(reply.split())
    assert json.loads(plain["attributes"]["llm.invocation_parameters"]) == {"max_tokens": 6}
    assert json.loads(streamed["attributes"]["llm.invocation_parameters"]) == {"stream": True}

    stored = phoenix.stored_bytes()
    assert SDK_SYSTEM.encode() in stored  # captured content is in what was read ...
    assert KEY.encode() not in stored  # ... and the key is nowhere


def test_phoenix_shows_an_anthropic_program_and_an_embeddings_call_under_opentelemetry_instrument(
        phoenix: Phoenix, tmp_path: Path) -> None:
    command = _instrument_command()
    program = tmp_path / "agent.py"
    program.write_text(ANTHROPIC_PROGRAM, encoding="utf-8")
    with AnthropicServer.running() as anthropic_server, OpenAIServer.running() as openai_server:
        environ = {key: value for key, value in os.environ.items()
                   if not key.startswith(("OTEL_", "OPENAI_", "ANTHROPIC_"))}
        environ.update({
            "ANTHROPIC_BASE_URL": anthropic_server.base_url, "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
            "OPENAI_BASE_URL": openai_server.base_url, "OPENAI_API_KEY": KEY,
            "OTEL_SERVICE_NAME": "claude-agent", "OTEL_RESOURCE_ATTRIBUTES": "openinference.project.name=anthropic-sdk",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url,
            "OTEL_METRICS_EXPORTER": "none", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
            # The SDK's own tracing makes a second chat span per call, the parent of ours, as the
            # official instrumentation beside ours would (docs/instrumentation.md): off here.
            "ANTHROPIC_OPEN_TELEMETRY": "false",
        })
        done = subprocess.run([str(command), sys.executable, str(program)], env=environ, capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cafe-otel: telemetry: 4 spans exported, 0 dropped" in done.stderr

    spans = sorted(phoenix.spans("anthropic-sdk", expected=4), key=lambda span: span["start_time"])
    assert [span["name"] for span in spans] == [
        "chat claude-e2e", "chat claude-e2e", "chat claude-stream", "embeddings embed-e2e"], phoenix.tail()
    asked, answered, streamed, embedded = spans
    for span in (asked, answered, streamed):
        attributes = span["attributes"]
        assert span["span_kind"] == "LLM" and span["status_code"] != "ERROR"
        assert attributes["llm.provider"] == "anthropic" and attributes["gen_ai.provider.name"] == "anthropic"
        # `system` is the call's system instructions: Phoenix shows it as the first message.
        assert _messages(attributes, "input")[:2] == [("system", SDK_SYSTEM), ("user", "A flat white?")]
        assert attributes["llm.token_count.prompt"] == attributes["gen_ai.usage.input_tokens"] > 0
    first = asked["attributes"]
    assert first["llm.output_messages.0.message.tool_calls.0.tool_call.function.name"] == "price_check"
    assert first["llm.finish_reason"] == "tool_use"
    # The first call writes the prompt to the cache and the second reads it back.
    assert first["llm.token_count.prompt_details.cache_write"] > 0
    assert answered["attributes"]["llm.token_count.prompt_details.cache_read"] == first[
        "llm.token_count.prompt_details.cache_write"]
    assert _messages(answered["attributes"], "output")[0][0] == "assistant"
    assert "3.20" in str(_messages(answered["attributes"], "output")[0][1])
    assert streamed["attributes"]["llm.token_count.completion"] == REPLY_WORDS
    assert embedded["span_kind"] == "EMBEDDING"
    assert embedded["attributes"]["gen_ai.embeddings.dimension.count"] > 0
    assert "llm.input_messages.0.message.role" not in embedded["attributes"]  # no content on an embeddings span

    stored = phoenix.stored_bytes()
    assert SDK_SYSTEM.encode() in stored  # captured content is in what was read ...
    assert ANTHROPIC_KEY.encode() not in stored and KEY.encode() not in stored  # ... and the keys are nowhere


def test_phoenix_shows_a_responses_program_under_opentelemetry_instrument(phoenix: Phoenix, tmp_path: Path) -> None:
    with ResponsesServer.running() as server:
        done = run_instrumented(RESPONSES_PROGRAM, tmp_path, {
            "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": RESPONSES_KEY,
            "OTEL_SERVICE_NAME": "responses-agent",
            "OTEL_RESOURCE_ATTRIBUTES": "openinference.project.name=responses-sdk",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url,
            "OTEL_METRICS_EXPORTER": "none", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cafe-otel: telemetry: 3 spans exported, 0 dropped" in done.stderr
    assert {received.headers.get("authorization") for received in server.received} == {f"Bearer {RESPONSES_KEY}"}
    returned = json.loads(done.stdout)

    spans = sorted(phoenix.spans("responses-sdk", expected=3), key=lambda span: span["start_time"])
    assert [span["name"] for span in spans] == ["chat resp-e2e", "chat resp-stream", "chat resp-e2e"], phoenix.tail()
    plain, streamed, answered = (span["attributes"] for span in spans)
    for span, model in zip(spans, ("resp-e2e", "resp-stream", "resp-e2e"), strict=True):
        attributes = span["attributes"]
        assert span["span_kind"] == "LLM" and span["status_code"] != "ERROR" and span["parent_id"] is None
        assert attributes["llm.provider"] == "openai" and attributes["openai.api.type"] == "responses"
        assert attributes["llm.model_name"] == model
        prompt, completion = attributes["llm.token_count.prompt"], attributes["llm.token_count.completion"]
        assert prompt == attributes["gen_ai.usage.input_tokens"] > 0
        assert completion == attributes["gen_ai.usage.output_tokens"] > 0
        assert attributes["llm.token_count.total"] == prompt + completion
        # `instructions` are the call's system instructions: Phoenix shows them as the first message.
        assert _messages(attributes, "input")[0] == ("system", RESPONSES_SYSTEM)
    assert _messages(plain, "input") == [("system", RESPONSES_SYSTEM), ("user", RESPONSES_ORDER)]
    assert _messages(plain, "output") == [("assistant", returned["plain"])]
    assert json.loads(plain["llm.invocation_parameters"]) == {"max_tokens": 40}
    assert "llm.tools.0.tool.json_schema" not in plain
    # The streamed call's tool call, assembled from its argument deltas.
    assert json.loads(streamed["llm.invocation_parameters"]) == {"stream": True}
    assert streamed["llm.finish_reason"] == "tool_call"
    called = "llm.output_messages.0.message.tool_calls.0.tool_call."
    assert streamed[called + "id"] == returned["call_id"] and streamed[called + "function.name"] == "price_check"
    assert json.loads(streamed[called + "function.arguments"]) == returned["arguments"]
    for attributes in (streamed, answered):
        assert json.loads(attributes["llm.tools.0.tool.json_schema"])["function"]["name"] == "price_check"
    # The answer's conversation: the question, the call, and the tool's output for that call.
    assert _messages(answered, "input") == [("system", RESPONSES_SYSTEM), ("user", RESPONSES_QUESTION),
                                            ("assistant", None), ("tool", RESPONSES_TOOL_OUTPUT)]
    assert answered["llm.input_messages.2.message.tool_calls.0.tool_call.id"] == returned["call_id"]
    assert answered["llm.input_messages.3.message.tool_call_id"] == returned["call_id"]
    assert _messages(answered, "output") == [("assistant", returned["answered"])]

    stored = phoenix.stored_bytes()
    assert RESPONSES_QUESTION.encode() in stored  # captured content is in what was read ...
    assert RESPONSES_KEY.encode() not in stored  # ... and the key is nowhere
