"""TLS of the OTLP exporters, read from the environ handed to `configure()`.

For each signal (`traces`, `metrics`) and each setting, the signal-specific variable wins over
the general one, as the specification says:

- `OTEL_EXPORTER_OTLP_(SIGNAL_)CERTIFICATE`: the CA certificate(s) the collector's is checked against;
- `OTEL_EXPORTER_OTLP_(SIGNAL_)CLIENT_KEY` and `..._CLIENT_CERTIFICATE`: the client's key pair (mTLS);
- `OTEL_EXPORTER_OTLP_(SIGNAL_)INSECURE` (gRPC only, `true` or `false`): whether an endpoint that is
  not `https://` is spoken to without TLS (default `true` for `http://`; `https://` is always TLS).

The SDK's exporters read each of these from `os.environ` when they are not handed a value, and
cannot be told "none": so every choice is made here and handed over in full. gRPC gets
`insecure` and, for TLS, `credentials` built from the files; OTLP/HTTP gets the three file
arguments and a `requests.Session` of ours on which the choice is set last (the session is what
the exporter sends with, so what it would have read from `os.environ` for an argument left
empty never applies). The files were already checked to be readable regular files
(`cafe_otel._config.signal`); a key without its certificate is refused here: gRPC would abort
the whole process on it, and requests would silently send no client certificate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from cafe_otel._config.parse import GRPC, TelemetryConfigError, first, shown
from cafe_otel._config.variables import (
    CERTIFICATE,
    CLIENT_CERTIFICATE,
    CLIENT_KEY,
    CREDENTIAL_PROVIDER_VARIABLES,
    INSECURE,
    Signal,
    otlp_variable,
    otlp_variables,
)


@dataclass(frozen=True)
class TlsFile:
    variable: str  # the variable it was read from, for errors
    path: str

    def read(self) -> bytes:
        try:
            with open(self.path, "rb") as source:
                return source.read()
        except OSError:  # removed or made unreadable since it was checked
            raise TelemetryConfigError(f"{self.variable}: no file can be read at that path") from None


@dataclass(frozen=True)
class TlsSettings:
    """One signal's TLS choice; empty: no files of the user's, TLS only for https://."""

    certificate: TlsFile | None = None
    client_key: TlsFile | None = None
    client_certificate: TlsFile | None = None
    insecure: bool | None = None  # the INSECURE variable; None when it is not set

    def grpc_insecure(self, endpoint: str) -> bool:
        if urlsplit(endpoint).scheme == "https":
            return False  # as the SDK does: the scheme asks for TLS, whatever INSECURE says
        return True if self.insecure is None else self.insecure

    def grpc_credentials(self) -> Any:
        """`grpc.ChannelCredentials` from the files; none given: gRPC's default roots, no client pair."""
        import grpc  # type: ignore[import-untyped]

        return grpc.ssl_channel_credentials(
            root_certificates=self.certificate.read() if self.certificate else None,
            private_key=self.client_key.read() if self.client_key else None,
            certificate_chain=self.client_certificate.read() if self.client_certificate else None,
        )

    def file_arguments(self) -> tuple[str | None, str | None, str | None]:
        """The OTLP/HTTP exporter's `certificate_file`, `client_key_file`, `client_certificate_file`."""
        return _path(self.certificate), _path(self.client_key), _path(self.client_certificate)

    def set_on(self, session: Any) -> None:
        """Make `session` (the `requests.Session` the HTTP exporter was handed) verify and
        present exactly these files, whatever the exporter read from `os.environ`."""
        session.verify = self.certificate.path if self.certificate else True
        if self.client_certificate is None:
            session.cert = None
        elif self.client_key is None:  # one PEM file holding both, as requests allows
            session.cert = self.client_certificate.path
        else:
            session.cert = (self.client_certificate.path, self.client_key.path)


def _path(found: TlsFile | None) -> str | None:
    return found.path if found else None


def _file(env: Mapping[str, str], signal: Signal, kind: str) -> TlsFile | None:
    found = first(env, *otlp_variables(kind, signal))
    return TlsFile(*found) if found else None


# CREDENTIAL_PROVIDER_VARIABLES name the Python SDK's own (experimental) way to bring
# credentials: an entry point. The exporters are handed their TLS in full, so it would never
# be consulted; it is refused rather than ignored.


def resolve_tls(env: Mapping[str, str], signal: Signal, protocol: str) -> TlsSettings:
    """`signal`'s TLS settings from `env`, checked for `protocol`."""
    for variable in CREDENTIAL_PROVIDER_VARIABLES:
        if env.get(variable, "").strip():
            raise TelemetryConfigError(
                f"{variable}: a credential provider is not offered (the exporters' TLS comes from "
                f"{otlp_variable(CERTIFICATE)}, _{CLIENT_KEY} and _{CLIENT_CERTIFICATE}); unset it")
    insecure: bool | None = None
    found = first(env, *otlp_variables(INSECURE, signal))
    if found is not None:
        variable, raw = found
        if raw.lower() not in ("true", "false"):
            raise TelemetryConfigError(f"{variable}: {shown(raw)} is not true or false")
        insecure = raw.lower() == "true"
    tls = TlsSettings(_file(env, signal, CERTIFICATE), _file(env, signal, CLIENT_KEY),
                      _file(env, signal, CLIENT_CERTIFICATE), insecure)
    if tls.client_key is not None and tls.client_certificate is None:
        raise TelemetryConfigError(
            f"{tls.client_key.variable} is set but no client certificate is "
            f"({otlp_variable(CLIENT_CERTIFICATE, signal)} or {otlp_variable(CLIENT_CERTIFICATE)}): "
            "a client key is used only with its certificate")
    if protocol == GRPC and tls.client_certificate is not None and tls.client_key is None:
        raise TelemetryConfigError(
            f"{tls.client_certificate.variable} is set but no client key is "
            f"({otlp_variable(CLIENT_KEY, signal)} or {otlp_variable(CLIENT_KEY)}): "
            "gRPC needs the key and the certificate as two files")
    return tls
