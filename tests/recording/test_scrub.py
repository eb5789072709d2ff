"""Scrubbing (`Scrubber` in cafe/privacy.py): it touches string values only, is idempotent,
takes configured patterns as they are written, and finds a secret however JSON spells it."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cafe.counter import RecordingClient, ReplayClient, record_shift
from cafe.counter.clients.canned import CannedClient
from cafe.counter.clients.scripted import ScriptedClient
from cafe.counter.clients.settings import MIN_API_KEY_CHARS, ApiKeyTooShort, LiveSettings, Secret
from cafe.counter.consent import make_responder
from cafe.counter.menu import items_named_in
from cafe.privacy import DEFAULT_SECRET_PATTERNS, MIN_SECRET_CHARS, REDACTED
from cafe.recording import Header, RecordingError, RecordingWriter, Scrubber, Timing, load_recording
from cafe.recording.check import check_file
from tests.recording.helpers import run_cli, valid_bytes

# Scrubbing touches string values only: a known secret of any length never changes a key, a
# number or the line's JSON, and a recorded shift whose key the customer typed still replays.

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


# Scrubbing a scrubbed text changes nothing, with configured patterns too, even one that
# matches inside `[REDACTED]` itself (`[A-Z]{8}`, `\w{8}`, `ACTED`): a replayed reply that
# held a scrubbed value, sent back in the next request and scrubbed there, still matches its
# recording, and `cafe view` leaves a cafe recording as it is.

PATTERNS = [r"[A-Z]{8}", r"\w{8}", "ACTED", r"RED[A-Z]+", r"D\]", r"\[\w+"]


@settings(max_examples=100, deadline=None)
@given(pattern=st.sampled_from(PATTERNS),
       text=st.lists(st.sampled_from(["code", REDACTED, "ABCDEFGH", "sk-abcdefghijklmnop", "x[", "]"]),
                     max_size=8).map(" ".join))
def test_scrubbing_twice_is_scrubbing_once(pattern: str, text: str) -> None:
    scrubber = Scrubber(extra_patterns=[pattern])
    once = scrubber.scrub(text)
    assert scrubber.scrub(once) == once


@pytest.mark.parametrize("pattern", [r"[A-Z]{8}", r"\w{8}", "ABCDEFGH|ACTED"])
def test_a_reply_holding_a_scrubbed_value_replays(tmp_path: Path, pattern: str) -> None:
    class Echo:
        model, provider = "m", "test"

        def chat(self, messages: list[dict[str, Any]], tools: Any = None, temperature: float = 0.0,
                 tool_choice: Any = None) -> dict[str, Any]:
            message = {"role": "assistant", "content": f"Noted {messages[0]['content'][-8:]}."}
            return {"id": "r", "model": "m", "usage": None,
                    "choices": [{"index": 0, "finish_reason": "stop", "message": message}]}

    def shift(client: Any) -> None:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "My code is ABCDEFGH"}]
        messages.append(client.chat(list(messages))["choices"][0]["message"])
        messages.append({"role": "user", "content": "Thanks."})
        client.chat(list(messages))

    path = tmp_path / "shift.jsonl"
    recorder = RecordingClient(Echo(), path, scrubber=Scrubber(extra_patterns=[pattern]))
    shift(recorder)
    recorder.close()
    assert "ABCDEFGH" not in path.read_text() and "[[" not in path.read_text()
    replay = ReplayClient(path, scrubber=Scrubber(extra_patterns=[pattern]))
    shift(replay)
    replay.assert_exhausted()


# Configured scrub patterns run as alternatives of one expression, which cannot hold a
# numbered backreference or condition (`(ACME)-\1`), a group named like cafe's own (`p0`) or
# like another pattern's: each is a named error (exit 30) whose remedy, a named group, works.

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


# A configured scrub pattern that matches an empty span (`a|`, `x*`, `\b`, `.*`) would write
# [REDACTED] between the characters of every string: it is refused before anything is
# written, like an invalid one.

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


# A secret spelled with escapes a JSON text need not make (`\u0073k-...`, `Bearer\u0020...`),
# as a model may write it in the JSON text of its tool-call arguments, is found by every
# pattern: the recorder scrubs it, `cafe view` hides it and `cafe check-recording` reports it.

KEY = "sk-proj-Ej44EscapedCanary0123"


def _escaped(text: str, which: list[bool]) -> str:
    return "".join(f"\\u{ord(c):04x}" if escape else c for c, escape in zip(text, which, strict=True))


def _read(text: str) -> str:
    """What a JSON reader makes of every `\\u00XX` escape, at any depth."""
    return re.sub(r"\\+u00([0-9a-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


@settings(max_examples=100, deadline=None)
@given(which=st.lists(st.booleans(), min_size=len(KEY), max_size=len(KEY)), depth=st.sampled_from([1, 2]))
def test_a_key_spelled_with_escapes_is_scrubbed(which: list[bool], depth: int) -> None:
    spelled = _escaped(KEY, which).replace("\\", "\\" * depth)
    arguments = f'{{"item": "latte", "note": "{spelled}"}}'
    scrubbed = Scrubber().scrub(arguments)
    assert REDACTED in scrubbed
    assert KEY[8:] not in _read(scrubbed)
    assert "latte" in scrubbed


def test_text_with_escapes_and_no_secret_is_kept_as_it_was() -> None:
    for text in ('{"item": "\\u006catte"}', "caf\\u00e9 \\u0041", '{"a": "\\u0022sk-\\u0022"}'):
        assert Scrubber().scrub(text) == text


def test_a_bearer_token_behind_an_escaped_space_is_scrubbed() -> None:
    assert Scrubber().scrub("Bearer\\u0020abcdefgh12345678") == f"Bearer {REDACTED}"


class _OneReply:
    model, provider = "m", "test"

    def __init__(self, arguments: str) -> None:
        self.arguments = arguments

    def chat(self, messages: list[dict[str, Any]], tools: Any = None, temperature: float = 0.0,
             tool_choice: Any = None) -> dict[str, Any]:
        call = {"id": "call_1", "type": "function", "function": {"name": "price_check", "arguments": self.arguments}}
        return {"id": "r1", "model": "m", "usage": None,
                "choices": [{"index": 0, "finish_reason": "tool_calls",
                             "message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}


def test_the_recording_holds_no_escaped_key_and_check_recording_finds_one(tmp_path: Path) -> None:
    arguments = '{"item": "latte", "note": "\\u0073' + KEY[1:] + '"}'
    path = tmp_path / "shift.jsonl"
    client = RecordingClient(_OneReply(arguments), path, scrubber=Scrubber())
    client.chat([{"role": "user", "content": "A latte."}])
    client.close()
    text = path.read_text()
    assert KEY[1:] not in text and REDACTED in text
    recorded = load_recording(path).calls[0].response["choices"][0]["message"]["tool_calls"][0]
    assert json.loads(recorded["function"]["arguments"]) == {"item": "latte", "note": REDACTED}
    replay = ReplayClient(path, scrubber=Scrubber())
    replay.chat([{"role": "user", "content": "A latte."}])
    replay.assert_exhausted()

    theirs = tmp_path / "theirs.jsonl"
    request = {"messages": [{"role": "user", "content": "A latte."}]}
    reply = _OneReply(arguments).chat([])
    theirs.write_text(json.dumps({"request": request, "response": reply}) + "\n")
    assert [finding.kind for finding in check_file(theirs, Scrubber())] == ["secret (openai-style key)"]
