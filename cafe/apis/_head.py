"""A request's parameters without its conversation: the top-level keys an API's `request`
reads, decoded from the body's bytes with everything else passed over.

A request resends the whole conversation on every call, so decoding all of it to read a
dozen parameters costs in proportion to the conversation. `msgspec` decodes only the keys
asked for into Python values and skips the rest of the document in C, checking only that it
is JSON: the cost a call pays for its parameters grows little with the body. It is imported
when first used: the wire's startup hook, which imports `cafe.apis`, runs without it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import msgspec

_Fields = tuple[tuple[str, str], ...]
# A decoder for each set of keys, made the first time the set is asked for, with the keys in
# the order of its fields.
_DECODERS: dict[frozenset[str], tuple[msgspec.json.Decoder[Any], _Fields]] = {}


def _decoder(keys: frozenset[str]) -> tuple[msgspec.json.Decoder[Any], _Fields]:
    found = _DECODERS.get(keys)
    if found is None:
        import msgspec

        # A field by its position: a JSON key need not be a Python identifier.
        fields = tuple((f"f{number}", key) for number, key in enumerate(sorted(keys)))
        head = msgspec.defstruct("RequestHead", [(field, Any, msgspec.UNSET) for field, _ in fields],
                                 rename=dict(fields))
        found = _DECODERS[keys] = (msgspec.json.Decoder(head), fields)
    return found


def request_head(body: bytes, keys: Iterable[str]) -> dict[str, Any] | None:
    """The top-level `keys` that the JSON object `body` holds, with their values; None when
    `body` is not one JSON object (as a full decode would say)."""
    if not body:
        return None
    decoder, fields = _decoder(keys if isinstance(keys, frozenset) else frozenset(keys))
    import msgspec

    try:
        decoded = decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    unset = msgspec.UNSET
    return {key: value for field, key in fields if (value := getattr(decoded, field)) is not unset}
