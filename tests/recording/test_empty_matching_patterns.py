"""A configured scrub pattern that matches an empty span (`a|`, `x*`, `\\b`, `.*`) wrote
[REDACTED] between the characters of every string of the recording (thousands of times in
one shift), destroying it; it is refused before anything is written, like an invalid one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cafe.recording import RecordingError, Scrubber
from cafe.recording.scrub import DEFAULT_SECRET_PATTERNS
from tests.recording.helpers import run_cli

EMPTY_MATCHING = ["a|", "x*", r"\b", ".*", "^", "(?i)", "(sk-[a-z]+)?", r"\s*"]


@pytest.mark.parametrize("pattern", EMPTY_MATCHING)
def test_a_pattern_matching_an_empty_span_is_refused(pattern: str) -> None:
    with pytest.raises(RecordingError, match=r"scrub pattern \(configured pattern\) matches an empty text"):
        Scrubber(extra_patterns=[pattern])


@pytest.mark.parametrize("pattern", EMPTY_MATCHING[:3])
def test_through_the_cli_nothing_is_recorded(tmp_path: Path, pattern: str) -> None:
    path = tmp_path / "shift.jsonl"
    code, _, err = run_cli("shift", "--seed", "1", "--record", str(path), environ={"CAFE_SCRUB_PATTERNS": pattern})
    assert code == 30 and err.count("\n") == 1 and "matches an empty text" in err
    assert list(tmp_path.iterdir()) == []
    code, _, err = run_cli("check-recording", "--pattern", pattern, str(path))
    assert code == 30 and "matches an empty text" in err


def test_the_default_patterns_and_ordinary_secret_patterns_are_kept() -> None:
    Scrubber()
    scrubber = Scrubber(extra_patterns=[r"sk-[a-z]+", r"(?i)token=(\w+)", r"\d{4}-\d{4}"])
    assert scrubber.scrub_json("my sk-abcdef and token=xyz") == "my [REDACTED] and token=[REDACTED]"
    assert all(re.compile(p, re.DOTALL).search("") is None for _, p in DEFAULT_SECRET_PATTERNS)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="ab*|?.()^$", max_size=6))
def test_whatever_pattern_is_accepted_never_inserts_redactions_into_plain_text(pattern: str) -> None:
    try:
        scrubber = Scrubber(extra_patterns=[pattern])
    except RecordingError:
        return
    text = "latte, please"
    scrubbed = scrubber.scrub_json(text)
    assert len(scrubbed.replace("[REDACTED]", "")) < len(text) or scrubbed == text
