"""What our pipeline, the OTel SDK, its exporters and gRPC log: redacted as it is made, held
while a command (or an `opentelemetry-instrument` run) exports telemetry.

The OTLP exporters log retries and failures through Python logging, and their text names
the endpoint as they were given it: with its query string (`?token=...`), a key in its path
(some receivers take one there), and, for HTTP, inside the transport's own error text; a gRPC
receiver's error details are the receiver's to write and may hold anything, a key included.

One redacting step: once telemetry is configured (`configure()`, which the `cafe` command and
the zero-code configurator both call), every record of the `opentelemetry`, `grpc` and
`cafe_otel` loggers is rewritten as it is made (logging's record factory, so before any
handler, ours, an application's or pytest's, sees it): its message, and the traceback of an
exception it carries, go through `Redaction`, and its arguments are dropped. `Redaction`
masks every credential the settings of every handle hold (header values, each endpoint's
user, password and query values), shows each endpoint as error texts show it
(`display_endpoint`), removes any query string and user:password part, applies the secret
patterns (`cafe.privacy`), and shows control characters as escapes. A record's failure kind
(`kind_of`: an HTTP status, a gRPC status code, an exception's class, read from its
arguments) is kept on it before they go.

While a command runs, `ExporterLogCapture` holds every WARNING-or-worse record of the
`opentelemetry` and `grpc` loggers. The command's single telemetry line names only the last
one's kind, never its text: that text quotes what the receiver answered, which is the
receiver's to write. `CAFE_DEBUG=1` writes each record (redacted) to stderr as it comes.

Lines logged after the command is done (an export thread the bounded shutdown left behind
saying "Shutdown in progress") must not reach Python's last-resort handler, which prints
to stderr: on exit a NullHandler stays on those loggers. Records still propagate to the
root logger, so an application's (or pytest's) own logging sees them as before, redacted.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import quote, unquote, urlsplit

from cafe.privacy import structure_scrubber
from cafe_otel._config.settings import display_endpoint

LOGGERS = ("opentelemetry", "grpc")
# Whose records the redacting step rewrites: the SDK's and the exporters', gRPC's, ours.
REDACTED_LOGGERS = ("opentelemetry", "grpc", "cafe_otel")
KIND_ATTRIBUTE = "cafe_otel_failure_kind"  # where a rewritten record keeps its failure's kind
MASK = "***"
# A query string on anything URL-like: `host:4317?token=x`, `/v1/traces?token=x`.
_QUERY = re.compile(r"(?<=[\w/\].:-])\?[^\s'\"()<>,]*")
# The user:password@ part of a URL.
_USERINFO = re.compile(r"(?<=//)[^/\s@'\"]+@")
_KEPT = 256  # credentials and endpoints a process's redaction remembers (the latest ones)
# Control characters but newline and tab, and lone surrogates: shown as escapes, as the `cafe`
# command shows everything it prints (a terminal escape in a record would drive the reader's
# terminal, wherever a handler writes it).
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"

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


class Redaction:
    """A function that makes a text fit to print (see the module's docstring), for the
    credentials and endpoints of every destination it was given (`add` gives more)."""

    def __init__(self, *destinations: Destination | None) -> None:
        self._secrets: tuple[str, ...] = ()
        self._endpoints: dict[str, str] = {}
        self._lock = threading.Lock()
        self.add(*destinations)

    def add(self, *destinations: Destination | None) -> None:
        given = [found for found in destinations if found is not None]
        found = [secret for destination in given for secret in _credentials(destination)]
        forms = {form for secret in found for form in (secret, unquote(secret), quote(secret, safe=""))}
        with self._lock:
            secrets = dict.fromkeys((*self._secrets, *(form for form in forms if len(form) >= 3)))
            # Longest first: a secret that holds another is masked whole.
            self._secrets = tuple(sorted(list(secrets)[-_KEPT:], key=len, reverse=True))
            endpoints = dict(self._endpoints)
            for destination in given:
                shown = display_endpoint(destination.endpoint)
                if shown != destination.endpoint:
                    endpoints.pop(destination.endpoint, None)
                    endpoints[destination.endpoint] = shown
            self._endpoints = dict(list(endpoints.items())[-_KEPT:])

    def merge(self, other: Redaction) -> None:
        """What `other` masks, masked here too."""
        with other._lock:
            secrets, endpoints = other._secrets, dict(other._endpoints)
        with self._lock:
            kept = dict.fromkeys((*self._secrets, *secrets))
            self._secrets = tuple(sorted(list(kept)[-_KEPT:], key=len, reverse=True))
            self._endpoints = dict(list({**self._endpoints, **endpoints}.items())[-_KEPT:])

    def __call__(self, text: str) -> str:
        # Longest endpoint first, for the same reason as the secrets.
        for raw, shown in sorted(self._endpoints.items(), key=lambda item: len(item[0]), reverse=True):
            text = text.replace(raw, shown)
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        text = _USERINFO.sub("", text)
        text = _QUERY.sub("", text)
        return _UNPRINTABLE.sub(_escape, structure_scrubber().scrub(text))


def redactor(*destinations: Destination | None) -> Redaction:
    """A function that makes a text fit to print: no credential from any of `destinations`
    (each signal's settings), no query string, no user:password, no secret the patterns find,
    each endpoint as our own error texts show it."""
    return Redaction(*destinations)


def kind_of(record: logging.LogRecord) -> str | None:
    """What a record's arguments say of a failure's kind: an HTTP status (`HTTP 500`), a gRPC
    status code (`gRPC UNAVAILABLE`) or an exception's class; None when they say none. The
    record's text is not read (see the module's docstring)."""
    kept = getattr(record, KIND_ATTRIBUTE, None)
    if isinstance(kept, str):
        return kept
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


# --- the one redacting step -------------------------------------------------------------------

class _RecordRedaction:
    """The process's one redacting step: a record factory around the one in place, rewriting
    the records of `REDACTED_LOGGERS` as they are made. Installed once; `Redaction`s given
    later are merged into the one it applies."""

    def __init__(self) -> None:
        self.redaction = Redaction()
        self._installed = False
        self._lock = threading.Lock()

    def install(self, redaction: Redaction | None) -> None:
        if redaction is not None and redaction is not self.redaction:
            self.redaction.merge(redaction)
        with self._lock:
            if self._installed:
                return
            previous = logging.getLogRecordFactory()
            redact = self._rewrite

            def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
                record = previous(*args, **kwargs)
                if record.name.startswith(REDACTED_LOGGERS):
                    redact(record)
                return record

            logging.setLogRecordFactory(factory)
            self._installed = True

    def _rewrite(self, record: logging.LogRecord) -> None:
        redact = self.redaction
        try:
            kind = kind_of(record)
            message = record.getMessage()
        except Exception:  # arguments that do not format: the message alone, still redacted
            kind, message = None, str(record.msg)
        record.msg, record.args = redact(message), None
        if kind is not None:
            setattr(record, KIND_ATTRIBUTE, kind)
        if record.exc_info:
            try:
                record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            except Exception:  # a traceback that cannot be formatted is not shown
                record.exc_text = None
            record.exc_info = None  # a handler that formats it itself would show the raw text
        if record.stack_info:
            record.stack_info = redact(record.stack_info)


_RECORDS = _RecordRedaction()


def redact_records(redaction: Redaction | None = None) -> Redaction:
    """Put the one redacting step in place (once a process), masking what `redaction` masks
    too; returns the step's own `Redaction`."""
    _RECORDS.install(redaction)
    return _RECORDS.redaction


# --- held while a command runs ---------------------------------------------------------------

class ExporterLogCapture(logging.Handler):
    """Holds the `opentelemetry` and `grpc` loggers' records while a command runs.
    A context manager; `last_kind` is the kind of the last record that names one (`kind_of`).
    `propagate=False` (the `cafe` command) also keeps them from the root logger's handlers
    meanwhile; `prefix` starts each line `debug` writes."""

    LOGGER = "opentelemetry.exporter.otlp"  # where the exporters' retry notices come from

    def __init__(self, redact: Redactor | None = None, *, debug: bool = False, propagate: bool = False,
                 prefix: str = "cafe: debug") -> None:
        super().__init__(logging.WARNING)
        self.last_kind: str | None = None
        self._redact = redact or redactor(None)
        self._debug = debug
        self._propagate = propagate
        self._prefix = prefix
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
        sys.stderr.write(f"{self._prefix}: {record.name}: {' | '.join(lines)}\n")

    def __enter__(self) -> ExporterLogCapture:
        redact_records(self._redact if isinstance(self._redact, Redaction) else None)
        for name in LOGGERS:
            logger = logging.getLogger(name)
            self._saved.append((logger, logger.propagate))
            logger.addHandler(self)
            logger.propagate = self._propagate and logger.propagate
        return self

    def __exit__(self, *exc: object) -> None:
        for logger, propagate in self._saved:
            logger.propagate = propagate
            if self._debug:
                continue  # stays, so that later lines are shown too
            logger.removeHandler(self)
            if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
                logger.addHandler(logging.NullHandler())
        self._saved.clear()


def report_line(line: str, capture: ExporterLogCapture | None, *, dropped: bool, redact: Redactor) -> str:
    """The one telemetry line: `line`, with the last exporter failure's kind when something was
    lost (its kind only: the exporter's text quotes the receiver's answer), redacted as the
    exporters' lines are (nothing in it may carry a credential)."""
    if capture is not None and capture.last_kind and dropped:
        line += f" (exporter: {capture.last_kind})"
    return redact(line)
