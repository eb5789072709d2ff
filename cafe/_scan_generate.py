"""Writes `cafe/_scan_table.py`: the searches for the default secret patterns' keywords
(`cafe._scan_keywords`), read off `cafe.privacy`'s patterns once instead of at every start.
`tests/recording/test_privacy.py` fails while the committed table is not what they give."""

from __future__ import annotations

import sys
from pathlib import Path

from cafe._scan_keywords import searches
from cafe.privacy import _SECRET_KEY, DEFAULT_SECRET_PATTERNS

TABLE = Path(__file__).with_name("_scan_table.py")
REGENERATE = "python -m cafe._scan_generate"


def table_text() -> str:
    """The text of `cafe/_scan_table.py`: the default patterns' searches."""
    found = searches([pattern for _, pattern in DEFAULT_SECRET_PATTERNS], key_pattern=_SECRET_KEY.pattern)
    assert found is not None, "every default pattern has pieces"
    lines = [
        '"""The searches for the default secret patterns\' keywords, as `cafe._scan_keywords`',
        "derives them from `cafe.privacy.DEFAULT_SECRET_PATTERNS` and the secret-named keys.",
        "",
        f"Written by `{REGENERATE}`; do not edit. tests/recording/test_privacy.py fails",
        'while this is not what the patterns give."""',
        "",
        "# (stop, expression): a line holds a keyword if, for one pair, the expression is found",
        "# from the stop's first place in the line on. FOLDED runs on the line lower-cased.",
    ]
    for name, pairs in (("FOLDED", found.folded), ("CASED", found.cased)):
        lines.append(f"{name}: tuple[tuple[bytes, bytes], ...] = (")
        for stop, expression in pairs:
            lines.append(f"    ({stop!r},")
            lines += [f"     {chunk!r}" for chunk in _chunks(expression)]
            lines[-1] += "),"
        lines.append(")")
    return "\n".join(lines) + "\n"


def _chunks(expression: bytes, width: int = 100) -> list[bytes]:
    """`expression` cut into pieces whose literals are at most `width` characters long."""
    chunks = [b""]
    for value in expression:
        character = bytes([value])
        if len(repr(chunks[-1] + character)) > width:
            chunks.append(b"")
        chunks[-1] += character
    return chunks


def main(argv: list[str]) -> int:
    if argv:
        print(f"usage: {REGENERATE}  (writes {TABLE.name} from the secret patterns)", file=sys.stderr)
        return 2
    TABLE.write_text(table_text(), encoding="utf-8")
    print(f"wrote {TABLE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

