"""What other libraries print while a `cafe` command exports telemetry: held, redacted.

The OTLP exporters log retries and failures through Python logging, and their text names
the endpoint as they were given it: with its query string (`?token=...`) and, for HTTP,
inside the transport's own error text. While a command runs, `ExporterLogCapture` holds
every WARNING-or-worse record of the `opentelemetry` and `grpc` loggers. The command's
single telemetry line names only the last one's kind (`last_kind`: an HTTP status, a gRPC
status code, an exception's class), never its text: that text quotes what the receiver
answered (an HTTP reason phrase, a gRPC status message), which is the receiver's to write
and may hold anything, a credential included. `CAFE_DEBUG=1` writes each record (redacted)
to stderr as it comes. Redaction is `redactor(settings)`: every credential the
settings hold (header values, the endpoint's user, password and query) is masked, and the
endpoint is shown as error texts show it (`display_endpoint`).

Lines logged after the command is done (an export thread the bounded shutdown left behind
saying "Shutdown in progress") must not reach Python's last-resort handler, which prints
to stderr: on exit a NullHandler stays on those loggers. Records still propagate to the
root logger, so an application's (or pytest's) own logging sees them as before.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable
from typing import Protocol
from urllib.parse import quote, unquote, urlsplit

from cafe_otel._config.settings import display_endpoint

LOGGERS = ("opentelemetry", "grpc")
MASK = "***"
# A query string on anything URL-like: `host:4317?token=x`, `/v1/traces?token=x`.
_QUERY = re.compile(r"(?<=[\w/\].:-])\?[^\s'\"()<>,]*")
# The user:password@ part of a URL.
_USERINFO = re.compile(r"(?<=//)[^/\s@'\"]+@")

Redactor = Callable[[str], str]


class Destination(Protocol):
    """What an exporter was told about where it sends (`Settings`, `MetricSettings`)."""

    @property
    def endpoint(self) -> str: ...

    @property
    def headers(self) -> dict[str, str]: ...


def _credentials(settings: Destination) -> list[str]:
    found = [value for value in settings.headers.values() if value]
    parts = urlsplit(settings.endpoint)
    for piece in (parts.username, parts.password, parts.query):
        if piece:
            found.append(piece)
    for item in parts.query.split("&"):
        value = item.partition("=")[2]
        if value:
            found.append(value)
    return found


def redactor(*destinations: Destination | None) -> Redactor:
    """A function that makes a text fit to print: no credential from any of `destinations`
    (each signal's settings), no query string, no user:password, each endpoint as our own
    error texts show it."""
    given = [found for found in destinations if found is not None]
    found = [secret for destination in given for secret in _credentials(destination)]
    forms = {form for secret in found for form in (secret, unquote(secret), quote(secret, safe=""))}
    secrets = sorted((form for form in forms if len(form) >= 3), key=len, reverse=True)
    endpoints = [(destination.endpoint, display_endpoint(destination.endpoint)) for destination in given]

    def redact(text: str) -> str:
        for raw, shown in endpoints:
            if raw != shown:
                text = text.replace(raw, shown)
        for secret in secrets:
            text = text.replace(secret, MASK)
        text = _USERINFO.sub("", text)
        return _QUERY.sub("", text)

    return redact


def kind_of(record: logging.LogRecord) -> str | None:
    """What a record's arguments say of a failure's kind: an HTTP status (`HTTP 500`), a gRPC
    status code (`gRPC UNAVAILABLE`) or an exception's class; None when they say none. The
    record's text is not read (see the module's docstring)."""
    args = record.args if isinstance(record.args, tuple) else ()
    for arg in args:
        if isinstance(arg, bool):
            continue
        if isinstance(arg, int) and 100 <= arg <= 599:
            return f"HTTP {arg}"
        name = getattr(arg, "name", None)
        if type(arg).__name__ == "StatusCode" and isinstance(name, str):
            return f"gRPC {name}"
        if isinstance(arg, BaseException):
            return type(arg).__name__
    return None


class ExporterLogCapture(logging.Handler):
    """Holds the `opentelemetry` and `grpc` loggers' records while a command runs.
    A context manager; `last_kind` is the kind of the last record that names one (`kind_of`)."""

    LOGGER = "opentelemetry.exporter.otlp"  # where the exporters' retry notices come from

    def __init__(self, redact: Redactor | None = None, *, debug: bool = False) -> None:
        super().__init__(logging.WARNING)
        self.last_kind: str | None = None
        self._redact = redact or redactor(None)
        self._debug = debug
        self._saved: list[tuple[logging.Logger, bool]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.last_kind = kind_of(record) or self.last_kind
        if not self._debug:
            return
        try:
            text = self._redact(record.getMessage())
        except Exception:  # a log record that cannot be formatted is not worth failing for
            return
        lines = text.splitlines() or [""]
        sys.stderr.write(f"cafe: debug: {record.name}: {' | '.join(lines)}\n")

    def __enter__(self) -> ExporterLogCapture:
        for name in LOGGERS:
            logger = logging.getLogger(name)
            self._saved.append((logger, logger.propagate))
            logger.addHandler(self)
            logger.propagate = False
        return self

    def __exit__(self, *exc: object) -> None:
        for logger, propagate in self._saved:
            logger.propagate = propagate
            if self._debug:
                continue  # stays, so that later lines are redacted too
            logger.removeHandler(self)
            if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
                logger.addHandler(logging.NullHandler())
        self._saved.clear()
