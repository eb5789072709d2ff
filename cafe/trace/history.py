"""A conversation as the trace holds it: one shared, read-only history that only grows.

Every model call of a shift is sent the whole conversation so far. A generation event
keeps what its call was sent as a `HistoryView`, a length into a `History` whose messages
are frozen once, when a call first sends them: a prefix never changes, so all the calls of
a shift share one copy of each message, and keeping a call's input costs one small object
whatever the length of the shift.

Frozen messages are `FrozenDict`s and `FrozenList`s: a dict and a list (they compare,
serialise and `isinstance` as one) that refuse to change, so that a listener cannot
change what another listener, or the in-memory tree, reads. `copy.deepcopy` of either, or
of a view, is a plain value to change at will.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any, NoReturn, SupportsIndex, overload

_READ_ONLY = ("a message in a shift's history is read-only (it is shared by every listener); "
              "change a copy: copy.deepcopy(it)")


class FrozenDict(dict[str, Any]):
    """A dict that refuses every change after it is made."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(_READ_ONLY)

    def __setitem__(self, key: str, value: Any) -> NoReturn:
        self._refuse()

    def __delitem__(self, key: str) -> NoReturn:
        self._refuse()

    def __ior__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        self._refuse()

    def clear(self) -> NoReturn:
        self._refuse()

    def pop(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    def popitem(self) -> NoReturn:
        self._refuse()

    def setdefault(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    # Copies are plain values (the copy module would otherwise rebuild one key by key).
    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {key: copy.deepcopy(value, memo) for key, value in self.items()}

    def __reduce__(self) -> tuple[Any, ...]:
        return FrozenDict, (dict(self),)


class FrozenList(list[Any]):
    """A list that refuses every change after it is made."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(_READ_ONLY)

    def __setitem__(self, index: Any, value: Any) -> NoReturn:
        self._refuse()

    def __delitem__(self, index: Any) -> NoReturn:
        self._refuse()

    def __iadd__(self, other: Iterable[Any]) -> NoReturn:  # type: ignore[misc]
        self._refuse()

    def __imul__(self, count: SupportsIndex) -> NoReturn:
        self._refuse()

    def append(self, item: Any) -> NoReturn:
        self._refuse()

    def extend(self, items: Iterable[Any]) -> NoReturn:
        self._refuse()

    def insert(self, index: SupportsIndex, item: Any) -> NoReturn:
        self._refuse()

    def pop(self, index: SupportsIndex = -1) -> NoReturn:
        self._refuse()

    def remove(self, item: Any) -> NoReturn:
        self._refuse()

    def clear(self) -> NoReturn:
        self._refuse()

    def sort(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    def reverse(self) -> NoReturn:
        self._refuse()

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(item, memo) for item in self]

    def __reduce__(self) -> tuple[Any, ...]:
        return FrozenList, (list(self),)


def frozen(value: Any) -> Any:
    """A read-only deep copy of JSON-shaped data (dicts, lists, scalars; a tuple stays a
    tuple); anything else is deep-copied as it is."""
    if type(value) is FrozenDict or type(value) is FrozenList:
        return value  # frozen all the way down already: shared, not copied
    if isinstance(value, dict):
        return FrozenDict({key: frozen(item) for key, item in value.items()})
    if isinstance(value, list):
        return FrozenList([frozen(item) for item in value])
    if isinstance(value, tuple):
        return tuple(frozen(item) for item in value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return copy.deepcopy(value)


class History:
    """Frozen messages, appended and never changed; read through `HistoryView`s."""

    __slots__ = ("_messages",)

    def __init__(self, messages: Iterable[Any] = ()) -> None:
        self._messages: list[Any] = [frozen(message) for message in messages]

    def __len__(self) -> int:
        return len(self._messages)

    def extend(self, messages: Iterable[Any]) -> None:
        """Appends all of `messages`, or, when one cannot be frozen, none."""
        self._messages.extend([frozen(message) for message in messages])

    def view(self) -> HistoryView:
        """The history as it is now; later appends do not show in it."""
        return HistoryView(self._messages, len(self._messages))


class HistoryView(Sequence[Mapping[str, Any]]):
    """The first `length` messages of a history: a read-only sequence of frozen messages
    that compares equal to any sequence of equal messages (a plain list among them). Its
    repr gives the count only: the messages are customer text."""

    __slots__ = ("_length", "_messages")

    def __init__(self, messages: list[Any], length: int) -> None:
        self._messages = messages  # shared with the history: only ever appended to
        self._length = length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Mapping[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
        if isinstance(index, slice):
            return FrozenList(self._messages[: self._length][index])
        position = index.__index__()
        if position < 0:
            position += self._length
        if not 0 <= position < self._length:
            raise IndexError("history index out of range")
        found: Mapping[str, Any] = self._messages[position]
        return found

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        return islice(self._messages, self._length)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, HistoryView) and other._messages is self._messages:
            return other._length == self._length
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(other) == self._length and all(a == b for a, b in zip(self, other, strict=False))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"HistoryView(<{self._length} message(s)>)"

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(message, memo) for message in self]


class Growth:
    """Which messages of a conversation are new since the last look, for work done once
    per message (the tracer's freezing) on a list that grows at its end between calls.

    Trusted: the messages already seen, as they were. Checked, in constant time: that it is
    the same list object, not shorter, and that the last message seen is still in its place.
    Any other list, or one that failed those checks, is new from its first message. The
    list is held (not copied) until the next look."""

    __slots__ = ("_last", "_seen", "_source")

    def __init__(self) -> None:
        self._source: Sequence[Any] | None = None
        self._seen = 0
        self._last: Any = None

    def new_from(self, messages: Sequence[Any]) -> int:
        """The index of the first message of `messages` not seen before (0: all of them)."""
        seen = self._seen
        if messages is not self._source or len(messages) < seen or (seen and messages[seen - 1] is not self._last):
            return 0
        return seen

    def saw(self, messages: Sequence[Any]) -> None:
        """All of `messages` has been seen."""
        self._source = messages
        self._seen = len(messages)
        self._last = messages[-1] if messages else None

    def forget(self) -> None:
        self._source, self._seen, self._last = None, 0, None
