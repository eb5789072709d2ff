"""The OTLP exporters' TLS comes from the environ handed to `configure()`, for both signals and
both protocols, the signal-specific variable winning. Before, the SDK's exporters read the
certificate, client key and client certificate (and gRPC's INSECURE) from `os.environ`: one set
there was used although the environ handed in said nothing, and one handed in was only
checked, never used; a gRPC client certificate without its key aborted the process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
import requests
from opentelemetry.exporter.otlp.proto.grpc import exporter as sdk_grpc_exporter

from cafe.errors import ConfigurationError
from cafe_otel import configure

from .conftest import closed_port

ROOT = Path(__file__).resolve().parents[2]
SIGNALS = ("", "TRACES_", "METRICS_")
KINDS = ("CERTIFICATE", "CLIENT_KEY", "CLIENT_CERTIFICATE", "INSECURE")
HTTP, GRPC = "http/protobuf", "grpc"


@pytest.fixture(autouse=True)
def no_tls_in_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    for signal in SIGNALS:
        for kind in KINDS:
            monkeypatch.delenv(f"OTEL_EXPORTER_OTLP_{signal}{kind}", raising=False)


@pytest.fixture
def pem(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A file of the given name whose content is its name (so a reader can be told apart)."""
    def make(name: str) -> str:
        path = tmp_path / name
        path.write_bytes(name.encode())
        return str(path)
    return make


@pytest.fixture
def sessions(monkeypatch: pytest.MonkeyPatch) -> list[requests.Session]:
    """Every requests.Session made (ours or the SDK transport's), in order: traces' first."""
    made: list[requests.Session] = []

    class Recorded(requests.Session):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    monkeypatch.setattr(requests, "Session", Recorded)
    return made


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every gRPC ssl_channel_credentials call (ours, or the SDK's reading os.environ), in order."""
    calls: list[dict[str, Any]] = []
    real = grpc.ssl_channel_credentials

    def recorded(root_certificates: bytes | None = None, private_key: bytes | None = None,
                 certificate_chain: bytes | None = None) -> grpc.ChannelCredentials:
        calls.append({"root": root_certificates, "key": private_key, "chain": certificate_chain})
        return real(root_certificates, private_key, certificate_chain)

    monkeypatch.setattr(grpc, "ssl_channel_credentials", recorded)
    monkeypatch.setattr(sdk_grpc_exporter, "ssl_channel_credentials", recorded)
    return calls


def _configure(protocol: str, environ: dict[str, str], scheme: str = "https") -> None:
    handle = configure("svc", protocol=protocol, endpoint=f"{scheme}://127.0.0.1:{closed_port()}",
                       environ=environ, metrics=True)
    handle.shutdown(0.0)


# --- a bad file handed in is the named error ------------------------------------------------

@pytest.mark.parametrize("protocol", [HTTP, GRPC])
@pytest.mark.parametrize("variable", [f"OTEL_EXPORTER_OTLP_{signal}{kind}" for signal in SIGNALS
                                      for kind in ("CERTIFICATE", "CLIENT_KEY", "CLIENT_CERTIFICATE")])
def test_a_missing_file_handed_in_is_named_though_the_process_lacks_it(
    tmp_path: Path, protocol: str, variable: str
) -> None:
    assert variable not in os.environ
    with pytest.raises(ConfigurationError) as raised:
        _configure(protocol, {variable: str(tmp_path / "absent.pem")})
    assert str(raised.value) == f"{variable}: no file can be read at that path" and raised.value.exit_code == 20


# --- OTLP/HTTP -------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"])
@pytest.mark.parametrize("signal", SIGNALS)
def test_http_a_file_set_only_in_the_process_is_not_used(
    monkeypatch: pytest.MonkeyPatch, pem: Any, sessions: list[requests.Session], signal: str, kind: str
) -> None:
    monkeypatch.setenv(f"OTEL_EXPORTER_OTLP_{signal}{kind}", pem("process.pem"))
    if kind == "CLIENT_KEY":  # the SDK reads a key only with its certificate
        monkeypatch.setenv(f"OTEL_EXPORTER_OTLP_{signal}CLIENT_CERTIFICATE", pem("process-cert.pem"))
    _configure(HTTP, {})
    assert len(sessions) == 2  # one a signal
    assert [(session.verify, session.cert) for session in sessions] == [(True, None), (True, None)]


def test_http_the_files_handed_in_are_what_each_signal_sends_with(
    monkeypatch: pytest.MonkeyPatch, pem: Any, sessions: list[requests.Session]
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", pem("process-ca.pem"))
    _configure(HTTP, {
        "OTEL_EXPORTER_OTLP_CERTIFICATE": pem("ca.pem"),
        "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": pem("traces-ca.pem"),
        "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": pem("client.pem"),
        "OTEL_EXPORTER_OTLP_CLIENT_KEY": pem("client.key"),
        "OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY": pem("metrics-client.key"),
    })
    shown = [(Path(str(s.verify)).name, tuple(Path(part).name for part in s.cert)) for s in sessions]
    assert shown == [("traces-ca.pem", ("client.pem", "client.key")),
                     ("ca.pem", ("client.pem", "metrics-client.key"))]


def test_http_a_client_certificate_alone_is_one_pem_with_its_key(pem: Any, sessions: list[requests.Session]) -> None:
    _configure(HTTP, {"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": pem("both.pem")})
    assert [Path(str(session.cert)).name for session in sessions] == ["both.pem", "both.pem"]


# --- gRPC ------------------------------------------------------------------------------------

@pytest.mark.parametrize("signal", SIGNALS)
def test_grpc_a_certificate_set_only_in_the_process_is_not_used(
    monkeypatch: pytest.MonkeyPatch, pem: Any, credentials: list[dict[str, Any]], signal: str
) -> None:
    monkeypatch.setenv(f"OTEL_EXPORTER_OTLP_{signal}CERTIFICATE", pem("process.pem"))
    _configure(GRPC, {})
    assert credentials and all(call["root"] is None for call in credentials), credentials


def test_grpc_the_files_handed_in_are_what_each_signal_trusts_and_presents(
    monkeypatch: pytest.MonkeyPatch, pem: Any, credentials: list[dict[str, Any]]
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", pem("process-ca.pem"))
    _configure(GRPC, {
        "OTEL_EXPORTER_OTLP_CERTIFICATE": pem("ca.pem"),
        "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE": pem("metrics-ca.pem"),
        "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE": pem("traces-client.pem"),
        "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY": pem("traces-client.key"),
    })
    assert credentials == [
        {"root": b"ca.pem", "key": b"traces-client.key", "chain": b"traces-client.pem"},
        {"root": b"metrics-ca.pem", "key": None, "chain": None},
    ]


def test_grpc_insecure_handed_in_is_honoured_per_signal(credentials: list[dict[str, Any]]) -> None:
    # An http:// endpoint is plain gRPC unless INSECURE says false; https:// is TLS whatever it says.
    _configure(GRPC, {"OTEL_EXPORTER_OTLP_TRACES_INSECURE": "false"}, scheme="http")
    assert credentials == [{"root": None, "key": None, "chain": None}]  # traces only
    credentials.clear()
    _configure(GRPC, {"OTEL_EXPORTER_OTLP_INSECURE": "FALSE", "OTEL_EXPORTER_OTLP_METRICS_INSECURE": "true"},
               scheme="http")
    assert len(credentials) == 1  # traces TLS, metrics plain
    credentials.clear()
    _configure(GRPC, {"OTEL_EXPORTER_OTLP_INSECURE": "true"}, scheme="https")
    assert len(credentials) == 2


def test_grpc_insecure_set_only_in_the_process_is_not_used(
    monkeypatch: pytest.MonkeyPatch, credentials: list[dict[str, Any]]
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "false")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_INSECURE", "false")
    _configure(GRPC, {}, scheme="http")
    assert credentials == []


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_METRICS_INSECURE"])
def test_an_insecure_that_is_not_true_or_false_is_named(variable: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        _configure(GRPC, {variable: "1"}, scheme="http")
    assert str(raised.value) == f"{variable}: '1' is not true or false"


# --- a key without its certificate ------------------------------------------------------------

@pytest.mark.parametrize("protocol", [HTTP, GRPC])
def test_a_client_key_without_its_certificate_is_named(pem: Any, protocol: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        _configure(protocol, {"OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY": pem("client.key")})
    assert str(raised.value).startswith("OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY is set but no client certificate is")


def test_a_grpc_client_certificate_without_its_key_is_exit_20_not_an_aborted_process(pem: Any) -> None:
    # gRPC's core aborts the interpreter (SIGABRT) on a certificate chain without a key.
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "OTEL_EXPORTER_OTLP_CERTIFICATE": pem("ca.pem"),
               "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": pem("client.pem")}
    environ.pop("CAFE_DEBUG", None)
    done = subprocess.run([sys.executable, "-m", "cafe", "shift", "--seed", "1",
                           f"--otlp=https://127.0.0.1:{closed_port()}"],
                          capture_output=True, text=True, env=environ, timeout=60, check=False,
                          cwd=Path(pem("x")).parent)
    assert done.returncode == 20, done.stderr
    assert done.stderr.startswith("cafe: error: OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE is set but no client key is")
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize("variable", ["OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
                                      "OTEL_PYTHON_EXPORTER_OTLP_GRPC_METRICS_CREDENTIAL_PROVIDER"])
def test_the_sdks_credential_provider_is_refused_not_silently_skipped(variable: str) -> None:
    # The exporters are handed their TLS in full, so the SDK would never consult it.
    with pytest.raises(ConfigurationError) as raised:
        _configure(GRPC, {variable: "my_provider"})
    assert str(raised.value).startswith(f"{variable}: a credential provider is not offered (")
    assert "my_provider" not in str(raised.value)
