"""What a model call of a shift costs does not grow with the shift.

Costs are counted (messages read), never timed."""

from __future__ import annotations

from typing import Any

import pytest

from cafe import ScriptedClient
from cafe.clients.base import ToolCallIdCheck
from cafe.errors import ConversationError, UnknownToolCallId

from .helpers import call


class _CountingMessage(dict[str, Any]):
    """A message that counts how often it is read."""

    reads = 0

    def get(self, key: str, default: Any = None) -> Any:
        _CountingMessage.reads += 1
        return super().get(key, default)


def test_a_client_checks_each_message_once_not_once_a_call():
    client = ScriptedClient()
    messages: list[dict[str, Any]] = [_CountingMessage(role="system", content="s")]
    _CountingMessage.reads = 0
    for line in range(100):
        messages.append(_CountingMessage(role="user", content=f"Line {line}: what do you have?"))
        reply = client.chat(messages)["choices"][0]["message"]
        messages.append(_CountingMessage(reply))
    # Read when checked (once each) and the last one again for the reply: bounded by a
    # constant per message, where checking the whole list per call reads ~n²/2 = 10,000.
    assert _CountingMessage.reads <= 4 * len(messages), _CountingMessage.reads


def test_a_growing_conversation_is_still_refused_where_it_goes_wrong():
    check = ToolCallIdCheck()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"},
                                      {"role": "assistant", "tool_calls": [call("c1", "price_check", {})]}]
    check(messages)
    messages.append({"role": "tool", "tool_call_id": "c1", "content": "{}"})
    check(messages)
    messages.append({"role": "tool", "tool_call_id": "c9", "content": "{}"})
    with pytest.raises(UnknownToolCallId) as refused:
        check(messages)
    assert refused.value.index == 3  # the place in the whole conversation
    messages[3] = {"role": "tool", "tool_call_id": "c1", "content": "{}"}  # fixed after the refusal
    check(messages)
    messages.append("not a message")  # type: ignore[arg-type]
    with pytest.raises(ConversationError, match=r"messages\[4\]"):
        check(messages)


@pytest.mark.parametrize("change", ["shorter", "last replaced", "another list"])
def test_a_conversation_changed_other_than_at_its_end_is_checked_whole(change):
    check = ToolCallIdCheck()
    messages: list[dict[str, Any]] = [{"role": "assistant", "tool_calls": [call("c1", "price_check", {})]},
                                      {"role": "tool", "tool_call_id": "c1", "content": "{}"},
                                      {"role": "user", "content": "thanks"}]
    check(messages)
    unopened = {"role": "user", "content": "no call opened"}
    if change == "shorter":
        del messages[0], messages[-1]  # the tool result is left with nothing to answer
    elif change == "last replaced":
        messages[0] = unopened  # the call is gone, and the last message is another object
        messages[2] = {"role": "user", "content": "thanks"}
    else:
        messages = [unopened, *messages[1:]]
    with pytest.raises(UnknownToolCallId):
        check(messages)
