"""The keywords of the secret patterns, read off the patterns themselves, and the search for
them that `cafe.privacy.Scrubber` runs on every line before it walks it.

Every text a pattern matches holds one of the pattern's "pieces": short texts read off the
pattern's parse tree (its literal runs, with the few characters that may follow them),
lower-cased where the pattern ignores case. A serialised line that holds none of its pieces
cannot hold anything the pattern matches. A pattern whose pieces cannot be read (a
back-reference, a run of `.` only) has none, and makes every line walk.

Reading the pieces of the default patterns and building their search takes about a second, so
it is done once, and its result kept in `cafe/_scan_table.py`; `Scrubber` only compiles
that table. `python -m cafe._scan_generate` writes the table again, and
`tests/recording/test_privacy.py` fails while the committed one is not what the patterns
give. A configured pattern (`CAFE_SCRUB_PATTERNS`) is read here when a scrubber is made with it.
"""

from __future__ import annotations

import json
import re
import re._constants as _sre  # type: ignore[import-not-found]
import re._parser as _sre_parse  # type: ignore[import-not-found]
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

_PIECE_LIMIT = 64  # texts a piece's set may hold before it is cut short
# Texts a piece's set may hold once each is followed by the character after it: `token` alone
# is in every response (`prompt_tokens`), `token=`, `token:`, `token"` are not.
_FOLLOWED_LIMIT = 1024
_NON_ASCII = "\ue000"  # stands for any character past ASCII (searched as its UTF-8 bytes' first)
_KEY_END = "\ue001"  # stands for the quote that ends an object key in the line
_SPACE = frozenset(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f" + _NON_ASCII)  # what `\s` matches, for pieces
_ZERO_WIDTH = frozenset({""})
# Letters by how often they occur in a recorded line, English text and JSON schemas (the
# rarest first): a piece's weight, and where a search stops.
_LETTERS_BY_RARITY = "zqxjkvbwygfmpucldrhsnioate"
_LETTER_FREQUENCY = dict(zip(_LETTERS_BY_RARITY, (0.07, 0.1, 0.15, 0.15, 0.8, 1.0, 1.5, 2.0, 2.0, 2.0, 2.2, 2.4, 3.0,
                                                  3.2, 3.5, 4.0, 4.3, 6.0, 6.1, 6.3, 6.7, 7.0, 7.5, 8.2, 9.1, 12.7),
                             strict=True))


@dataclass(frozen=True)
class _Piece:
    exact: frozenset[str] | None  # every text it matches, when they are few
    held: frozenset[str] | None  # texts one of which each match holds, when known
    starts: frozenset[str] | None  # characters a match may start with ("" when it may be empty)


_UNKNOWN = _Piece(None, None, None)


def _weight(text: str) -> float:
    weight = 1.0
    for character in text:
        index = _LETTERS_BY_RARITY.find(character)
        weight *= 0.03 + 0.005 * index if index >= 0 else (0.1 if character in '":,_. ' else 0.02)
    return weight


def _best(candidates: Iterable[frozenset[str] | None]) -> frozenset[str] | None:
    usable = [c for c in candidates if c and "" not in c]
    return min(usable, key=lambda c: (sum(map(_weight, c)), len(c)), default=None)


def _product(left: frozenset[str], right: frozenset[str], limit: int = _PIECE_LIMIT) -> frozenset[str] | None:
    if len(left) * len(right) > limit:
        return None
    return frozenset(a + b for a in left for b in right)


def _characters(items: list[tuple[Any, Any]], folded: bool) -> frozenset[str] | None:
    found: set[str] = set()
    for op, value in items:
        if op is _sre.LITERAL:
            found.add(chr(value))
        elif op is _sre.RANGE and value[1] - value[0] < _PIECE_LIMIT * 2:
            found.update(map(chr, range(value[0], value[1] + 1)))
        elif op is _sre.CATEGORY and value is _sre.CATEGORY_SPACE:
            found.update(_SPACE)
        else:
            return None  # a negated set, a category of Unicode letters or digits
    if any(not character.isascii() and character != _NON_ASCII for character in found):
        if folded:
            return None  # a non-ASCII letter has case forms lower-cased bytes do not fold
        found = {c if c.isascii() else _NON_ASCII for c in found}
    return frozenset(c.lower() for c in found) if folded else frozenset(found)


def _sequence(items: list[tuple[Any, Any]], folded: bool, follow: frozenset[str] | None) -> _Piece:
    # Each piece is read once alone, to know what may follow each, and again knowing what
    # follows it where that can lengthen its texts (a group's, a branch's).
    alone = [_node(op, value, folded, None) for op, value in items]
    pieces = [_node(op, value, folded, _starts(alone[index + 1:], follow))
              if op in (_sre.SUBPATTERN, _sre.BRANCH, _sre.ATOMIC_GROUP) else alone[index]
              for index, (op, value) in enumerate(items)]
    run: frozenset[str] = _ZERO_WIDTH
    exact: frozenset[str] | None = _ZERO_WIDTH
    candidates: list[frozenset[str] | None] = []
    absorbed = False  # a look-behind's text joined the run: the run is more than the match
    for index, piece in enumerate(pieces):
        op, value = items[index]
        if op is _sre.ASSERT and value[0] < 0 and run == _ZERO_WIDTH:
            # A look-behind's text is in the line, just before what follows it.
            behind = _behind(list(value[1]), folded)
            if behind:
                run = behind
                absorbed = True
            continue
        joined = None if piece.exact is None else _product(run, piece.exact)
        if joined is not None:
            run = joined
            continue
        exact = None
        starts = _starts([*pieces[index:]], follow)
        candidates.append(_product(run, starts, _FOLLOWED_LIMIT) if starts and "" not in starts else None)
        candidates.append(run)
        candidates.append(piece.held)
        run = piece.exact if piece.exact is not None else _ZERO_WIDTH
    if follow and "" not in follow:
        candidates.append(_product(run, follow, _FOLLOWED_LIMIT))
    candidates.append(run)
    exact = run if exact is not None and not absorbed else None
    return _Piece(exact, _best(candidates), _starts(pieces, follow))


def _behind(items: list[tuple[Any, Any]], folded: bool) -> frozenset[str] | None:
    """The texts a look-behind's last items match: the longest such end that is few enough."""
    for start in range(len(items)):
        exact = _sequence(items[start:], folded, None).exact
        if exact is not None and exact != _ZERO_WIDTH:
            return exact
    return None


def _starts(pieces: list[_Piece], follow: frozenset[str] | None) -> frozenset[str] | None:
    found: set[str] = set()
    for piece in pieces:
        if piece.starts is None:
            return None
        found.update(piece.starts - _ZERO_WIDTH)
        if "" not in piece.starts:
            return frozenset(found)
    if follow is None:
        return None
    return frozenset(found | follow)


def _union(sets: list[frozenset[str] | None]) -> frozenset[str] | None:
    """Every set's texts, or None when one of them is not known."""
    found: set[str] = set()
    for texts in sets:
        if texts is None:
            return None
        found.update(texts)
    return frozenset(found)


def _node(op: Any, value: Any, folded: bool, follow: frozenset[str] | None) -> _Piece:
    if op is _sre.LITERAL:
        character = chr(value)
        if not character.isascii():
            if folded:
                return _UNKNOWN
            character = _NON_ASCII
        text = frozenset({character.lower() if folded else character})
        return _Piece(text, text, text)
    if op is _sre.IN:
        characters = _characters(list(value), folded)
        return _UNKNOWN if characters is None else _Piece(characters, characters, characters)
    if op in (_sre.AT, _sre.ASSERT, _sre.ASSERT_NOT):
        return _Piece(_ZERO_WIDTH, None, _ZERO_WIDTH)
    if op is _sre.SUBPATTERN:
        _, added, removed, inner = value
        folded = (folded or bool(added & re.IGNORECASE)) and not removed & re.IGNORECASE
        return _sequence(list(inner), folded, follow)
    if op is _sre.ATOMIC_GROUP:
        return _sequence(list(value), folded, follow)
    if op is _sre.BRANCH:
        branches = [_sequence(list(branch), folded, follow) for branch in value[1]]
        exact = _union([branch.exact for branch in branches])
        exact = exact if exact is not None and len(exact) <= _PIECE_LIMIT else None
        held = _union([branch.held or None for branch in branches])
        return _Piece(exact, held, _union([branch.starts for branch in branches]))
    if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT):
        least, most, inner = value
        piece = _sequence(list(inner), folded, None)
        exact = None
        if piece.exact is not None and most <= 4:
            exact = frozenset({""}) if least == 0 else None
            power: frozenset[str] | None = _ZERO_WIDTH
            for count in range(1, most + 1):
                power = None if power is None else _product(power, piece.exact)
                if power is None:
                    exact = None
                    break
                if count >= least:
                    exact = power if exact is None else exact | power
        starts = None if piece.starts is None else (piece.starts | _ZERO_WIDTH if least == 0 else piece.starts)
        return _Piece(exact, piece.held if least else None, starts)
    return _UNKNOWN  # any character, a back-reference, a conditional group


def _pieces(pattern: str) -> frozenset[str] | None:
    """Texts one of which every match of `pattern` holds (lower-cased where it ignores case),
    or None when they cannot be read off it."""
    parsed = _sre_parse.parse(pattern)
    return _sequence(list(parsed), bool(parsed.state.flags & re.IGNORECASE), None).held


def _line_forms(piece: str) -> set[str]:
    """A piece as a line may spell it: as it is (in a text), JSON-escaped (in a serialised
    line; a form that JSON escapes as `\\u...` needs none, since such a line is walked), and
    with `/` escaped as some JSON writers do."""
    forms = {piece.replace(_KEY_END, '"')}
    escaped = json.dumps(piece, ensure_ascii=False)[1:-1].replace(_KEY_END, '"')
    if "\\u" not in escaped:
        forms.add(escaped)
        forms.add(escaped.replace("/", "\\/"))
    return forms



def _frequency(character: int, cased: bool) -> float:
    """About how many times in a hundred characters of a recorded line `character` occurs."""
    letter = chr(character).lower()
    if letter in _LETTER_FREQUENCY and character < 128:
        return _LETTER_FREQUENCY[letter] / (10 if cased and chr(character).isupper() else 1)
    if character < 32:
        return 0.01
    if chr(character) in "/|~^`@#$%&*+<>=;!?()'":
        return 0.1
    if chr(character) in "-\\_.":
        return 1.0
    return 5.0  # digits, spaces, JSON's structure, UTF-8's bytes


def _before_last(text: bytes) -> bytes:
    """Where a text's stop may be: before its last character, so that a literal follows the
    stop and `re` rejects most places at once (a look-behind at the stop is tried at each)."""
    return text[:max(len(text) - 1, 1)]


# How much rarer than the others a text's last character must be to be its stop: a look-behind
# of the whole text is then tried at each place the line holds it.
_LAST_RARER = 10


def _stops(texts: list[bytes], cased: bool) -> dict[int, list[tuple[bytes, int]]]:
    """Each text, with where its stop is, under its stop: a character it holds before its
    last (or its last, when that is far rarer: `.eyJ`'s `J` in a line as it is, where `.`
    and `y` are common). Each text not yet holding a stop adds its rarest, the texts whose rarest is the
    commonest first (a rarer stop of a later text is then often not needed); a text is then
    looked for at the first of its characters that is a stop, so that as much of it as
    possible follows the stop as literals."""
    options = [_before_last(text) for text in texts]
    cheapest = [min(option, key=lambda c: (_frequency(c, cased), c)) for option in options]
    for index, text in enumerate(texts):
        if len(text) > 1 and _frequency(text[-1], cased) * _LAST_RARER < _frequency(cheapest[index], cased):
            options[index], cheapest[index] = text, text[-1]
    stops: set[int] = set()
    for index in sorted(range(len(texts)), key=lambda i: (-_frequency(cheapest[i], cased), texts[i])):
        if not stops.intersection(options[index]):
            stops.add(cheapest[index])
    grouped: dict[int, list[tuple[bytes, int]]] = {}
    for text, option in zip(texts, options, strict=True):
        at = next(index for index, character in enumerate(option) if character in stops)
        grouped.setdefault(text[at], []).append((text, at))
    return grouped


def _class(characters: Iterable[int]) -> bytes:
    ordered = sorted(set(characters))
    if len(ordered) == 1:
        return re.escape(bytes(ordered))
    parts = []
    start = 0
    while start < len(ordered):
        end = start
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
            end += 1
        low, high = ordered[start], ordered[end]
        parts.append(b"\\x%02x" % low if low == high else b"\\x%02x-\\x%02x" % (low, high))
        start = end + 1
    return b"[" + b"".join(parts) + b"]"


def _stop_expression(stop: int, texts: list[tuple[bytes, int]]) -> bytes:
    """One expression that matches at `stop` where the line holds one of `texts` around it:
    the stop, a trie of what follows it (every alternative starts with a literal, which `re`
    rejects at once, or a class of the texts' last characters), and what precedes the stop as a
    look-behind, tried last."""
    # node: character -> node, None -> {text before the stop: last characters (None: no more)}
    root: dict[int | None, Any] = {}
    for text, at in texts:
        before, after = text[:at], text[at + 1:]
        node = root
        for character in after[:-1]:
            node = node.setdefault(character, {})
        ends = node.setdefault(None, {}).setdefault(before, set())
        ends.add(after[-1] if after else None)
    return re.escape(bytes([stop])) + _alternatives(root, bytes([stop]))


def _alternatives(node: dict[int | None, Any], path: bytes) -> bytes:
    ends: dict[bytes, set[int | None]] = node.get(None, {})
    if None in ends.get(b"", ()):
        return b""  # the stop and the path are a whole text: found
    literal = [re.escape(bytes([character])) + _alternatives(child, path + bytes([character]))
               for character, child in sorted((c, n) for c, n in node.items() if c is not None)]
    classed = []
    behind: dict[frozenset[int | None], list[bytes]] = {}
    for before, lasts in sorted(ends.items()):
        if before:
            behind.setdefault(frozenset(lasts), []).append(before)
        else:
            classed.append(_class(c for c in lasts if c is not None))
    for followers, befores in sorted(behind.items(), key=lambda item: sorted(map(str, item[0]))):
        if None in followers:  # the text ends at the stop: only the look-behind is left to try
            looks = [b"(?<=" + re.escape(before + path) + b")" for before in befores]
            classed += looks
            continue
        # Its last character first, so that `re` rejects most places before any look-behind.
        looks = [b"(?<=" + re.escape(before + path) + b"[\\x00-\\xff])" for before in befores]
        classed.append(_class(c for c in followers if c is not None)
                       + (looks[0] if len(looks) == 1 else b"(?:" + b"|".join(looks) + b")"))
    found = literal + classed
    return found[0] if len(found) == 1 else b"(?:" + b"|".join(found) + b")"


def _search(texts: set[bytes], cased: bool) -> tuple[tuple[bytes, bytes], ...]:
    """(stop, expression) pairs: a line holds one of `texts` if and only if, for one pair,
    `expression` is found from the stop's first place in the line on."""
    grouped = _stops(_minimal(texts), cased)
    return tuple((bytes([stop]), _stop_expression(stop, group))
                 for stop, group in sorted(grouped.items(), key=lambda item: (_frequency(item[0], cased), item[0])))


def _minimal(texts: set[bytes]) -> list[bytes]:
    """The texts without any that holds another (a line holding it holds that one)."""
    kept = []
    for text in sorted(texts, key=lambda t: (len(t), t)):
        if not any(text[start:end] in texts for start in range(len(text))
                   for end in range(start + 1, len(text) + (start > 0))):
            kept.append(text)
    return kept


@dataclass(frozen=True)
class Searches:
    """The two searches a line's pieces take: the pieces of patterns that ignore case (and
    lower-case ones) in the line lower-cased, those with capitals in the line as it is.
    None: a pattern has no pieces, and every line is walked."""

    folded: tuple[tuple[bytes, bytes], ...]
    cased: tuple[tuple[bytes, bytes], ...]


def keywords(patterns: Iterable[str], *, key_pattern: str | None = None) -> tuple[set[bytes], set[bytes]] | None:
    """The texts (UTF-8) one of which a line holds wherever it holds a match of one of
    `patterns` (and of `key_pattern`, the secret-named keys' pattern, when given), as
    (lower-case ones, which a line lower-cased holds, ones with capitals), or None when a
    pattern has none."""
    folded: set[bytes] = set()
    cased: set[bytes] = set()
    helds = [_pieces(pattern) for pattern in patterns]
    if key_pattern is not None:
        helds.append(_sequence(list(_sre_parse.parse(key_pattern)), True, frozenset({_KEY_END})).held)
    for held in helds:
        if held is None:
            return None
        for piece in held:
            for form in _line_forms(piece):
                into = cased if any(c.isupper() for c in form) else folded
                before, marked, _ = form.encode("utf-8").partition(_NON_ASCII.encode("utf-8"))
                if not marked:
                    into.add(before)
                elif before:
                    # Any character past ASCII: any first byte of one in UTF-8 (what follows it, cut).
                    into.update(before + bytes([lead]) for lead in range(0xC2, 0xF5))
                else:
                    return None
    return folded, cased


def searches(patterns: Iterable[str], *, key_pattern: str | None = None) -> Searches | None:
    """The searches for `patterns`' keywords (and `key_pattern`'s, when given)."""
    found = keywords(patterns, key_pattern=key_pattern)
    if found is None:
        return None
    folded, cased = found
    # A text with capitals that, lower-cased, holds a lower-case one is found by the folded
    # search (`shpat_A` by `shpat_a`: the line is lower-cased there), and needs no search here.
    cased = {text for text in cased if not _holds_any(text.lower(), folded)}
    return Searches(_search(folded, cased=False), _search(cased, cased=True) if cased else ())


def _holds_any(text: bytes, texts: set[bytes]) -> bool:
    return any(text[start:end] in texts for start in range(len(text)) for end in range(start + 1, len(text) + 1))
