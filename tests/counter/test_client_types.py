"""The client protocols say what is true of the clients: read-only model/provider/calls that
wrappers satisfy, and the optional features (secrets, endpoint) as protocols of their own."""

from __future__ import annotations

import textwrap
import tomllib
from pathlib import Path

import pytest

from cafe.counter.clients.base import ChatClient, HoldsSecrets, NetworkClient, endpoint_of, secrets_of
from cafe.counter.clients.canned import CannedClient
from cafe.counter.clients.live import LiveClient
from cafe.counter.clients.scripted import ScriptedClient
from cafe.counter.clients.settings import LiveSettings
from cafe.counter.clients.tracing import TracingClient
from cafe.counter.recording_client import RecordingClient
from cafe.trace.tracer import Tracer

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-test-types-0123456789abcdef"


def _live() -> LiveClient:
    settings = LiveSettings.from_env(
        {"CAFE_BASE_URL": "http://127.0.0.1:9/v1", "CAFE_API_KEY": KEY, "CAFE_MODEL": "m-1"})
    return LiveClient(settings, max_retries=0)


def test_the_live_client_holds_its_key_and_names_its_endpoint() -> None:
    live = _live()
    assert isinstance(live, ChatClient) and isinstance(live, HoldsSecrets) and isinstance(live, NetworkClient)
    assert secrets_of(live) == [KEY]
    assert endpoint_of(live) == ("127.0.0.1", 9)


@pytest.mark.parametrize("client", [ScriptedClient(), CannedClient([])], ids=["scripted", "canned"])
def test_offline_clients_hold_no_secrets_and_have_no_endpoint(client: ChatClient) -> None:
    assert isinstance(client, ChatClient)
    assert not isinstance(client, HoldsSecrets) and not isinstance(client, NetworkClient)
    assert secrets_of(client) == []
    assert endpoint_of(client) == (None, None)


def test_wrappers_answer_for_their_inner_client_however_stacked(tmp_path: Path) -> None:
    traced = TracingClient(_live(), Tracer())
    recorded = RecordingClient(traced, tmp_path / "r.jsonl")
    try:
        assert secrets_of(recorded) == [KEY]
        assert endpoint_of(recorded) == ("127.0.0.1", 9)
        assert (recorded.model, recorded.provider, recorded.calls) == ("m-1", "openai", 0)
        offline = TracingClient(ScriptedClient(), Tracer())
        assert secrets_of(offline) == [] and endpoint_of(offline) == (None, None)
    finally:
        recorded.close()


def test_a_recording_scrubs_the_key_of_a_live_client_under_a_tracing_wrapper(tmp_path: Path) -> None:
    class Echo(ScriptedClient):
        """A live-like client (it holds a key) that answers with the key in its text."""

        def secrets(self) -> list[str]:
            return [KEY]

        def chat(self, messages, tools=None, temperature=0.0, tool_choice=None):
            response = super().chat(messages, tools, temperature, tool_choice)
            response["choices"][0]["message"]["content"] = f"your key is {KEY}"
            return response

    path = tmp_path / "r.jsonl"
    client = RecordingClient(TracingClient(Echo(), Tracer()), path)
    client.chat([{"role": "user", "content": "hello"}])
    client.close()
    text = path.read_text(encoding="utf-8")
    assert "your key is" in text and KEY not in text


def test_mypy_accepts_wrappers_as_chat_clients_and_rejects_what_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = pytest.importorskip("mypy.api")
    monkeypatch.setenv("MYPYPATH", str(REPO))  # this checkout's cafe, wherever pytest runs from
    snippet = tmp_path / "uses_clients.py"
    snippet.write_text(textwrap.dedent("""
        from cafe.counter.clients.base import ChatClient, HoldsSecrets, NetworkClient
        from cafe.counter.clients.live import LiveClient
        from cafe.counter.clients.scripted import ScriptedClient
        from cafe.counter.recording_client import RecordingClient
        from cafe.trace.tracer import Tracer
        from cafe.counter.clients.tracing import TracingClient


        def build(live: LiveClient) -> list[object]:
            traced: ChatClient = TracingClient(ScriptedClient(), Tracer())
            recorded: ChatClient = RecordingClient(traced, "r.jsonl")
            holder: HoldsSecrets = live
            endpoint: NetworkClient = live
            offline: NetworkClient = ScriptedClient()
            return [recorded, holder, endpoint, offline]
    """), encoding="utf-8")
    config = tmp_path / "mypy.ini"
    # The openai SDK is big and beside the point here: read as untyped, it checks in seconds.
    config.write_text("[mypy]\nstrict = True\nfollow_imports = silent\n"
                      "[mypy-openai,openai.*]\nfollow_imports = skip\n", encoding="utf-8")
    out, err, _ = api.run(["--config-file", str(config), "--cache-dir", str(tmp_path / "cache"),
                           "--no-error-summary", str(snippet)])
    errors = [line for line in out.splitlines() if ": error:" in line]
    # Exactly the one deliberate mistake: an offline client is no network client.
    mistake = snippet.read_text(encoding="utf-8").splitlines().index(
        "    offline: NetworkClient = ScriptedClient()") + 1
    assert len(errors) == 1, out + err
    assert f":{mistake}: error:" in errors[0] and '"ScriptedClient"' in errors[0], errors


def test_both_packages_ship_py_typed() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    package_data = config["tool"]["setuptools"]["package-data"]
    for package in ("cafe", "cafe_otel"):
        assert (REPO / package / "py.typed").is_file()
        assert "py.typed" in package_data[package]
