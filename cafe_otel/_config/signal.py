"""One signal's OTLP exporter settings, resolved by one function for traces and metrics alike.

For each setting the order is: `configure()`'s explicit argument, then the signal's own
variable (`OTEL_EXPORTER_OTLP_TRACES_HEADERS`), then the general one
(`OTEL_EXPORTER_OTLP_HEADERS`), then the default, as the OTLP exporter specification says.
A signal's own variable never applies to the other signal. The signal's own endpoint is a
full URL used as is; the general one (and the explicit argument) is a base to which
OTLP/HTTP appends `/v1/<signal>`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from cafe_otel._config.parse import (
    GRPC,
    HTTP,
    TelemetryConfigError,
    check_endpoint,
    display_endpoint,
    first,
    key_value_pairs,
    millis_in_range,
    normalise_protocol,
    seconds_in_range,
)
from cafe_otel._config.tls import TlsSettings, resolve_tls
from cafe_otel._config.variables import (
    COMPRESSION,
    ENDPOINT,
    HEADERS,
    PROTOCOL,
    TIMEOUT,
    TLS_FILES,
    Signal,
    otlp_variables,
)

DEFAULT_PROTOCOL = GRPC  # what the Python distro defaults to; the collector's 4317
DEFAULT_ENDPOINTS = {GRPC: "http://localhost:4317", HTTP: "http://localhost:4318"}
DEFAULT_EXPORT_TIMEOUT = 5.0
ENDPOINT_ARGUMENT = "endpoint argument (--otlp)"
TRACES_PATH = "/v1/traces"

# Headers the exporter writes itself (or HTTP/2 and gRPC own): one of the user's would
# replace or duplicate it and break the request.
RESERVED_HEADERS = frozenset((
    "content-type", "content-length", "content-encoding", "transfer-encoding", "host", "te",
    "connection", "keep-alive", "upgrade", "proxy-connection", "user-agent",
))
_HEADER_CHARACTERS = frozenset("0123456789abcdefghijklmnopqrstuvwxyz_.-")


@dataclass(frozen=True)
class OTLPOptions:
    """`configure()`'s explicit exporter arguments; None: not given (the environ decides).
    They apply to every signal."""

    endpoint: str | None = None
    protocol: str | None = None
    headers: Mapping[str, str] | None = None
    timeout: float | None = None  # seconds


@dataclass(frozen=True)
class SignalConfig:
    """Where and how one signal's OTLP exporter sends."""

    signal: Signal
    protocol: str
    endpoint: str
    headers: dict[str, str]  # keys lowercased and checked
    timeout: float  # seconds
    compression: str | None  # "gzip", "none" or None (not set)
    tls: TlsSettings = field(default_factory=TlsSettings)

    def __repr__(self) -> str:
        # Headers carry credentials and an endpoint URL may too: neither is shown as is.
        return (f"SignalConfig({self.signal!r}, protocol={self.protocol!r}, "
                f"endpoint={display_endpoint(self.endpoint)!r}, headers={sorted(self.headers)!r}, "
                f"timeout={self.timeout}, compression={self.compression!r})")


NO_OPTIONS = OTLPOptions()


def resolve_signal(signal: Signal, environ: Mapping[str, str], explicit: OTLPOptions = NO_OPTIONS) -> SignalConfig:
    """`signal`'s exporter settings: `explicit`, else its own variables, else the general ones."""
    if explicit.protocol is not None:
        protocol = normalise_protocol(explicit.protocol, "protocol argument")
    else:
        found = first(environ, *otlp_variables(PROTOCOL, signal))
        protocol = normalise_protocol(found[1], found[0]) if found else DEFAULT_PROTOCOL

    if explicit.headers is not None:
        headers = checked_headers(list(explicit.headers.items()), protocol, "headers argument")
    else:
        found = first(environ, *otlp_variables(HEADERS, signal))
        headers = checked_headers(key_value_pairs(found[1], found[0]), protocol, found[0]) if found else {}

    if explicit.timeout is not None:
        timeout = seconds_in_range(explicit.timeout, "export_timeout argument")
    else:
        found = first(environ, *otlp_variables(TIMEOUT, signal))
        timeout = millis_in_range(found[1], found[0]) if found else DEFAULT_EXPORT_TIMEOUT

    found = first(environ, *otlp_variables(COMPRESSION, signal))
    compression = found[1].lower() if found else None
    if found and compression not in ("gzip", "none"):
        raise TelemetryConfigError(f"{found[0]}: {found[1][:20]!r} is not gzip or none")

    for kind in TLS_FILES:
        found = first(environ, *otlp_variables(kind, signal))
        if found:
            check_tls_file(*found)
    return SignalConfig(signal, protocol, _endpoint(signal, explicit.endpoint, environ, protocol), headers,
                        timeout, compression, resolve_tls(environ, signal, protocol))


def _endpoint(signal: Signal, explicit: str | None, environ: Mapping[str, str], protocol: str) -> str:
    own_variable, general_variable = otlp_variables(ENDPOINT, signal)
    own = first(environ, own_variable)
    if explicit is None and own:
        return check_endpoint(own[1], own_variable)
    general = None if explicit else first(environ, general_variable)
    source = ENDPOINT_ARGUMENT if explicit else general_variable
    url = explicit or (general[1] if general else None) or DEFAULT_ENDPOINTS[protocol]
    if "://" not in url:
        url = "http://" + url
    check_endpoint(url, source)
    if protocol != HTTP:
        return url
    path, wanted = urlsplit(url).path, f"/v1/{signal}"
    if path in ("", "/"):
        return url.rstrip("/") + wanted
    if signal != "traces" and path.endswith(TRACES_PATH):  # a traces URL given as the base of both
        parts = urlsplit(url)
        return urlunsplit(parts._replace(path=path[: len(path) - len(TRACES_PATH)] + wanted))
    return url  # a path of the user's own: every signal goes there


def checked_headers(pairs: list[tuple[str, str]], protocol: str, source: str) -> dict[str, str]:
    """Header names lowercased (gRPC metadata keys must be, HTTP's are case-insensitive) and
    checked: a name no header can carry, a name given twice, a name the exporter or the
    transport owns, or a value that is not printable ASCII is a configuration error, named
    by the header's name or its position (a value may be a credential)."""
    found: dict[str, str] = {}
    for number, (key, value) in enumerate(pairs, start=1):
        name = key.strip().lower()
        if name.startswith(":") or (protocol == GRPC and name.startswith("grpc-")):
            raise TelemetryConfigError(
                f"OTLP header {number} in {source}: its name is one gRPC reserves "
                "(':' or 'grpc-' prefixed); remove it")
        if not name or not set(name) <= _HEADER_CHARACTERS:
            raise TelemetryConfigError(
                f"OTLP header {number} in {source}: its key is not a header name "
                "(letters, digits, '-', '_', '.')")
        if name in RESERVED_HEADERS:
            raise TelemetryConfigError(
                f"OTLP header {name!r} in {source}: the exporter writes that header itself; remove it")
        if name in found:
            raise TelemetryConfigError(f"OTLP header {name!r} in {source}: given more than once; keep one")
        if protocol == GRPC and name.endswith("-bin"):
            raise TelemetryConfigError(
                f"OTLP header {name!r} in {source}: binary (-bin) gRPC metadata is not supported")
        if any(not " " <= char <= "~" for char in value):
            raise TelemetryConfigError(
                f"OTLP header {name!r} in {source}: its value holds characters a header cannot carry "
                "(printable ASCII only)")
        found[name] = value
    return found


def check_tls_file(variable: str, path: str) -> None:
    """A TLS file variable names a readable regular file, checked before anything is built:
    the gRPC exporter reads it when it is built, where a missing one is a traceback, a
    directory an internal error and a FIFO a command that never ends."""
    try:
        found = os.stat(path)
    except (OSError, ValueError):
        raise TelemetryConfigError(f"{variable}: no file can be read at that path") from None
    if not stat.S_ISREG(found.st_mode):
        raise TelemetryConfigError(f"{variable}: the path is not a regular file (a PEM file is expected)")
    if not os.access(path, os.R_OK):
        raise TelemetryConfigError(f"{variable}: the file cannot be read (permission denied)")

