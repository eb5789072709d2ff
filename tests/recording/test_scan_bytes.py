"""The writer scans the bytes it writes: the keyword and known-secret checks read a line's
UTF-8 bytes as they read its text."""

from __future__ import annotations

import json

import pytest

from cafe.privacy import Scrubber

KEY = "sk-bench-not-a-real-key-0000"


@pytest.mark.parametrize(("value", "needs"), [
    ({"content": "Authorization: Basic dXNlcjpwYXNzd29yZA=="}, True),
    ({"content": "a latte, ıf you please", "usage": {"prompt_tokens": 3}}, False),
    ({"content": "tokſn"}, False),
    # A pattern that ignores case takes ſ for s, ı for i and the Kelvin sign for k.
    ({"content": "export API_\u212aEY=abcdefgh1234"}, True),
    ({"content": "db.paſſword = hunter2hunter2"}, True),
    ({"content": "€4.50, \u212a and ı"}, False),
    ({"content": "my BEARER abcdefghijkl"}, True),
    ({"content": "ASIA" + "A" * 16}, True),
    ({"content": "the key: " + KEY}, True),
    ({"content": "half the key: " + KEY[4:14]}, False),
    ({"content": "escaped \u0001 anything"}, True),
])
def test_bytes_and_text_get_the_same_verdict(value: dict[str, str], needs: bool) -> None:
    scrubber = Scrubber().with_literals([KEY])
    for ascii_only in (False, True):
        text = json.dumps(value, ensure_ascii=ascii_only)
        verdict = scrubber.may_need_scrubbing(text)
        assert scrubber.may_need_scrubbing(text.encode("utf-8")) is verdict
        if not ascii_only:  # an ASCII-only line escapes é as \u00e9, and any \u is walked
            assert verdict is needs
