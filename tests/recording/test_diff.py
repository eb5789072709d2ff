"""The structural diff of a mismatch (cafe/recording/diff.py) is described without quoting
text, whatever the text holds: a lone surrogate (which a recording keeps as a `\\ud800`
escape) or an integer past int-to-text's digit limit gives the one-line mismatch, not a
UnicodeEncodeError or ValueError (exit 70)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cafe.counter import ReplayClient
from cafe.recording import ReplayMismatch, Scrubber, load_recording
from cafe.recording.diff import describe, first_difference
from tests.recording.helpers import CUSTOMER_TEXT, call, header, request, run_cli


def test_a_lone_surrogate_in_a_differing_text_is_a_mismatch_not_a_crash(tmp_path: Path) -> None:
    # The writer keeps a lone surrogate as a \ud800 escape; describing it must not encode it.
    path = tmp_path / "r.jsonl"
    line = call(1, request=request("\ud800" + CUSTOMER_TEXT))
    path.write_text(json.dumps(header()) + "\n" + json.dumps(line) + "\n", encoding="utf-8")
    with pytest.raises(ReplayMismatch, match=r"at \$\.messages\[1\]\.content: recorded text\(60 chars"):
        ReplayClient(load_recording(path), scrubber=Scrubber()).chat(request()["messages"])
    code, _, err = run_cli("replay", str(path))
    assert code == 41 and err.count("\n") == 1, err


def test_a_lone_surrogate_on_the_incoming_side_is_a_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(header()) + "\n" + json.dumps(call(1)) + "\n", encoding="utf-8")
    with pytest.raises(ReplayMismatch, match=r"incoming text\(1 chars"):
        ReplayClient(load_recording(path), scrubber=Scrubber()).chat(request("\udc00")["messages"])


def test_an_integer_past_the_digit_limit_is_described_by_size() -> None:
    assert describe(10**5000) == "integer(more than 4,000 digits)"
    assert describe(10**20) == "integer(21 digits)"


@pytest.mark.parametrize("key", ["messages[1]", "messages[x]", "a.b", "[", "", "with space"])
def test_a_key_spelt_like_a_path_is_one_step_and_named_by_its_size(key: str) -> None:
    recorded = {"messages": [{"role": "user"}, {"role": "user"}], key: 1}
    incoming = {"messages": [{"role": "user"}, {"role": "user"}]}
    difference = first_difference(recorded, incoming)
    assert difference.steps == (key,)  # one key, never the list's item `messages[1]`
    assert difference.path == f"$.<a key of {len(key)} characters>"
    assert first_difference({"messages": [{}, {"x": 1}]}, {"messages": [{}, {}]}).steps == ("messages", 1, "x")


def test_a_mismatch_at_a_bracketed_key_names_it_by_its_size(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    line = call(1, request={**request(), "messages[3000000]": True})
    path.write_text(json.dumps(header()) + "\n" + json.dumps(line) + "\n", encoding="utf-8")
    with pytest.raises(ReplayMismatch) as raised:
        ReplayClient(load_recording(path), scrubber=Scrubber()).chat(request()["messages"])
    assert raised.value.steps == ("messages[3000000]",)
    assert raised.value.json_path == "$.<a key of 17 characters>"
    assert "at $.<a key of 17 characters>: recorded True, incoming absent" in str(raised.value)
