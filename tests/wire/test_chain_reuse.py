"""A client's chain is built once and reused, and never outlives a change of the layers: a
layer installed or removed between two requests of the same client is heard, or not, from
the next request on."""

from __future__ import annotations

import gc
import weakref
from types import ModuleType
from typing import Any

import cafe.wire as wire
from tests.wire.test_observed import Probe

URL = "http://127.0.0.1:9/v1/chat/completions"  # never dialled: the mock transport answers


def _answer(http: ModuleType) -> Any:
    return http.MockTransport(lambda request: http.Response(200, json={"ok": True}))


def test_layers_changed_between_two_requests_of_one_client_apply_to_the_next(http: ModuleType) -> None:
    first, second = Probe(), Probe()
    client = http.Client(transport=_answer(http))
    with wire.intercept([first]):
        client.post(URL, json={})
        with wire.intercept([second]):
            client.post(URL, json={})
        client.post(URL, json={})
    client.post(URL, json={})
    assert (len(first.calls), len(second.calls)) == (3, 1)


def test_a_chain_does_not_keep_its_client_alive(http: ModuleType) -> None:
    probe = Probe()
    with wire.intercept([probe]):
        client = http.Client(transport=_answer(http))
        client.post(URL, json={})
        gone = weakref.ref(client)
        client.close()
        del client
        gc.collect()
        assert gone() is None
    assert len(probe.calls) == 1
