"""`WireReplay`'s matching of overlapping calls: a request is matched among the unserved
recorded calls that overlap the next one, by its body, with work in proportion to the
number of calls whatever order they arrive in."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cafe.wire as wire
from cafe.recording.diff import first_difference
from cafe.recording.errors import ReplayError
from cafe.recording.format import Header, RecordedCall, Recording, Timing
from cafe.recording.normalise import normalise
from cafe.wire._libraries._family import wire_request
from cafe.wire._replay import WireReplay, _end_ns, body_key
from tests.wire.openai_server import OpenAIServer

KEY = "sk-test-replay-0123456789abcdefghij"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer.running() as running:
        yield running


def _gather(base_url: str, orders: list[int]) -> list[str | None]:
    async def all_at_once() -> list[str | None]:
        client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)
        replies = await asyncio.gather(*(client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"order {n}"}]) for n in orders))
        await client.close()
        return [reply.choices[0].message.content for reply in replies]
    return asyncio.run(all_at_once())


def _comparisons(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every comparison of a request with a recorded call, the real one made."""
    made = [0]
    compare = WireReplay._difference

    def counted(self: WireReplay, *arguments: Any) -> Any:
        made[0] += 1
        return compare(self, *arguments)

    monkeypatch.setattr(WireReplay, "_difference", counted)
    return made


def test_overlapping_calls_are_matched_in_any_order_with_work_in_proportion_to_their_number(
        server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work: dict[int, int] = {}
    for calls in (25, 100):
        path = tmp_path / f"gathered-{calls}.jsonl"
        server.hold_answers_until(server.count + calls)  # all of them in flight together
        with wire.record(path):
            live = _gather(server.base_url, list(range(calls)))
        made = _comparisons(monkeypatch)
        with wire.replay(path):
            # They arrive in the reverse of their recorded order: each is the last one in flight.
            replayed = _gather("http://replay.invalid/v1", list(reversed(range(calls))))
        assert replayed == list(reversed(live))
        work[calls] = made[0]
        monkeypatch.undo()
    # Each request is compared with the next call, then with the call of its own body: quadratic
    # matching compares the n-th of them with n calls, 4x the calls making about 16x the work.
    assert work[25] <= 2 * 25 and work[100] <= 2 * 100, work
    assert work[100] / 100 <= 1.1 * work[25] / 25, work


# The lookup by body serves exactly what comparing the request with every unserved call in the
# window, in recorded order, serves: the same call to each request, the same refusal.

def _reference_take(transport: WireReplay, served: list[bool], sent: httpx2.Request) -> int:
    """The position the window semantics serve `request`, or -1 for a refusal."""
    from cafe.wire._replay import _Incoming

    calls = transport._calls
    first = next((position for position, done in enumerate(served) if not done), None)
    if first is None:
        return -1
    window = [first]
    end = _end_ns(calls[first])
    if end is not None:
        for position in range(first + 1, len(calls)):
            timing = calls[position].timing
            if timing is None or timing.start_unix_nano >= end:
                break
            if not served[position]:
                window.append(position)
    request = wire_request(sent, 0)
    incoming = _Incoming(request, transport._scrubber_for(request))
    return next((p for p in window if transport._difference(calls[p], incoming) is None), -1)


_BODIES: list[Any] = [
    {"model": "m", "n": 1}, {"model": "m", "n": 1.0}, {"model": "m", "n": True}, {"model": "m", "n": 2},
    {"model": "m", "messages": [{"role": "user", "content": "a"}]}, {"n": 1, "model": "m"},
    {"model": "m", "run": "x1", "n": 1}, {}, None, "multipart-ish", "other-bytes",
]


def _exchange(body: Any, number: int, method: str) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    raw = None if body is None or isinstance(body, dict) else {"text": body}
    return (body if isinstance(body, dict) else None), {
        "method": method, "target": "/v1/chat/completions", "request_headers": {}, "request_body": raw,
        "status": 200, "response_headers": {"x-call": str(number)}, "body": {"text": "{}"}, "stream": None,
        "outcome": "completed", "failure": None}


def _content(body: Any) -> bytes:
    if body is None:
        return b""
    return body.encode() if isinstance(body, str) else json.dumps(body).encode()


def _random_recording(rng: random.Random) -> tuple[Recording, list[tuple[str, Any]]]:
    calls, sent = [], []
    start = 1_000
    for number in range(1, rng.randint(1, 9) + 1):
        body = rng.choice(_BODIES)
        method = rng.choice(["POST", "POST", "GET"])
        request, exchange = _exchange(body, number, method)
        start += rng.choice([0, 1, 5, 20]) * rng.choice([1, 1, 1, -1])  # at times going back in time
        timing = None if rng.random() < 0.1 else Timing(max(start, 0), rng.choice([0, 3, 10, 40]))
        calls.append(RecordedCall.loaded(number, number + 1, request or {}, {}, timing, None, None, exchange))
        sent.append((method, body))
    return Recording(Path("random.jsonl"), Header(version=2), calls), sent


@pytest.mark.parametrize("seed", range(300))
def test_the_lookup_serves_what_comparing_every_call_in_the_window_serves(seed: int) -> None:
    rng = random.Random(seed)
    recording, sent = _random_recording(rng)
    rng.shuffle(sent)
    if rng.random() < 0.3:
        sent.insert(rng.randrange(len(sent) + 1), ("POST", {"model": "m", "unrecorded": True}))
    ignore = ["run"] if rng.random() < 0.3 else []
    transport = wire.ReplayTransport(recording, ignore=ignore)
    served = [False] * len(recording.calls)
    for method, body in sent:
        request = httpx2.Request(method, "http://replay.invalid/v1/chat/completions", content=_content(body))
        expected = _reference_take(transport, served, request)
        try:
            got = int(transport.handle_request(request).headers["x-call"]) - 1
        except ReplayError:
            got = -1
        assert got == expected, (seed, method, body)
        if got < 0:
            break
        served[got] = True


# The key that the lookup files a body under is shared by every two bodies matching takes for
# the same: whole numbers as floats, keys in any order, ignored fields.

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.0, -0.0, 1.0, 2.5, 1e20]),
                     st.text(max_size=3))
_JSON = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["a", "b", "run", "n"]), inner, max_size=3), max_leaves=12)


def _equivalent(value: Any, shuffle: Callable[[list[Any]], None]) -> Any:
    """`value` as another program may send it: whole numbers as floats or ints, keys reordered."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 2**60 else value
    if isinstance(value, list):
        return [_equivalent(item, shuffle) for item in value]
    items = [(key, _equivalent(item, shuffle)) for key, item in value.items()]
    shuffle(items)
    return dict(items)


@given(st.dictionaries(st.sampled_from(["a", "b", "run", "n"]), _JSON, max_size=4), st.randoms(),
       st.sampled_from([[], ["run"], ["a.*"]]))
def test_bodies_that_match_share_their_key(body: dict[str, Any], rng: random.Random, ignore: list[str]) -> None:
    other = _equivalent(body, rng.shuffle)
    if "run" in ignore:
        other["run"] = "another run"
    mine, theirs = normalise(body, ignore), normalise(other, ignore)
    assert first_difference(mine, theirs) is None
    assert body_key(mine) == body_key(theirs)


@given(st.dictionaries(st.sampled_from(["a", "b", "n"]), _JSON, max_size=3),
       st.dictionaries(st.sampled_from(["a", "b", "n"]), _JSON, max_size=3))
def test_bodies_that_differ_may_share_no_key_matching_would_refuse(one: dict[str, Any], two: dict[str, Any]) -> None:
    if body_key(normalise(one)) != body_key(normalise(two)):
        return
    assert first_difference(normalise(one), normalise(two)) is None
