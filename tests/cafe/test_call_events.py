"""The events a model call makes stay immutable values shared by every listener, and their
reprs carry no content (messages, a response, an exception's message)."""

from __future__ import annotations

import pytest

from cafe.trace import GenerationEnded, GenerationStarted
from cafe.trace.events import GenerationRequest, GenerationResult

CANARY = "CANARY my card number is 4111"
RESPONSE = {"id": "r1", "model": "m", "choices": [{"message": {"content": CANARY}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}


def _events():
    request = GenerationRequest("m", "openai", [{"role": "user", "content": CANARY}], 0.0)
    result = GenerationResult.of(RESPONSE)
    started = GenerationStarted(1, None, 0.5, "chat m", request, {"note": 1})
    ended = GenerationEnded(1, None, 1.5, request, result, error=ValueError(CANARY), started_at=0.5)
    return request, result, started, ended


@pytest.mark.parametrize("index,field", [(0, "model"), (1, "output"), (2, "name"), (3, "result")])
def test_a_call_event_cannot_be_changed_by_a_listener(index, field):
    event = _events()[index]
    with pytest.raises(AttributeError):
        setattr(event, field, "changed")


def test_call_events_read_as_before():
    request, result, started, ended = _events()
    assert (result.input_tokens, result.output_tokens, result.finish_reasons) == (3, 4, ("stop",))
    assert result.output == CANARY
    assert ended.error_type == "ValueError" and ended.response is RESPONSE and ended.started_at == 0.5
    assert started.request is request and started.attrs == {"note": 1}
    assert GenerationEnded(2, 1, 1.0, request).result is None


def test_the_reprs_of_a_result_and_an_ended_call_hold_no_content():
    _, result, _, ended = _events()
    assert CANARY not in repr(result)
    assert CANARY not in repr(ended)
    assert "ValueError" in repr(ended) and "total_tokens=7" in repr(result)
