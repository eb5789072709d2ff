"""The client seam every model client shares, and helpers for chat-completions bodies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from cafe.errors import ConversationError, UnknownToolCallId

Message = dict[str, Any]
Response = dict[str, Any]


@runtime_checkable
class ChatClient(Protocol):
    """What the shift loop needs of a model: one call, an OpenAI chat-completions body back.

    `model`, `provider` and `calls` are read-only here: a wrapper (tracing, recording) shows
    its inner client's through properties, and nothing outside a client sets them."""

    @property
    def model(self) -> str: ...

    @property
    def provider(self) -> str: ...

    @property
    def calls(self) -> int: ...

    def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        temperature: float = 0.0,
        tool_choice: Any = None,
    ) -> Response: ...


@runtime_checkable
class HoldsSecrets(Protocol):
    """A client that holds values (an API key) a recorder must scrub from what it writes."""

    def secrets(self) -> list[str]: ...


@runtime_checkable
class NetworkClient(Protocol):
    """A client that calls a server over the network: where, for the generation span."""

    @property
    def server_address(self) -> str | None: ...

    @property
    def server_port(self) -> int | None: ...


def secrets_of(client: object) -> list[str]:
    """The secrets a client holds; none for one that holds none (offline clients)."""
    return list(client.secrets()) if isinstance(client, HoldsSecrets) else []


def endpoint_of(client: object) -> tuple[str | None, int | None]:
    """(server address, server port) of a network client; (None, None) for any other."""
    if isinstance(client, NetworkClient):
        return client.server_address, client.server_port
    return None, None


def _kind(value: object) -> str:
    return type(value).__name__


def check_tool_call_ids(messages: Sequence[Message]) -> None:
    """Refuse a conversation that is not a list of message objects, and a tool result whose
    tool_call_id no earlier assistant call opened."""
    _check_messages(messages, 0, set())


class ToolCallIdCheck:
    """`check_tool_call_ids` for a client called again and again with a conversation that
    grows: each message is checked once, when it is first sent, so a call's check costs
    the same at any length of conversation.

    A message already checked is trusted as it was (a conversation grows at its end: the
    shift loop only appends). The list is checked whole when it is another list than the
    last call's, is shorter, or has another message where the last one checked was. What
    is remembered is one value, replaced whole, so threads sending different lists through
    one client each get a whole check rather than another's ids."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        # The list last checked (held, not copied), its length, its last message, and the
        # call ids its messages opened.
        self._last: tuple[Sequence[Message] | None, int, object, set[str]] = (None, 0, None, set())

    def __call__(self, messages: Sequence[Message]) -> int:
        """Check what is new in `messages`; returns the index of its first message not
        checked before (0 when the whole list was checked), so that a caller keeping
        notes on the conversation reads each message once too."""
        source, seen, last, opened = self._last
        if (seen and messages is source and len(messages) >= seen
                and messages[seen - 1] is last):
            # A refusal raises before anything is kept: the next call checks from here again.
            opened.update(_check_messages(messages, seen, opened))
            start = seen
        else:
            opened = _check_messages(messages, 0, set())
            start = 0
        self._last = (messages, len(messages), messages[-1] if messages else None, opened)
        return start

    @property
    def opened_any(self) -> bool:
        """Whether an assistant message of the conversation last checked opened a tool call."""
        return bool(self._last[3])


def _check_messages(messages: Sequence[Message], start: int, opened: set[str]) -> set[str]:
    """Check `messages[start:]`, the messages before it having opened the call ids
    `opened` (left as it is); returns the ids the checked messages open."""
    if not isinstance(messages, list | tuple):
        raise ConversationError(f"messages: expected a list of message objects, found a {_kind(messages)}")
    # On every model call's path (a replay's too): one lookup of the role, plain loops.
    new: set[str] = set()
    for index in range(start, len(messages)):
        message = messages[index]
        if not isinstance(message, dict):
            raise ConversationError(f"messages[{index}]: expected a message object, found a {_kind(message)}")
        role = message.get("role")
        if role == "tool":
            answered = message.get("tool_call_id")
            # A list (unhashable) is refused too.
            if not isinstance(answered, str) or (answered not in opened and answered not in new):
                raise UnknownToolCallId(index, str(answered))
        elif role == "assistant":
            calls = message.get("tool_calls") or ()
            if not isinstance(calls, list | tuple):
                raise ConversationError(f"messages[{index}].tool_calls: expected a list, found a {_kind(calls)}")
            for position, call in enumerate(calls):
                call_id = call.get("id", "") if isinstance(call, dict) else None
                if not isinstance(call_id, str):
                    raise ConversationError(f"messages[{index}].tool_calls[{position}]: expected an object "
                                            "with a string id")
                new.add(call_id)
    return new


def build_request(
    messages: list[Message], tools: list[dict[str, Any]] | None, temperature: float, tool_choice: Any
) -> dict[str, Any]:
    """The request as recorded and matched: exactly the arguments of `chat`."""
    return {
        "messages": messages,
        "tools": tools,
        "temperature": temperature,
        "tool_choice": tool_choice,
    }


def make_response(
    message: Message,
    *,
    model: str,
    response_id: str,
    usage: tuple[int, int],
    finish_reason: str | None = None,
) -> Response:
    prompt_tokens, completion_tokens = usage
    if finish_reason is None:
        finish_reason = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": response_id,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def first_message(response: Response) -> Message:
    message: Message = response["choices"][0]["message"]
    return message


def tool_calls_of(message: Message) -> list[dict[str, Any]]:
    return list(message.get("tool_calls") or [])


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
