"""Scrubbing touches string values only: a known secret of any length never changes a key,
a number or the line's JSON, and a recorded shift whose key the customer typed still replays."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cafe.clients.canned import CannedClient
from cafe.clients.scripted import ScriptedClient
from cafe.clients.settings import MIN_API_KEY_CHARS, ApiKeyTooShort, LiveSettings, Secret
from cafe.consent import make_responder
from cafe.menu import items_named_in
from cafe.recording import (
    Header,
    RecordingClient,
    RecordingError,
    RecordingWriter,
    Scrubber,
    Timing,
    load_recording,
    record_shift,
)
from cafe.recording.scrub import MIN_SECRET_CHARS
from tests.recording.helpers import run_cli

# Characters that make up JSON syntax, format field names and numbers: the ones a literal
# scrubbed "anywhere in the line" used to cut through.
STRUCTURAL = st.sampled_from(list('0123456789"\\{}[]:,. -_abcdefghijklmnopqrstuvwxyz'))


def skeleton(value: Any) -> Any:
    """Everything but the string values: keys, numbers, booleans, nulls and the shape."""
    if isinstance(value, dict):
        return {key: skeleton(item) for key, item in value.items()}
    if isinstance(value, list):
        return [skeleton(item) for item in value]
    return "<string>" if isinstance(value, str) else value


def _lines(secret: str) -> tuple[Header, dict, dict, Timing]:
    header = Header(version=1, model="m-1", provider="p", seed=17, clock_origin_unix_nano=1_700_000_000_123_456_789,
                    script=[f"my key is {secret}"], decisions=[["approve"]], max_turns=8, max_repairs=2,
                    temperature=0.0)
    request = {"messages": [{"role": "user", "content": f"key={secret} and {json.dumps({'k': secret})}"}],
               "tools": None, "temperature": 0.5, "tool_choice": None, "n": 12, "flag": True}
    response = {"id": "r1", "model": "m-1", "usage": {"prompt_tokens": 101, "completion_tokens": 7},
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": secret}}]}
    return header, request, response, Timing(1_700_000_000_987_654_321, 4_242)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret=st.text(STRUCTURAL, min_size=1, max_size=24))
def test_a_known_secret_of_any_length_changes_nothing_outside_string_values(secret: str):
    header, request, response, timing = _lines(secret)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "r.jsonl"
        writer = RecordingWriter(path, header, scrubber=Scrubber().with_literals([secret]))
        writer.write_call(request, response, timing)
        writer.close()
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert skeleton(lines[0]) == skeleton(header.to_json())
        assert skeleton(lines[1]) == skeleton({"call": 1, "request": request, "response": response,
                                               "timing": {"start_unix_nano": timing.start_unix_nano,
                                                          "duration_ns": timing.duration_ns}})
        recording = load_recording(path)  # and it reads back as a recording
        assert recording.calls[0].timing == timing and recording.header.seed == 17
        content = recording.calls[0].response["choices"][0]["message"]["content"]
        assert secret not in content.replace("[REDACTED]", "")


class KeyedScripted(ScriptedClient):
    def __init__(self, secret: str) -> None:
        super().__init__()
        self._secret = secret

    def secrets(self) -> list[str]:
        return [self._secret]


def _protocol_text() -> str:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "plain.jsonl"
        record_shift(ScriptedClient(), ["A latte, please.", "my key is X"], path,
                     responder=make_responder([("approve", None)]), decisions=[("approve", None)], seed=3)
        return path.read_text(encoding="utf-8")


PROTOCOL_TEXT = _protocol_text()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret=st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=MIN_SECRET_CHARS,
                      max_size=40))
def test_a_recorded_shift_with_its_key_in_the_conversation_still_replays(secret: str):
    # A key that is itself part of the harness's own text (a tool name), or that names a menu
    # item (the scripted model would price it, so the key would be in the tool call it makes),
    # could not be scrubbed without changing what the shift does; real keys are neither.
    assume(secret.strip() == secret and secret not in PROTOCOL_TEXT and "\n" not in secret)
    assume(not items_named_in(secret))
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "keyed.jsonl"
        record_shift(KeyedScripted(secret), ["A latte, please.", f"my key is {secret}"], path,
                     responder=make_responder([("approve", None)]), decisions=[("approve", None)], seed=3)
        assert secret not in path.read_text(encoding="utf-8")
        code, out, err = run_cli("replay", str(path))
        assert code == 0, err
        assert "transcript matches" in out


@pytest.mark.parametrize("length", range(1, MIN_API_KEY_CHARS))
def test_a_short_live_key_is_refused_when_the_settings_are_built(length: int):
    key = "k" * length
    environ = {"COURSE_MODE": "live", "CAFE_BASE_URL": "http://127.0.0.1:9/v1", "CAFE_API_KEY": key,
               "CAFE_MODEL": "m"}
    with pytest.raises(ApiKeyTooShort):
        LiveSettings.from_env(environ)
    with pytest.raises(ApiKeyTooShort):
        LiveSettings("http://127.0.0.1:9/v1", Secret(key), "m")
    code, out, err = run_cli("shift", environ=environ)
    assert code == ApiKeyTooShort.exit_code == 20 and out == ""
    assert err.count("\n") == 1 and "CAFE_API_KEY" in err and f"is {length} character(s)" in err
    assert key * 2 not in err


def test_a_key_of_the_minimum_length_is_accepted():
    settings = LiveSettings.from_env({"CAFE_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "k" * 8,
                                      "CAFE_MODEL": "m"})
    assert settings.api_key.reveal() == "k" * 8


def test_a_recorder_refuses_a_client_secret_too_short_to_scrub(tmp_path: Path):
    class Short(CannedClient):
        def secrets(self) -> list[str]:
            return ["abc"]

    path = tmp_path / "short.jsonl"
    with pytest.raises(RecordingError, match="3 characters"):
        RecordingClient(Short([]), path)
    assert not path.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("key", ["paſſword", "Authorızation", "API_KEY", "x-Api-Key"])
def test_the_keyword_prefilter_never_skips_what_a_pattern_matches(key: str):
    scrubber = Scrubber()
    line = {"headers": {key: "hunter2-secret"}, "note": f"{key}: hunter3-secret"}
    assert scrubber.may_need_scrubbing(json.dumps(line, ensure_ascii=False))
    assert scrubber.may_need_scrubbing(json.dumps(line))
    scrubbed = json.dumps(scrubber.scrub_json(line))
    assert "hunter2" not in scrubbed and "hunter3" not in scrubbed


WORDS = ["authorization", "Api-Key", "api_key", "PASSWORD", "passwd", "client_secret", "access-token",
         "refresh_token", "Bearer ", "sk-", "AKIA", "ghp_", "-----BEGIN RSA PRIVATE KEY-----", ": ", "=", '"',
         "\\", "ſ", "ı", "K", "é", "\n", "0123456789abcdefghij", "ABCDEFGHIJKLMNOP", "known-secret-1"]
fragments = st.lists(st.sampled_from(WORDS) | st.text(max_size=4), max_size=8).map("".join)
json_values = st.recursive(fragments | st.integers() | st.none(),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(fragments, inner, max_size=3),
                           max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(value=json_values, ascii_only=st.booleans())
def test_a_line_the_prefilter_passes_over_has_nothing_to_scrub(value, ascii_only: bool):
    scrubber = Scrubber().with_literals(["known-secret-1"])
    if not scrubber.may_need_scrubbing(json.dumps(value, ensure_ascii=ascii_only)):
        assert scrubber.scrub_json(value) == value
