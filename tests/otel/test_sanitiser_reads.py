"""The sanitiser reads a span's attributes once, as a plain dict, whatever mapping holds
them: the SDK's (through its proxy's copy), a plain dict, or a third party's own mapping
(with no copy, or one that gives back something else). Each gives the same verdict."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan

from cafe_otel import TelemetryAccount
from cafe_otel._privacy.processor import SpanSanitiser

from .metadata_examples import LEGIT, MARK


class OwnMapping(Mapping[str, Any]):
    """A read-only mapping with no `copy`, as a hand-made span might carry."""

    def __init__(self, items: dict[str, Any]) -> None:
        self._items = items

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


class OddCopy(OwnMapping):
    """Its `copy` gives back a mapping of its own kind, not a dict."""

    def copy(self) -> OddCopy:
        return OddCopy(self._items)


class RaisingCopy(OwnMapping):
    def copy(self) -> dict[str, Any]:
        raise RuntimeError("no copies here")


MIXED = {
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.prompt": f"a customer's {MARK} sentence",  # off the allowlist
    "gen_ai.response.finish_reasons": ["stop"],  # a list: unhashable, but shaped like metadata
    "llm.input": [MARK, "more"],  # unhashable and off the allowlist
    "gen_ai.usage.input_tokens": 12,
}
KEPT = {"gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.usage.input_tokens": 12}


def _span(attributes: Mapping[str, Any]) -> ReadableSpan:
    return ReadableSpan("chat gpt-4o-mini", attributes=attributes, resource=Resource({}))


@pytest.mark.parametrize("holder", [dict, OwnMapping, OddCopy, RaisingCopy])
def test_every_kind_of_attribute_mapping_gets_the_same_verdict(holder):
    sanitiser = SpanSanitiser(account=TelemetryAccount())
    for _ in range(2):  # the second time, values that fit are remembered
        clean = sanitiser(_span(holder(dict(MIXED))))
        assert dict(clean.attributes) == KEPT
    assert sanitiser(_span(holder(dict(KEPT)))).attributes == KEPT


@pytest.mark.parametrize("holder", [dict, OwnMapping, OddCopy, RaisingCopy])
def test_a_clean_span_in_any_mapping_is_handed_on_as_is(holder):
    span = _span(holder({key: LEGIT[key] for key in ("gen_ai.request.model", "gen_ai.usage.input_tokens",
                                                      "gen_ai.response.finish_reasons")}))
    assert SpanSanitiser()(span) is span


def test_a_secret_in_a_value_remembered_as_fitting_is_still_caught_on_a_later_span():
    account = TelemetryAccount()
    sanitiser = SpanSanitiser(account=account, secrets=["sk-live-0123456789"])
    fine = {"gen_ai.response.model": "gpt-4o-mini", "gen_ai.usage.output_tokens": 3}
    for _ in range(2):
        span = _span(dict(fine))
        assert sanitiser(span) is span
    leaky = {**fine, "gen_ai.request.model": "model-sk-live-0123456789"}
    assert dict(sanitiser(_span(leaky)).attributes) == fine
    assert account.withheld == {"gen_ai.request.model": 1}
