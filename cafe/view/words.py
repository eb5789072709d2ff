"""The words a page uses for a recording: any agent's by default (a run, its calls, the
user's conversation), an example's own where it registers them (the café's shift, its
customer, its tickets) through the `cafe.page_words` entry-point group."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from cafe.recording.format import Recording

Badge = tuple[str, str]
"""(a class of the badge's own, the text): `("ticket", "ticket 3")`."""


def _no_badges(name: str, result: Mapping[str, Any]) -> Sequence[Badge]:
    return ()


@dataclass(frozen=True)
class PageWords:
    """`run`: what one recording is; `owner`: whose conversation it holds; `tool_badges`:
    the badges a tool's row shows beside its status, from its name and its result's JSON
    object; `tally`: a line the page ends with (`tickets fired`) and the result field whose
    integers it lists (`ticket_number`), or None."""

    run: str = "run"
    owner: str = "user"
    tool_badges: Callable[[str, Mapping[str, Any]], Sequence[Badge]] = field(default=_no_badges)
    tally: tuple[str, str] | None = None


ANY_AGENT = PageWords()
GROUP = "cafe.page_words"


def words_for(recording: Recording) -> PageWords:
    """The words of the first registered example that claims `recording` (a callable
    `recording -> PageWords | None`), else any agent's. One whose module is not installed is
    left out."""
    for entry in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            claim = entry.load()
        except ModuleNotFoundError:
            continue
        words = claim(recording)
        if isinstance(words, PageWords):
            return words
    return ANY_AGENT
