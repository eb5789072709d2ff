"""A live API key that no HTTP header can carry (non-ASCII, a control character, a space:
a paste gone wrong) is a configuration error (exit 20) that says where, not what; it was
an internal error (exit 70, UnicodeEncodeError inside the HTTP client) or a connection
error that blamed the endpoint."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cafe.cli import main
from cafe.clients.settings import ApiKeyUnsendable, LiveSettings, Secret

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
                load_plugins=lambda warn: [])
    assert code == 20 and err.getvalue().count("\n") == 1
    assert err.getvalue().startswith("cafe: error: OPENAI_API_KEY holds a non-ASCII character at character 4")


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=8, max_size=40))
def test_every_visible_ascii_key_is_accepted(key: str) -> None:
    assert LiveSettings.from_env({**BASE, "CAFE_API_KEY": key}).api_key.reveal() == key


def test_no_repr_shows_a_user_password_or_key_in_the_base_url(tmp_path) -> None:
    from cafe.clients.live import LiveClient
    from cafe.recording import RecordingClient

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
