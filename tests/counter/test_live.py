"""The live client against a local OpenAI-compatible server on 127.0.0.1: a recorded shift
replays offline, and the API key stays out of every repr, error, trace and recording."""

from __future__ import annotations

import json
import socket
import traceback

import pytest

from cafe import ConfigurationError, MissingSettings, ModelCallError, TickClock, Tracer
from cafe.counter import (
    DEFAULT_SCRIPT,
    TOOL_SCHEMAS,
    LiveClient,
    LiveSettings,
    ScriptedClient,
    TracingClient,
    get_client,
    make_responder,
    record_shift,
    replay_shift,
    run_shift,
    transcript,
)
from cafe.counter.clients import Secret

from .helpers import chat_server

KEY = "sk-canary-3f9a1c7e5b2d4f6a8c0e"
local = pytest.mark.local_server


def _settings(server, key=KEY, model="local-test-model"):
    return LiveSettings(server.base_url, Secret(key), model)


def _approve():
    return make_responder([("approve", None)])


def _assert_no_key(*texts):
    for text in texts:
        assert KEY not in text
        assert KEY[3:] not in text  # not even without its prefix


# --- settings ---------------------------------------------------------------------------

ALL_NAMES = ["CAFE_BASE_URL", "OPENAI_BASE_URL", "CAFE_API_KEY", "OPENAI_API_KEY", "CAFE_MODEL", "OPENAI_MODEL"]


def test_missing_settings_is_one_error_naming_every_missing_variable():
    with pytest.raises(MissingSettings) as caught:
        LiveSettings.from_env({})
    text = str(caught.value)
    for name in ALL_NAMES:
        assert name in text
    assert len(caught.value.missing) == 3


def test_missing_settings_names_only_what_is_missing_and_never_the_key():
    with pytest.raises(MissingSettings) as caught:
        LiveSettings.from_env({"OPENAI_API_KEY": KEY, "CAFE_MODEL": "   "})
    text = str(caught.value)
    assert "CAFE_BASE_URL" in text and "CAFE_MODEL" in text  # blank counts as missing
    assert "API_KEY" not in text
    _assert_no_key(text, repr(caught.value))


def test_get_client_live_mode_without_settings_raises_missing_settings():
    with pytest.raises(MissingSettings) as caught:
        get_client({"COURSE_MODE": "live"})
    assert all(name in str(caught.value) for name in ALL_NAMES)


def test_cafe_settings_win_over_openai_fallbacks():
    settings = LiveSettings.from_env({
        "CAFE_BASE_URL": "http://127.0.0.1:1/v1", "OPENAI_BASE_URL": "http://elsewhere/v1",
        "OPENAI_API_KEY": KEY, "OPENAI_MODEL": "fallback-model",
    })
    assert settings.base_url == "http://127.0.0.1:1/v1"
    assert settings.api_key.reveal() == KEY
    assert settings.model == "fallback-model"
    assert (settings.server_address, settings.server_port) == ("127.0.0.1", 1)
    _assert_no_key(repr(settings), str(settings), repr(settings.api_key), f"{settings.api_key}")


@pytest.mark.parametrize(
    "environ",
    [{}, {"COURSE_MODE": "offline"}, {"CAFE_MODE": "offline", "COURSE_MODE": "live"}, {"CAFE_MODE": " Offline "},
     {"CAFE_MODE": "", "COURSE_MODE": ""}],
)
def test_get_client_is_offline_unless_live_is_asked_for(environ):
    assert isinstance(get_client(environ), ScriptedClient)


@pytest.mark.parametrize(("environ", "variable"), [
    ({"COURSE_MODE": "true"}, "COURSE_MODE"),
    ({"COURSE_MODE": "LIVE-ish"}, "COURSE_MODE"),
    ({"CAFE_MODE": "1"}, "CAFE_MODE"),
    ({"CAFE_MODE": "on", "COURSE_MODE": "live"}, "CAFE_MODE"),
    ({"CAFE_MODE": "offline", "COURSE_MODE": "yes"}, "COURSE_MODE"),
])
def test_a_mode_other_than_live_or_offline_is_refused_naming_the_variable(environ, variable):
    with pytest.raises(ConfigurationError) as caught:
        get_client(environ)
    text = str(caught.value)
    assert text.startswith(f"{variable}: ") and "live" in text and "offline" in text
    assert environ[variable] not in text.split(":", 1)[1].replace("live or offline", "")


def test_cafe_mode_wins_over_the_course_mode_alias():
    environ = {"CAFE_MODE": "live", "COURSE_MODE": "offline", "CAFE_BASE_URL": "http://127.0.0.1:9/v1",
               "CAFE_API_KEY": KEY, "CAFE_MODEL": "m"}
    assert isinstance(get_client(environ), LiveClient)


def test_get_client_live_builds_a_live_client_without_calling_anything(network_attempts):
    client = get_client({"CAFE_MODE": "live", "CAFE_BASE_URL": "http://127.0.0.1:9/v1",
                         "CAFE_API_KEY": KEY, "CAFE_MODEL": "m"})
    assert isinstance(client, LiveClient)
    assert client.calls == 0 and client.model == "m"
    _assert_no_key(repr(client), repr(TracingClient(client, Tracer())), str(vars(client).get("_settings")))
    assert network_attempts == []


def test_offline_tests_cannot_reach_the_network(network_attempts):
    client = LiveClient(LiveSettings("http://127.0.0.1:9/v1", Secret(KEY), "m"), max_retries=0)
    with pytest.raises(ModelCallError) as caught:
        client.chat([{"role": "user", "content": "hello"}])
    assert "failed" in str(caught.value)
    assert ("127.0.0.1", 9) in network_attempts  # the guard refused the connect
    network_attempts.clear()
    _assert_no_key(str(caught.value))


def test_offline_tests_cannot_resolve_or_connect_anywhere(network_attempts):
    with pytest.raises(OSError):
        socket.create_connection(("api.openai.com", 443), timeout=2)
    with pytest.raises(ConnectionRefusedError), socket.socket() as sock:
        sock.connect(("127.0.0.1", 9))
    assert network_attempts == ["api.openai.com", ("127.0.0.1", 9)]
    network_attempts.clear()


# --- against the local server -----------------------------------------------------------

@local
def test_live_shift_records_then_replays_offline_identically(tmp_path):
    path = tmp_path / "live.jsonl"
    with chat_server(KEY) as server:
        environ = {"COURSE_MODE": "live", "CAFE_BASE_URL": server.base_url, "CAFE_API_KEY": KEY,
                   "CAFE_MODEL": "local-test-model"}
        live = get_client(environ)
        assert isinstance(live, LiveClient)
        run, tracer = record_shift(live, DEFAULT_SCRIPT, path, responder=_approve(),
                                   tracer=Tracer(clock=TickClock()))
        assert run.stop_reason == "answered"
        assert live.calls == len(server.requests) == 5
        assert server.authorizations == [f"Bearer {KEY}"] * 5
        first = server.requests[0]
        assert first["model"] == "local-test-model"
        assert [t["function"]["name"] for t in first["tools"]] == [t["function"]["name"] for t in TOOL_SCHEMAS]
        assert first["messages"][-1] == {"role": "user", "content": DEFAULT_SCRIPT[0]}
        seen = len(server.requests)
    # The server is gone: a replay that tried to call it would fail.
    replays = [
        replay_shift(path, DEFAULT_SCRIPT, responder=_approve(), tracer=Tracer(clock=TickClock()))
        for _ in range(2)
    ]
    assert len(server.requests) == seen and live.calls == 5
    for replayed, replay_tracer in replays:
        assert transcript(replayed) == transcript(run)
        assert replay_tracer.render() == tracer.render()
    # The live answers match what the offline scripted model gives for the same shift.
    offline = run_shift(ScriptedClient(), DEFAULT_SCRIPT, _approve())
    assert transcript(offline) == transcript(run)
    # The key is nowhere: repr, trace, recording, conversation.
    dumped = json.dumps([root.as_dict() for root in tracer.roots])
    _assert_no_key(repr(live), tracer.render(), dumped, path.read_text(encoding="utf-8"), json.dumps(run.messages))


@local
def test_live_client_reduces_the_body_to_chat_completions_fields():
    with chat_server(KEY) as server:
        client = LiveClient(_settings(server), max_retries=0)
        response = client.chat([{"role": "user", "content": "A latte, please."}])
    assert set(response) == {"id", "model", "choices", "usage"}
    message = response["choices"][0]["message"]
    assert message["role"] == "assistant"
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["price_check"]
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"item": "latte"}
    assert response["choices"][0]["finish_reason"] == "tool_calls"
    usage = response["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
    assert "tools" not in server.requests[0]  # no tools given, none sent


@local
@pytest.mark.parametrize("mode,status", [("401", 401), ("500", 500)])
def test_endpoint_errors_are_model_call_errors_without_the_key(mode, status):
    with chat_server(KEY, mode=mode) as server:
        client = LiveClient(_settings(server), max_retries=0)
        with pytest.raises(ModelCallError) as caught:
            client.chat([{"role": "user", "content": "hello"}])
        assert len(server.requests) == 1
    error = caught.value
    text = str(error)
    assert f"HTTP {status}" in text and "127.0.0.1" in text
    assert error.__cause__ is None
    _assert_no_key(text, repr(error), "".join(traceback.format_exception(error)))


@local
def test_a_response_without_choices_is_a_model_call_error_not_a_crash():
    with chat_server(KEY, mode="no_choices") as server:
        client = LiveClient(_settings(server), max_retries=0)
        with pytest.raises(ModelCallError, match="choices: expected a non-empty array, found an array of 0"):
            run_shift(client, DEFAULT_SCRIPT, _approve())
        assert len(server.requests) == 1


@local
def test_a_wrong_key_is_refused_and_the_shift_error_is_traced_without_the_key():
    with chat_server(KEY) as server:
        wrong = "sk-canary-wrong-0000000000000"
        client = LiveClient(LiveSettings(server.base_url, Secret(wrong), "m"), max_retries=0)
        tracer = Tracer(clock=TickClock())
        with pytest.raises(ModelCallError, match="401"):
            run_shift(client, DEFAULT_SCRIPT, _approve(), tracer=tracer)
    assert server.authorizations == [f"Bearer {wrong}"]
    [generation] = tracer.generations()
    assert generation.error_type == "ModelCallError"
    assert tracer.roots[0].error_type == "ModelCallError"
    rendered = tracer.render() + json.dumps([r.as_dict() for r in tracer.roots])
    assert wrong not in rendered and KEY not in rendered


@local
def test_openai_fallback_settings_reach_the_server():
    with chat_server(KEY) as server:
        client = get_client({"COURSE_MODE": "live", "OPENAI_BASE_URL": server.base_url,
                             "OPENAI_API_KEY": KEY, "OPENAI_MODEL": "fallback-model"})
        client.chat([{"role": "user", "content": "hello"}])
    assert server.requests[0]["model"] == "fallback-model"
    assert server.authorizations == [f"Bearer {KEY}"]


@local
def test_unreachable_endpoint_is_a_model_call_error():
    # A port held bound but not listening refuses every connection; a port freed after use
    # could be taken by another program on a busy machine.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{held.getsockname()[1]}/v1"
        client = LiveClient(LiveSettings(url, Secret(KEY), "m"), max_retries=0, timeout=5)
        with pytest.raises(ModelCallError) as caught:
            client.chat([{"role": "user", "content": "hello"}])
    assert "APIConnectionError" in str(caught.value)
    _assert_no_key(str(caught.value))


@pytest.mark.parametrize("url", ["127.0.0.1:8000/v1", "ftp://models.example/v1", "http:///v1"])
def test_a_base_url_without_scheme_or_host_is_refused_without_showing_the_key(url):
    with pytest.raises(ConfigurationError) as caught:
        LiveSettings.from_env({"CAFE_BASE_URL": url, "CAFE_API_KEY": KEY, "CAFE_MODEL": "m"})
    assert str(caught.value).startswith("CAFE_BASE_URL: ")
    assert "is not http or https" in str(caught.value) or "has no host" in str(caught.value)
    _assert_no_key(str(caught.value))
