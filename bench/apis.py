"""Figure 9's request in each model API's own words: the same conversation, tools and answer
as the Chat Completions call, written as an OpenAI Responses call and as an Anthropic Messages
call, with the answer whole and as the server-sent events of the same answer streamed.

Pure functions of JSON values: the runner (bench/peer_runner.py) imports this in the peers'
virtualenvs too, where nothing of cafe is installed.
"""

from __future__ import annotations

import json
from typing import Any

APIS = ("chat", "responses", "anthropic")
"""The APIs figure 9 measures: OpenAI Chat Completions, OpenAI Responses, Anthropic Messages."""
ANTHROPIC_MODEL = "claude-sonnet-4-5-20250929"
CREATED = 1_767_225_600
MAX_TOKENS = 1024  # Anthropic's required `max_tokens`


def _sse(event: str | None, data: dict[str, Any]) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n"


# --- OpenAI Responses ----------------------------------------------------------------------

def responses_request(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The chat request's keyword arguments as `client.responses.create`'s: the system prompt
    as `instructions`, each turn an input item, a tool call a `function_call` item and its
    result a `function_call_output` item, the tools flattened."""
    items: list[dict[str, Any]] = []
    instructions = None
    for message in messages:
        role = message["role"]
        if role == "system":
            instructions = message["content"]
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"],
                          "output": message["content"]})
        else:
            if message.get("content"):
                items.append({"role": role, "content": message["content"]})
            for call in message.get("tool_calls") or ():
                items.append({"type": "function_call", "call_id": call["id"], "name": call["function"]["name"],
                              "arguments": call["function"]["arguments"]})
    flat = [{"type": "function", "name": tool["function"]["name"], "description": tool["function"]["description"],
             "parameters": tool["function"]["parameters"], "strict": False} for tool in tools]
    return {"instructions": instructions, "input": items, "tools": flat, "temperature": 0.0}


def responses_body(chat: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """The chat answer (`chat`, a chat.completion) as the Response object the API returns."""
    calls = chat["choices"][0]["message"]["tool_calls"]
    output = [{"id": f"fc_{call['id']}", "type": "function_call", "status": "completed",
               "arguments": call["function"]["arguments"], "call_id": call["id"], "name": call["function"]["name"]}
              for call in calls]
    usage = chat["usage"]
    return {
        "id": f"resp_{chat['id']}", "object": "response", "created_at": CREATED, "status": "completed",
        "background": False, "completed_at": CREATED + 1, "error": None, "incomplete_details": None,
        "instructions": request["instructions"], "max_output_tokens": None, "max_tool_calls": None,
        "model": chat["model"], "output": output, "parallel_tool_calls": True, "previous_response_id": None,
        "prompt_cache_key": None, "reasoning": {"effort": None, "summary": None}, "safety_identifier": None,
        "service_tier": "default", "store": True, "temperature": 0.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"}, "tool_choice": "auto",
        "tools": request["tools"], "top_logprobs": 0, "top_p": 1.0, "truncation": "disabled",
        "usage": {"input_tokens": usage["prompt_tokens"], "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": usage["completion_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": usage["total_tokens"]},
        "user": None, "metadata": {},
    }


def responses_events(body: dict[str, Any]) -> list[str]:
    """`body` streamed: created, in progress, each function call added, its arguments in
    pieces and done, then completed with the whole response."""
    found: list[tuple[str, dict[str, Any]]] = []
    opening = {**body, "status": "in_progress", "output": [], "usage": None, "completed_at": None}
    found += [("response.created", {"response": opening}), ("response.in_progress", {"response": opening})]
    for index, item in enumerate(body["output"]):
        at = {"item_id": item["id"], "output_index": index}
        found.append(("response.output_item.added",
                      {"output_index": index, "item": {**item, "status": "in_progress", "arguments": ""}}))
        arguments = item["arguments"]
        found += [("response.function_call_arguments.delta", {**at, "delta": arguments[start:start + 16]})
                  for start in range(0, len(arguments), 16)]
        found.append(("response.function_call_arguments.done", {**at, "arguments": arguments}))
        found.append(("response.output_item.done", {"output_index": index, "item": item}))
    found.append(("response.completed", {"response": body}))
    return [_sse(kind, {"type": kind, "sequence_number": number, **data})
            for number, (kind, data) in enumerate(found)]


# --- Anthropic Messages --------------------------------------------------------------------

def anthropic_request(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The chat request's keyword arguments as `client.messages.create`'s: the system prompt
    as `system`, a tool call a `tool_use` block, its result a `tool_result` block in the next
    user turn (turns of one role in a row are one turn, as the API requires)."""
    turns: list[dict[str, Any]] = []
    system = None

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for message in messages:
        role = message["role"]
        if role == "system":
            system = message["content"]
        elif role == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": message["tool_call_id"],
                          "content": message["content"]}])
        else:
            blocks: list[dict[str, Any]] = []
            if message.get("content"):
                blocks.append({"type": "text", "text": message["content"]})
            blocks += [{"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
                        "input": json.loads(call["function"]["arguments"])} for call in message.get("tool_calls") or ()]
            add(role, blocks)
    flat = [{"name": tool["function"]["name"], "description": tool["function"]["description"],
             "input_schema": tool["function"]["parameters"]} for tool in tools]
    # No temperature: the anthropic SDK of the pinned version has none (its models choose).
    return {"system": system, "messages": turns, "tools": flat, "max_tokens": MAX_TOKENS}


def anthropic_body(chat: dict[str, Any]) -> dict[str, Any]:
    """The chat answer as the Message the Messages API returns: the same tool calls as
    `tool_use` blocks, stopped for `tool_use`."""
    calls = chat["choices"][0]["message"]["tool_calls"]
    usage = chat["usage"]
    return {"id": f"msg_{chat['id']}", "type": "message", "role": "assistant", "model": ANTHROPIC_MODEL,
            "content": [{"type": "tool_use", "id": f"toolu_{call['id']}", "name": call["function"]["name"],
                         "input": json.loads(call["function"]["arguments"])} for call in calls],
            "stop_reason": "tool_use", "stop_sequence": None,
            "usage": {"input_tokens": usage["prompt_tokens"], "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0, "output_tokens": usage["completion_tokens"],
                      "service_tier": "standard"}}


def anthropic_events(body: dict[str, Any]) -> list[str]:
    """`body` streamed: message_start, each block started, its input in JSON pieces and
    stopped, then message_delta with the stop reason and the output tokens, message_stop."""
    started = {**body, "content": [], "stop_reason": None, "usage": {**body["usage"], "output_tokens": 1}}
    found: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": started})]
    for index, block in enumerate(body["content"]):
        found.append(("content_block_start", {"index": index, "content_block": {**block, "input": {}}}))
        written = json.dumps(block["input"])
        found += [("content_block_delta", {"index": index, "delta": {"type": "input_json_delta",
                                                                      "partial_json": written[at:at + 16]}})
                  for at in range(0, len(written), 16)]
        found.append(("content_block_stop", {"index": index}))
    found.append(("message_delta", {"delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
                                    "usage": {"output_tokens": body["usage"]["output_tokens"]}}))
    found.append(("message_stop", {}))
    return [_sse(kind, {"type": kind, **data}) for kind, data in found]


# --- one call of any API -------------------------------------------------------------------

def call_of(api: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], chat: dict[str, Any],
            model: str) -> dict[str, Any]:
    """The spec's part that differs by API: `request` (the create call's keyword arguments
    besides the model and the stream switch), `model`, `body` (the answer), `events` (the
    answer streamed; None for chat, whose runner writes its own chunks), and `floor`: the
    span name and attributes one bare SDK span would carry for the call."""
    if api == "chat":
        request: dict[str, Any] = {"messages": messages, "tools": tools, "temperature": 0.0}
        body, events, provider = chat, None, "openai"
        usage = (chat["usage"]["prompt_tokens"], chat["usage"]["completion_tokens"])
        finish, response_model = chat["choices"][0]["finish_reason"], chat["model"]
    elif api == "responses":
        request = responses_request(messages, tools)
        body = responses_body(chat, request)
        events, provider = responses_events(body), "openai"
        usage = (body["usage"]["input_tokens"], body["usage"]["output_tokens"])
        finish, response_model = "tool_call", body["model"]
    elif api == "anthropic":
        request = anthropic_request(messages, tools)
        body = anthropic_body(chat)
        events, provider, model = anthropic_events(body), "anthropic", ANTHROPIC_MODEL
        usage = (body["usage"]["input_tokens"], body["usage"]["output_tokens"])
        finish, response_model = body["stop_reason"], body["model"]
    else:
        raise ValueError(f"api {api!r}: one of {', '.join(APIS)}")
    settings = ({"gen_ai.request.max_tokens": MAX_TOKENS} if api == "anthropic"
                else {"gen_ai.request.temperature": 0.0})
    floor = {"name": f"chat {model}",
             "request": {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
                         "gen_ai.request.model": model, **settings,
                         "server.address": "127.0.0.1", "server.port": 9},
             "response": {"gen_ai.response.model": response_model, "gen_ai.response.id": body["id"],
                          "gen_ai.response.finish_reasons": [finish], "gen_ai.usage.input_tokens": usage[0],
                          "gen_ai.usage.output_tokens": usage[1]}}
    return {"api": api, "model": model, "request": request, "body": body, "events": events, "floor": floor}
