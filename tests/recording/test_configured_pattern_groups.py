"""Configured scrub patterns run as alternatives of one expression, so what refers to a group
by number or names one the expression already holds broke there: a numbered backreference
(`(ACME)-\\1`) silently matched nothing, so what it was written for went unscrubbed, and a
group named like cafe's own (`p0`), or like another pattern's, was exit 70."""

from __future__ import annotations

from pathlib import Path

import pytest

from cafe.recording import RecordingError
from cafe.recording.scrub import REDACTED, Scrubber
from tests.recording.helpers import run_cli, valid_bytes


@pytest.mark.parametrize("patterns", [
    r"(?P<p0>ACME-[0-9]+)",  # cafe's own group name
    "(?P<code>ACME-[0-9]+)\n(?P<code>BETA-[0-9]+)",  # the same name in two patterns
    r"(ACME)-\1",  # a numbered backreference
    r"(a)?(?(1)ACME|BETA)",  # a numbered condition
])
def test_a_pattern_the_alternation_cannot_hold_is_a_named_error(tmp_path: Path, patterns: str) -> None:
    path = tmp_path / "shift.jsonl"
    path.write_bytes(valid_bytes())
    code, out, err = run_cli("check-recording", str(path), environ={"CAFE_SCRUB_PATTERNS": patterns})
    assert code == 30 and out == "" and err.count("\n") == 1, err
    assert err.startswith("cafe: error: scrub pattern (configured pattern) ")


def test_the_named_backreference_the_message_suggests_works() -> None:
    with pytest.raises(RecordingError, match=r"name the group, \(\?P<name>\.\.\.\) and \(\?P=name\)"):
        Scrubber(extra_patterns=[r"(ACME)-\1"])
    scrubber = Scrubber(extra_patterns=[r"(?P<name>ACME)-(?P=name)"])
    assert scrubber.scrub("code ACME-ACME here") == f"code {REDACTED}-ACME here"
    assert scrubber.scrub("code ACME-BETA here") == "code ACME-BETA here"


def test_named_groups_of_their_own_still_work() -> None:
    scrubber = Scrubber(extra_patterns=[r"(?P<code>ACME-[0-9]{4})", r"ref=(?P<ref>[0-9]{6})"])
    assert scrubber.scrub("ACME-1234 and ref=123456") == f"{REDACTED} and ref={REDACTED}"
