"""Plain programs the consumer tests run under `opentelemetry-instrument`, unchanged, as a user
would: no cafe-otel import, only the SDK and the environment.

`RESPONSES_PROGRAM` is the `openai` SDK's Responses API as an agent uses it, against
tests/wire/responses_server.py: a plain call with `instructions`, then a function tool round
trip whose first call is streamed (the server calls the tool, the program sends its output back
with the call, and the model answers). It prints the tool call's id and the answers' texts, so
that a test compares what a consumer shows with what the SDK returned. It flushes its spans
before it exits, through the OpenTelemetry API, as a short program exporting straight to a
consumer must: the exit's bound (0.5 s) is shorter than MLflow's answer to a new trace on a
loaded machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.otel.test_zero_code import _instrument_command

RESPONSES_SYSTEM = "You are the espresso bar's helper."
RESPONSES_ORDER = "A flat white?"
RESPONSES_QUESTION = "What does a flat white cost?"
RESPONSES_TOOL_OUTPUT = "3.20"
RESPONSES_PROGRAM = f"""
import json
import openai
from opentelemetry import trace

tools = [{{"type": "function", "name": "price_check", "description": "The price of a menu item.", "strict": True,
          "parameters": {{"type": "object", "properties": {{"item": {{"type": "string"}}}}, "required": ["item"],
                         "additionalProperties": False}}}}]
client = openai.OpenAI(max_retries=0)
plain = client.responses.create(model="resp-e2e", instructions={RESPONSES_SYSTEM!r}, input={RESPONSES_ORDER!r},
                                max_output_tokens=40)
done = None
for event in client.responses.create(model="resp-stream", instructions={RESPONSES_SYSTEM!r}, tools=tools,
                                     input={RESPONSES_QUESTION!r}, stream=True):
    if event.type == "response.completed":
        done = event.response
(call,) = [item for item in done.output if item.type == "function_call"]
answered = client.responses.create(model="resp-e2e", instructions={RESPONSES_SYSTEM!r}, tools=tools, input=[
    {{"role": "user", "content": {RESPONSES_QUESTION!r}}},
    {{"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments}},
    {{"type": "function_call_output", "call_id": call.call_id, "output": {RESPONSES_TOOL_OUTPUT!r}}}])
print(json.dumps({{"call_id": call.call_id, "arguments": json.loads(call.arguments), "plain": plain.output_text,
                  "answered": answered.output_text}}))
trace.get_tracer_provider().force_flush(30_000)
"""


def run_instrumented(program: str, workdir: Path, environ: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """Run `program` under `opentelemetry-instrument` in `workdir`, with this process's environment
    less its OTEL_, OPENAI_ and ANTHROPIC_ variables, plus `environ`."""
    command = _instrument_command()
    path = workdir / "agent.py"
    path.write_text(program, encoding="utf-8")
    given = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "OPENAI_", "ANTHROPIC_"))}
    given.update(environ)
    return subprocess.run([str(command), sys.executable, str(path)], env=given, capture_output=True, text=True,
                          timeout=120, cwd=workdir)
