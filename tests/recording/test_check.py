"""`cafe check-recording` (cafe/recording/check.py) names the JSON path of a finding, never
its value: a key holding customer text or a secret is named by its size, a protocol key as
it is."""

from __future__ import annotations

import json
from pathlib import Path

from tests.recording.helpers import run_cli

KEY = "sk-proj-Ck19PathCanary0123456"
CUSTOMER = "Jo Smith lives at 1 Road"


def test_a_finding_under_a_key_of_customer_text_or_a_secret_does_not_print_the_key(tmp_path: Path) -> None:
    meta = {KEY: "call me on +44 20 7946 0123", CUSTOMER: "jo@gmail.com", "plain_key": "al@gmail.com"}
    line = {"request": {"messages": [{"role": "user", "content": "hi"}], "meta": meta},
            "response": {"choices": [{"message": {"role": "assistant", "content": "Hello."}}]}}
    path = tmp_path / "theirs.jsonl"
    path.write_text(json.dumps(line) + "\n")
    code, out, err = run_cli("check-recording", str(path))
    assert code == 39, err
    assert KEY not in out and KEY[8:] not in out and CUSTOMER not in out
    assert f"phone number (in $.request.meta.<a key of {len(KEY)} characters>)" in out
    assert f"e-mail address (in $.request.meta.<a key of {len(CUSTOMER)} characters>)" in out
    assert "e-mail address (in $.request.meta.plain_key)" in out


def test_a_broad_pattern_does_not_hide_the_protocol_keys_of_a_path(tmp_path: Path) -> None:
    line = {"request": {"messages": [{"role": "user", "content": "write to al@gmail.com"}]},
            "response": {"choices": [{"message": {"role": "assistant", "content": "Hello."}}]}}
    path = tmp_path / "theirs.jsonl"
    path.write_text(json.dumps(line) + "\n")
    code, out, _ = run_cli("check-recording", str(path), "--pattern", r"\w{8}")
    assert code == 39 and "e-mail address (in $.request.messages[0].content)" in out
