"""What other libraries print while a `cafe` command exports telemetry: held, redacted.

The OTLP exporters log retries and failures through Python logging, and their text names
the endpoint as they were given it: with its query string (`?token=...`) and, for HTTP,
inside the transport's own error text. While a command runs, `ExporterLogCapture` holds
every WARNING-or-worse record of the `opentelemetry` and `grpc` loggers; the last one,
redacted, joins the command's single telemetry line. `CAFE_DEBUG=1` writes each record
(redacted) to stderr as it comes. Redaction is `redactor(settings)`: every credential the
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
from urllib.parse import quote, unquote, urlsplit

from cafe_otel.settings import Settings, display_endpoint

LOGGERS = ("opentelemetry", "grpc")
MASK = "***"
MAX_CHARS = 160
# A query string on anything URL-like: `host:4317?token=x`, `/v1/traces?token=x`.
_QUERY = re.compile(r"(?<=[\w/\].:-])\?[^\s'\"()<>,]*")
# The user:password@ part of a URL.
_USERINFO = re.compile(r"(?<=//)[^/\s@'\"]+@")

Redactor = Callable[[str], str]


def _credentials(settings: Settings) -> list[str]:
    found = [value for value in settings.headers.values() if value]
    parts = urlsplit(settings.endpoint)
    for piece in (parts.username, parts.password, parts.query):
        if piece:
            found.append(piece)
    for item in parts.query.split("&"):
        value = item.partition("=")[2]
        if value:
            found.append(value)
    forms = {form for secret in found for form in (secret, unquote(secret), quote(secret, safe=""))}
    return sorted((form for form in forms if len(form) >= 3), key=len, reverse=True)


def redactor(settings: Settings | None) -> Redactor:
    """A function that makes a text fit to print: no credential from `settings`, no query
    string, no user:password, the endpoint as our own error texts show it."""
    secrets = _credentials(settings) if settings is not None else []
    shown = display_endpoint(settings.endpoint) if settings is not None else None
    raw = settings.endpoint if settings is not None else None

    def redact(text: str) -> str:
        if raw and shown and raw != shown:
            text = text.replace(raw, shown)
        for secret in secrets:
            text = text.replace(secret, MASK)
        text = _USERINFO.sub("", text)
        return _QUERY.sub("", text)

    return redact


class ExporterLogCapture(logging.Handler):
    """Holds the `opentelemetry` and `grpc` loggers' records while a command runs.
    A context manager; `last` is the last record's first line, redacted and shortened."""

    LOGGER = "opentelemetry.exporter.otlp"  # where the exporters' retry notices come from
    MAX_CHARS = MAX_CHARS

    def __init__(self, redact: Redactor | None = None, *, debug: bool = False) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None
        self._redact = redact or redactor(None)
        self._debug = debug
        self._saved: list[tuple[logging.Logger, bool]] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self._redact(record.getMessage())
        except Exception:  # a log record that cannot be formatted is not worth failing for
            return
        lines = text.splitlines() or [""]
        self.last = lines[0][: self.MAX_CHARS] + ("…" if len(lines[0]) > self.MAX_CHARS else "")
        if self._debug:
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
