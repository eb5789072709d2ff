"""The live client's settings (cafe/counter/clients/settings.py): how long a call waits and how often
it is retried, and the API key an HTTP header can carry."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cafe.cli import main
from cafe.counter.cli import plugin as COUNTER
from cafe.counter.clients import LiveClient, LiveSettings, Secret, get_client
from cafe.counter.clients.settings import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    ApiKeyUnsendable,
    InvalidLiveSetting,
    parse_max_retries,
    parse_timeout,
)
from cafe.errors import ModelCallError
from tests.local_http import QuietHandler, serving

# How long a live call waits and how often it is retried: `CAFE_TIMEOUT` and `CAFE_MAX_RETRIES`
# (from the environment handed in), explicit arguments winning, so that a stuck endpoint holds
# a shift no longer than the user set.

KEY = "sk-timeout-canary-0123456789"
# Long enough that the old client (60 s an attempt) is still waiting when the server gives up.
HOLD_SECONDS = 5.0
TIMEOUT_MESSAGE = ("CAFE_TIMEOUT: expected a number of seconds above 0 and at most 3600, e.g. 30 or 2.5 "
                   "(the value given is not shown)")
RETRIES_MESSAGE = "CAFE_MAX_RETRIES: expected a whole number of retries from 0 to 10 (the value given is not shown)"


@contextmanager
def silent_server() -> Iterator[tuple[str, list[str]]]:
    """An HTTP server on 127.0.0.1 that reads each request and never answers it (it lets the
    connection go after HOLD_SECONDS, or when the test ends). Yields its base URL and the
    paths it was asked for, one per attempt."""
    done = threading.Event()
    seen: list[str] = []

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            self.read_body()
            seen.append(self.path)
            done.wait(HOLD_SECONDS)
            self.close_connection = True

    with serving(Handler, name="silent-test-server") as port:
        try:
            yield f"http://127.0.0.1:{port}/v1", seen
        finally:
            done.set()  # before the server shuts down: each held request waits on it


def _seen(seen: list[str], at_least: int) -> list[str]:
    """The paths the server was asked for, once it has handled `at_least` of them: on a busy
    machine its thread may read a request only after the client has given up on it."""
    deadline = time.monotonic() + 20.0
    while len(seen) < at_least and time.monotonic() < deadline:
        time.sleep(0.02)
    return list(seen)


def _live(base_url: str, **extra: str) -> dict[str, str]:
    return {"COURSE_MODE": "live", "CAFE_BASE_URL": base_url, "CAFE_API_KEY": KEY, "CAFE_MODEL": "m-1", **extra}


# --- against a server that never answers ---------------------------------------------------

@pytest.mark.local_server
def test_cafe_timeout_and_retries_bound_a_call_to_a_stuck_endpoint() -> None:
    with silent_server() as (url, seen):
        client = get_client(_live(url, CAFE_TIMEOUT="0.3", CAFE_MAX_RETRIES="0"))
        started = time.monotonic()
        with pytest.raises(ModelCallError) as raised:
            client.chat([{"role": "user", "content": "hello"}])
        waited = time.monotonic() - started
        paths = _seen(seen, 1)
    assert str(raised.value) == ("model endpoint 127.0.0.1 failed: APITimeoutError (no answer within 0.3 s, "
                                 "1 attempt; CAFE_TIMEOUT and CAFE_MAX_RETRIES set these)")
    assert paths == ["/v1/chat/completions"]  # no retry
    assert waited < HOLD_SECONDS  # the timeout ended it, not the server letting go


@pytest.mark.local_server
def test_cafe_max_retries_is_how_many_more_attempts_are_made() -> None:
    with silent_server() as (url, seen):
        client = get_client(_live(url, CAFE_TIMEOUT="0.2", CAFE_MAX_RETRIES="1"))
        with pytest.raises(ModelCallError, match=r"within 0\.2 s, 2 attempts;"):
            client.chat([{"role": "user", "content": "hello"}])
        paths = _seen(seen, 2)
    assert len(paths) == 2


@pytest.mark.local_server
def test_through_the_cli_a_stuck_endpoint_is_one_line_exit_21() -> None:
    out, err = io.StringIO(), io.StringIO()
    with silent_server() as (url, seen):
        code = main(["shift", "--seed", "1"], environ=_live(url, CAFE_TIMEOUT="0.3", CAFE_MAX_RETRIES="0"),
                    out=out, err=err, load_plugins=lambda warn: [COUNTER])
        paths = _seen(seen, 1)
    assert code == 21 and err.getvalue().count("\n") == 1, err.getvalue()
    assert err.getvalue().startswith("cafe: error: model endpoint 127.0.0.1 failed: APITimeoutError (no answer "
                                     "within 0.3 s, 1 attempt; CAFE_TIMEOUT and CAFE_MAX_RETRIES set these)")
    assert KEY not in err.getvalue() + out.getvalue() and len(paths) == 1


@pytest.mark.local_server
def test_explicit_arguments_win_over_the_environment() -> None:
    with silent_server() as (url, seen):
        settings = LiveSettings.from_env(_live(url, CAFE_TIMEOUT="30", CAFE_MAX_RETRIES="3"))
        client = LiveClient(settings, timeout=0.3, max_retries=0)
        assert (client.timeout, client.max_retries) == (0.3, 0)
        with pytest.raises(ModelCallError, match=r"within 0\.3 s, 1 attempt;") as raised:
            client.chat([{"role": "user", "content": "hello"}])
        paths = _seen(seen, 1)
    assert len(paths) == 1
    # The environment's variables could not change these: the remedy names the arguments.
    assert str(raised.value).endswith("set by the caller's timeout and max_retries arguments)")
    assert "CAFE_TIMEOUT" not in str(raised.value)


# --- reading and checking the settings ------------------------------------------------------

def test_the_defaults_are_kept_when_nothing_is_set() -> None:
    settings = LiveSettings.from_env(_live("http://127.0.0.1:9/v1", CAFE_TIMEOUT=" ", CAFE_MAX_RETRIES=""))
    assert (settings.timeout, settings.max_retries) == (DEFAULT_TIMEOUT, DEFAULT_MAX_RETRIES) == (60.0, 2)
    client = LiveClient(settings)
    assert (client.timeout, client.max_retries) == (60.0, 2)


def test_the_environment_handed_in_is_read_not_the_process_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAFE_TIMEOUT", "not a number")
    monkeypatch.setenv("CAFE_MAX_RETRIES", "7")
    client = get_client(_live("http://127.0.0.1:9/v1", CAFE_TIMEOUT="12.5"))
    assert isinstance(client, LiveClient)
    assert (client.timeout, client.max_retries) == (12.5, 2)


@pytest.mark.parametrize(("text", "seconds"), [("0.3", 0.3), (" 30 ", 30.0), ("3600", 3600.0), (".5", 0.5),
                                               ("2.", 2.0), ("0.001", 0.001)])
def test_a_timeout_is_plain_decimal_seconds(text: str, seconds: float) -> None:
    assert parse_timeout(text) == seconds


@pytest.mark.parametrize("text", ["0", "0.0", "-1", "3600.5", "nan", "inf", "1e3", "+5", "5s", "1_0", "٣",
                                  "sk-proj-0123456789abcdef", "9" * 40])
def test_a_bad_timeout_names_the_variable_and_what_it_takes_never_the_value(text: str) -> None:
    with pytest.raises(InvalidLiveSetting) as raised:
        LiveSettings.from_env(_live("http://127.0.0.1:9/v1", CAFE_TIMEOUT=text))
    assert str(raised.value) == TIMEOUT_MESSAGE and raised.value.exit_code == 20


@pytest.mark.parametrize(("text", "retries"), [("0", 0), (" 3 ", 3), ("10", 10), ("007", 7)])
def test_max_retries_is_a_whole_number(text: str, retries: int) -> None:
    assert parse_max_retries(text) == retries


@pytest.mark.parametrize("text", ["-1", "11", "2.0", "two", "1e1", "٣", "sk-proj-0123456789abcdef", "9" * 5000])
def test_a_bad_max_retries_names_the_variable_and_what_it_takes_never_the_value(text: str) -> None:
    with pytest.raises(InvalidLiveSetting) as raised:
        LiveSettings.from_env(_live("http://127.0.0.1:9/v1", CAFE_MAX_RETRIES=text))
    assert str(raised.value) == RETRIES_MESSAGE and raised.value.exit_code == 20


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_any_text_is_a_timeout_in_range_or_the_one_fixed_error(text: str) -> None:
    try:
        seconds = parse_timeout(text)
    except InvalidLiveSetting as error:
        assert str(error) == TIMEOUT_MESSAGE
    else:
        assert 0 < seconds <= 3600


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_any_text_is_a_retry_count_in_range_or_the_one_fixed_error(text: str) -> None:
    try:
        retries = parse_max_retries(text)
    except InvalidLiveSetting as error:
        assert str(error) == RETRIES_MESSAGE
    else:
        assert 0 <= retries <= 10


@pytest.mark.parametrize(("argument", "value"), [
    ("timeout", 0), ("timeout", -2.0), ("timeout", float("nan")), ("timeout", float("inf")), ("timeout", True),
    ("timeout", "30"), ("timeout", 10**400), ("max_retries", -1), ("max_retries", 11), ("max_retries", 1.0),
    ("max_retries", True),
])
def test_a_bad_explicit_argument_is_the_same_named_error(argument: str, value: object) -> None:
    settings = LiveSettings("http://127.0.0.1:9/v1", Secret(KEY), "m-1")
    with pytest.raises(InvalidLiveSetting, match=rf"^{argument} argument: expected "):
        LiveClient(settings, **{argument: value})  # type: ignore[arg-type]
    with pytest.raises(InvalidLiveSetting, match=rf"^the live {argument}: expected "):
        LiveSettings("http://127.0.0.1:9/v1", Secret(KEY), "m-1", **{argument: value})  # type: ignore[arg-type]


def test_through_the_cli_a_bad_value_is_one_line_exit_20() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["shift"], environ=_live("http://127.0.0.1:9/v1", CAFE_MAX_RETRIES=KEY), out=out, err=err,
                load_plugins=lambda warn: [COUNTER])
    assert (code, out.getvalue(), err.getvalue()) == (20, "", f"cafe: error: {RETRIES_MESSAGE}\n")


def test_the_settings_repr_shows_both() -> None:
    settings = LiveSettings("http://127.0.0.1:9/v1", Secret(KEY), "m-1", timeout=2.5, max_retries=0)
    assert repr(settings).endswith("timeout=2.5, max_retries=0)") and KEY not in repr(settings)


# A live API key that no HTTP header can carry (non-ASCII, a control character, a space: a
# paste gone wrong) is a configuration error (exit 20) that says where, not what, and never a
# connection error that blames the endpoint.

BASE = {"COURSE_MODE": "live", "CAFE_BASE_URL": "http://127.0.0.1:9/v1", "CAFE_MODEL": "m-1"}


@pytest.mark.parametrize(("key", "position", "kind"), [
    ("ключ-секрет-длинный", 1, "a non-ASCII character"),
    ("sk-0123456789\nabc", 14, "a control character"),
    ("sk-0123 456789", 8, "a space"),
    ("sk-0123456789\x7f", 14, "a control character"),
])
def test_an_unsendable_key_is_named_by_position_and_kind(key: str, position: int, kind: str) -> None:
    with pytest.raises(ApiKeyUnsendable) as raised:
        LiveSettings.from_env({**BASE, "CAFE_API_KEY": key})
    message = str(raised.value)
    assert message.startswith(f"CAFE_API_KEY holds {kind} at character {position}: ")
    assert key.strip() not in message and raised.value.exit_code == 20
    with pytest.raises(ApiKeyUnsendable):
        LiveSettings("http://127.0.0.1:9/v1", Secret(key), "m-1")


def test_through_the_cli_it_is_one_line_exit_20() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["shift"], environ={**BASE, "OPENAI_API_KEY": "sk-ключ-0123456789"}, out=out, err=err,
                load_plugins=lambda warn: [COUNTER])
    assert code == 20 and err.getvalue().count("\n") == 1
    assert err.getvalue().startswith("cafe: error: OPENAI_API_KEY holds a non-ASCII character at character 4")


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=8, max_size=40))
def test_every_visible_ascii_key_is_accepted(key: str) -> None:
    assert LiveSettings.from_env({**BASE, "CAFE_API_KEY": key}).api_key.reveal() == key


def test_no_repr_shows_a_user_password_or_key_in_the_base_url(tmp_path) -> None:
    from cafe.counter import RecordingClient
    from cafe.counter.clients.live import LiveClient

    settings = LiveSettings.from_env({**BASE, "CAFE_API_KEY": "sk-0123456789abcdef",
                                      "CAFE_BASE_URL": "http://jo:URL-PASSWORD@127.0.0.1:9/v1?key=URL-KEY#URL-FRAG"})
    client = LiveClient(settings, max_retries=0)
    recorder = RecordingClient(client, tmp_path / "r.jsonl")
    try:
        shown = repr(settings) + str(settings) + repr(client) + repr(recorder)
    finally:
        recorder.close()
    assert "URL-" not in shown and "sk-0123456789abcdef" not in shown
    assert "base_url='http://127.0.0.1:9/v1'" in repr(settings) and "base_url='http://127.0.0.1:9/v1'" in repr(client)
