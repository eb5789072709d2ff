"""Privacy on every write path: mode 0600, record modes, scrubbing of every line, and
`cafe check-recording`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cafe.counter import RecordingClient, record_shift
from cafe.counter.clients.canned import CannedClient
from cafe.counter.clients.scripted import ScriptedClient
from cafe.counter.consent import make_responder
from cafe.recording import (
    Ending,
    Header,
    RecordingDisabled,
    RecordingExists,
    RecordingWriter,
    Scrubber,
    Timing,
    load_recording,
)
from cafe.recording.check import check_file, customer_data_kinds, iban_ok, luhn_ok
from cafe.recording.errors import RecordingNotClean, RecordingNotFound, RecordingUnwritable
from tests.recording.helpers import dump, header, run_cli, snapshot, valid_bytes

CANARY_KEY = "sk-cafecanary0123456789abcdefXYZ"
CANARY_AUTH = "Basic Y2FmZS1jYW5hcnk6aHVudGVyMg=="
CANARY_BEARER = "canarybearer0123456789"
LIVE_SECRET = "live-canary-9f8e7d6c5b"  # matches no pattern: only the client's secrets() knows it
EXTRA_SECRET = "ORDER-PIN-493817"
EXTRA_PATTERN = r"ORDER-PIN-\d{6}"
CANARIES = (CANARY_KEY, CANARY_AUTH, "Y2FmZS1jYW5hcnk6aHVudGVyMg", CANARY_BEARER, LIVE_SECRET, EXTRA_SECRET)

LEAKY_TEXT = (
    f"my key is {CANARY_KEY}; send Authorization: {CANARY_AUTH} or Authorization: Bearer {CANARY_BEARER}; "
    f"the till uses {LIVE_SECRET} and pin {EXTRA_SECRET}"
)
LEAKY_HEADERS = {"Authorization": CANARY_AUTH, "x-api-key": LIVE_SECRET, "Proxy-Authorization": CANARY_AUTH}
LEAKY_ARGUMENTS = json.dumps({"item": "latte", "api_key": CANARY_KEY, "headers": LEAKY_HEADERS,
                              "note": LEAKY_TEXT})


class SecretHoldingClient(CannedClient):
    """Stands for the live client: it knows its key and hands it to the recorder."""

    def secrets(self) -> list[str]:
        return [LIVE_SECRET]


def _leaky_replies() -> list[dict]:
    return [
        {"content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "price_check", "arguments": LEAKY_ARGUMENTS}},
        ]},
        {"content": LEAKY_TEXT, "headers": LEAKY_HEADERS},
    ]


def _assert_no_canary(path: Path) -> None:
    data = path.read_bytes()
    for canary in CANARIES:
        assert canary.encode() not in data, f"{canary[:6]}… reached {path.name}"
    assert b"[REDACTED]" in data
    load_recording(path, allow_truncated=True)  # scrubbing kept every line valid JSON


def _scrubber() -> Scrubber:
    return Scrubber(extra_patterns=[EXTRA_PATTERN])


def test_canaries_never_reach_the_file_through_a_recorded_shift(tmp_path: Path):
    path = tmp_path / "shift.jsonl"
    client = SecretHoldingClient(_leaky_replies())
    run, _ = record_shift(
        client, [LEAKY_TEXT], path,
        responder=make_responder([("edit", {"headers": LEAKY_HEADERS, "note": LEAKY_TEXT})]),
        decisions=[("edit", {"headers": LEAKY_HEADERS, "note": LEAKY_TEXT})],
        scrubber=_scrubber(), seed=1,
    )
    assert run.model_calls == 2
    recording = load_recording(path)
    assert recording.ending is not None  # header, two calls and the end line were all written
    _assert_no_canary(path)
    # What was redacted is still there as structure: the header key is kept.
    message = recording.calls[1].response["choices"][0]["message"]
    assert message["headers"]["Authorization"] == "[REDACTED]"
    arguments = json.loads(recording.calls[0].response["choices"][0]["message"]["tool_calls"][0]["function"]
                           ["arguments"])
    assert arguments["headers"]["Authorization"] == "[REDACTED]" and arguments["item"] == "latte"


@pytest.mark.parametrize("path_kind", ["header", "call", "end"])
def test_canaries_never_reach_the_file_through_the_writer(tmp_path: Path, path_kind: str):
    path = tmp_path / f"{path_kind}.jsonl"
    quiet = Header(version=1, script=["hello"])
    leaky_header = Header(version=1, model=LEAKY_TEXT, script=[LEAKY_TEXT], decisions=[["edit", LEAKY_HEADERS]])
    writer = RecordingWriter(path, leaky_header if path_kind == "header" else quiet,
                             scrubber=_scrubber().with_literals([LIVE_SECRET]))
    request = {"messages": [{"role": "user", "content": "hi"}], "tools": None, "temperature": 0.0,
               "tool_choice": None}
    quiet_response = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]}
    if path_kind == "call":
        request["messages"].append({"role": "user", "content": LEAKY_TEXT, "metadata": LEAKY_HEADERS})
        leaky_response = {"choices": [{"index": 0, "message": {
            "role": "assistant", "content": LEAKY_TEXT,
            "tool_calls": [{"id": "c1", "type": "function",
                            "function": {"name": "fire", "arguments": LEAKY_ARGUMENTS}}]}}],
            "headers": LEAKY_HEADERS}
        writer.write_call(request, leaky_response, Timing(1, 2))
    else:
        writer.write_call(request, quiet_response, Timing(1, 2))
    if path_kind == "end":
        writer.write_end(Ending(LEAKY_TEXT, 1, "0" * 64))
    else:
        writer.write_end(Ending("answered", 1, "0" * 64))
    writer.close()
    _assert_no_canary(path)


def test_the_live_client_key_is_scrubbed_through_its_secrets(tmp_path: Path):
    from cafe.counter.clients.live import LiveClient
    from cafe.counter.clients.settings import LiveSettings, Secret

    live = LiveClient(LiveSettings("http://127.0.0.1:9/v1", Secret(LIVE_SECRET), LIVE_SECRET))
    assert live.secrets() == [LIVE_SECRET]
    path = tmp_path / "live.jsonl"
    recorder = RecordingClient(live, path)  # the model name here repeats the key: the header path
    recorder.close()
    data = path.read_bytes()
    assert LIVE_SECRET.encode() not in data and b"[REDACTED]" in data


def test_extra_patterns_come_from_the_environment(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("CAFE_SCRUB_PATTERNS", EXTRA_PATTERN + "\n")
    path = tmp_path / "env.jsonl"
    record_shift(CannedClient([{"content": f"your pin is {EXTRA_SECRET}"}]), ["hi"], path,
                 responder=make_responder([]))
    assert EXTRA_SECRET.encode() not in path.read_bytes()


def test_a_pattern_that_matches_json_syntax_cannot_break_the_line(tmp_path: Path):
    # Patterns run inside string values only: JSON punctuation and keys are out of reach.
    path = tmp_path / "x.jsonl"
    writer = RecordingWriter(path, Header(version=1),
                             scrubber=Scrubber(extra_patterns=[r'"choices"', r'[{}\[\]:,"]', r"\d+"]))
    writer.write_call({"messages": [{"role": "user", "content": 'say "choices": [1, 2]'}]},
                      {"model": "m", "choices": [{"message": {"role": "a"}}]}, Timing(12345, 678))
    writer.close()
    recording = load_recording(path)
    call = recording.calls[0]
    assert call.timing == Timing(12345, 678) and call.response["choices"][0]["message"]["role"] == "a"
    assert call.request["messages"][0]["content"] == "say " + "[REDACTED]" * 2 + " " + "[REDACTED]" * 3 + " " \
        + "[REDACTED]" * 2


def test_lone_surrogates_and_unicode_are_written_as_valid_utf8(tmp_path: Path):
    path = tmp_path / "u.jsonl"
    replies = [{"content": "Un café ☕"}, {"content": "half a pair \ud800"}]
    recorder = RecordingClient(CannedClient(replies), path)
    recorder.chat([{"role": "user", "content": "Ein Kaffee, bitte ☕"}])
    recorder.chat([{"role": "user", "content": "Ein Kaffee, bitte ☕"}])
    recorder.close()
    lines = path.read_bytes().decode("utf-8").splitlines()  # valid UTF-8 throughout
    assert "Un café ☕" in lines[1]  # readable text stays readable
    assert lines[2].isascii()  # the line with a lone surrogate is written escaped
    recording = load_recording(path)
    assert recording.calls[1].response["choices"][0]["message"]["content"] == "half a pair \ud800"
    assert recording.calls[1].request["messages"][0]["content"] == "Ein Kaffee, bitte ☕"


def test_nan_is_refused_rather_than_written_as_invalid_json(tmp_path: Path):
    from cafe.recording.errors import RecordingError

    path = tmp_path / "nan.jsonl"
    writer = RecordingWriter(path, Header(version=1))
    with pytest.raises(RecordingError, match="NaN"):
        writer.write_call({"messages": [], "temperature": float("nan")},
                          {"choices": [{"message": {"role": "assistant"}}]}, None)
    writer.close()
    load_recording(path)


# --- mode 0600 and record modes -------------------------------------------------------------


def _record(path: Path, mode: str = "once") -> None:
    record_shift(ScriptedClient(), ["A latte, please."], path, responder=make_responder([("approve", None)]),
                 mode=mode, seed=1)


def test_recordings_are_created_0600_whatever_the_umask(tmp_path: Path):
    old = os.umask(0)
    try:
        _record(tmp_path / "a.jsonl")
    finally:
        os.umask(old)
    assert (tmp_path / "a.jsonl").stat().st_mode & 0o777 == 0o600


def test_once_refuses_to_overwrite_and_leaves_the_file_untouched(tmp_path: Path):
    path = tmp_path / "a.jsonl"
    _record(path)
    before = snapshot(path)
    with pytest.raises(RecordingExists):
        _record(path, "once")
    assert snapshot(path) == before


def test_all_re_records_and_tightens_the_mode(tmp_path: Path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(valid_bytes(calls=1))  # an earlier recording (only a recording is re-recorded)
    path.chmod(0o644)
    _record(path, "all")
    assert path.stat().st_mode & 0o777 == 0o600
    assert len(load_recording(path).calls) == 2


def test_none_forbids_recording(tmp_path: Path):
    path = tmp_path / "a.jsonl"
    with pytest.raises(RecordingDisabled):
        _record(path, "none")
    assert not path.exists()


def test_a_missing_directory_is_a_named_error(tmp_path: Path):
    with pytest.raises(RecordingUnwritable):
        _record(tmp_path / "no" / "such" / "a.jsonl")


def test_cli_shift_once_refuses_with_its_exit_code(tmp_path: Path):
    path = tmp_path / "cli.jsonl"
    code, _, err = run_cli("shift", "--record", str(path), "--seed", "1")
    assert code == 0, err
    before = snapshot(path)
    code, _out, err = run_cli("shift", "--record", str(path), "--seed", "1")
    assert code == RecordingExists.exit_code and err.count("\n") == 1 and "already exists" in err
    assert snapshot(path) == before


# --- check-recording ------------------------------------------------------------------------


def test_check_recording_passes_a_clean_synthetic_recording(tmp_path: Path):
    path = tmp_path / "clean.jsonl"
    _record(path)
    code, out, err = run_cli("check-recording", str(path))
    assert code == 0, out + err
    assert out.count("\n") == 1 and "OK" in out and err == ""


def test_a_scrubbed_recording_passes_the_secret_check(tmp_path: Path):
    path = tmp_path / "scrubbed.jsonl"
    record_shift(SecretHoldingClient(_leaky_replies()), [LEAKY_TEXT], path, responder=make_responder([]),
                 scrubber=_scrubber())
    assert not [f for f in check_file(path, _scrubber()) if f.kind.startswith("secret")]


FINDINGS = {
    "secret (openai-style key)": f"my key is {CANARY_KEY}",
    "secret (authorization header)": f"Authorization: {CANARY_AUTH}",
    "secret (bearer token)": f"token: Bearer {CANARY_BEARER}",
    "e-mail address": "write to jo.bloggs@gmail.com please",
    "phone number": "call me on +44 20 7946 0958",
    "payment card number (passes Luhn)": "card 4539 1488 0343 6467 exp 12/29",
    "IBAN (passes mod-97)": "pay to GB82 WEST 1234 5698 7654 32",
}


@pytest.mark.parametrize("kind", list(FINDINGS))
def test_check_recording_names_file_line_and_kind_never_the_value(tmp_path: Path, kind: str):
    path = tmp_path / "dirty.jsonl"
    text = FINDINGS[kind]
    path.write_bytes(dump(header(script=["hello"]), {"call": 1, "request": {"messages": [
        {"role": "user", "content": "hello"}, {"role": "user", "content": text}]}}))
    before = snapshot(path)
    code, out, err = run_cli("check-recording", str(path))
    assert code == RecordingNotClean.exit_code
    assert f"{path}:2: {kind}" in out
    shown = (out + err).replace(str(path), "")  # a tmp path may hold the same digits
    assert text not in shown and text.split()[-1] not in shown
    assert err.count("\n") == 1 and err.startswith("cafe: error: check-recording")
    assert snapshot(path) == before


def test_check_recording_finds_a_header_in_a_tool_argument_string(tmp_path: Path):
    path = tmp_path / "args.jsonl"
    path.write_bytes(dump(header(), {"x": LEAKY_ARGUMENTS}))
    kinds = {f.kind for f in check_file(path)}
    assert {"secret (authorization header)", "secret (openai-style key)", "secret (api-key field)"} <= kinds


def test_check_recording_accepts_synthetic_look_alikes(tmp_path: Path):
    synthetic = [
        "jo@example.com", "barista@cafe.test", "+44 7700 900123", "07700 900456", "555-0142",
        "4242 4242 4242 4242", "ticket 123456", "2026-11-29T10:24:59.708435Z", "chatcmpl-1234567890abc",
        "0" * 64, "£4.50 for 2", "call_1_2", "1732870000000000000",
    ]
    for text in synthetic:
        assert customer_data_kinds(text) == [], text


def test_check_recording_scans_text_that_is_not_json(tmp_path: Path):
    path = tmp_path / "notes.txt"
    path.write_text("not json: jo.bloggs@gmail.com\n")
    assert [(f.line, f.kind) for f in check_file(path)] == [(1, "e-mail address")]


def test_check_recording_counts_every_file_and_names_missing_ones(tmp_path: Path):
    clean, dirty = tmp_path / "clean.jsonl", tmp_path / "dirty.jsonl"
    _record(clean)
    dirty.write_text(json.dumps({"note": "mail jo.bloggs@gmail.com"}) + "\n")
    code, out, _ = run_cli("check-recording", str(clean), str(dirty))
    assert code == RecordingNotClean.exit_code and out.count("\n") == 1 and str(dirty) in out
    code, _, err = run_cli("check-recording", str(tmp_path / "nope.jsonl"))
    assert code == RecordingNotFound.exit_code and err.count("\n") == 1


def test_check_recording_extra_pattern_option(tmp_path: Path):
    path = tmp_path / "pin.jsonl"
    path.write_text(json.dumps({"note": f"pin {EXTRA_SECRET}"}) + "\n")
    assert run_cli("check-recording", str(path))[0] == 0
    code, out, _ = run_cli("check-recording", "--pattern", EXTRA_PATTERN, str(path))
    assert code == RecordingNotClean.exit_code and "configured pattern" in out and EXTRA_SECRET not in out


def test_luhn_and_iban_checks():
    assert luhn_ok("4539148803436467") and not luhn_ok("4539148803436468")
    assert iban_ok("GB82 WEST 1234 5698 7654 32") and not iban_ok("GB83 WEST 1234 5698 7654 32")


def test_a_scrubbed_shift_still_replays_with_a_matching_transcript(tmp_path: Path, monkeypatch):
    # The end line's digest is of the scrubbed conversation, which is what a replay reproduces.
    monkeypatch.setenv("CAFE_SCRUB_PATTERNS", EXTRA_PATTERN)
    path = tmp_path / "leaky.jsonl"
    record_shift(SecretHoldingClient(_leaky_replies()), [LEAKY_TEXT], path,
                 responder=make_responder([("approve", None)]), decisions=[("approve", None)])
    _assert_no_canary(path)
    code, out, err = run_cli("replay", str(path))
    assert code == 0, err
    assert "transcript matches" in out



# --- the keyword table ------------------------------------------------------------------------


def test_the_keyword_table_is_what_the_secret_patterns_give() -> None:
    from cafe import _scan_generate

    assert _scan_generate.TABLE.read_text(encoding="utf-8") == _scan_generate.table_text(), (
        f"cafe/{_scan_generate.TABLE.name} is not what the secret patterns give: run `{_scan_generate.REGENERATE}`")


def test_every_keyword_of_the_secret_patterns_is_found_in_a_line() -> None:
    from cafe import _scan_keywords
    from cafe.privacy import _SECRET_KEY, DEFAULT_SECRET_PATTERNS

    found = _scan_keywords.keywords([pattern for _, pattern in DEFAULT_SECRET_PATTERNS],
                                    key_pattern=_SECRET_KEY.pattern)
    assert found is not None
    folded, cased = found
    assert len(folded) > 100 and len(cased) > 10
    scrubber = Scrubber()
    for keyword in [*folded, *cased]:
        for line in (keyword, b'{"content": "a latte ' + keyword + b' and a croissant"}'):
            assert scrubber._may_match_pattern_bytes(line), keyword
    for keyword in folded:  # what ignores case is found in capitals too
        assert scrubber._may_match_pattern_bytes(b"a latte " + keyword.upper() + b" please"), keyword
    assert not scrubber.may_need_scrubbing(json.dumps({"content": "A latte, please", "usage": {"prompt_tokens": 3}}))


def test_a_configured_pattern_is_searched_for_by_its_own_keywords() -> None:
    scrubber = Scrubber(extra_patterns=[r"zebra-[0-9]{6}"])
    assert not scrubber.may_need_scrubbing('{"content": "a zebra crossing"}')
    assert scrubber.may_need_scrubbing('{"content": "ticket zebra-123456"}')
    assert scrubber.may_need_scrubbing('{"content": "Authorization: Basic abcdefgh"}')  # the defaults stay
    # A pattern with no literal text to look for makes every line walk.
    assert Scrubber(extra_patterns=[r"\w{12}"]).may_need_scrubbing('{"content": "a latte"}')


def test_the_default_scrubber_reads_no_pattern_and_writes_nothing() -> None:
    import subprocess
    import sys

    program = ("import sys, cafe, cafe.privacy; cafe.privacy.Scrubber().may_need_scrubbing(b'x');"
               "print(sorted(m for m in sys.modules if m in ('cafe._scan_keywords', 're._parser')))")
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert "cafe._scan_keywords" not in result.stdout, result.stdout
