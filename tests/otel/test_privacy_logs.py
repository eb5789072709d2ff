"""The one redacting step (`cafe_otel._privacy.logs`): once telemetry is configured, every
record the SDK, its exporters, gRPC or cafe_otel log is rewritten as it is made, before any
handler (an application's, pytest's, the last-resort one) sees it."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cafe_otel import configure
from cafe_otel._privacy.logs import ExporterLogCapture, kind_of

TOKEN, HEADER_SECRET = "tok3nSECRETq", "hdrSECRETv4lue"
PATH_KEY = "sk-proj-PATHKEYabcdefghijklmn"  # a key some receivers take in the path
DETAILS_KEY = "ghp_Ab3dEf6hIj9lMn2pQr5tUv"  # what a receiver's error details may echo
ENDPOINT = f"http://user:pw-{TOKEN}@collector.example:4318/{PATH_KEY}/v1/traces?token={TOKEN}"
EXPORTER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def kept() -> Iterator[Kept]:
    """A handler on the root logger, as an application's logging would have."""
    handler = Kept()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


@pytest.fixture(autouse=True)
def configured() -> None:
    handle = configure(endpoint=ENDPOINT, protocol="http/protobuf", headers={"x-api-token": HEADER_SECRET},
                       exporter=InMemorySpanExporter(), environ={}, set_global=False, metrics=False)
    handle.shutdown(1.0)


def _text(record: logging.LogRecord) -> str:
    return logging.Formatter("%(message)s").format(record)


SECRETS = (TOKEN, HEADER_SECRET, PATH_KEY, DETAILS_KEY, "pw-")


def test_an_exporters_record_reaches_every_handler_redacted(kept: Kept) -> None:
    logging.getLogger(EXPORTER).warning("Transient error %s encountered while exporting to %s, header %s",
                                        f"Max retries exceeded with url: /{PATH_KEY}/v1/traces?token={TOKEN}",
                                        ENDPOINT, HEADER_SECRET)
    (record,) = [r for r in kept.records if r.name == EXPORTER]
    text = _text(record)
    assert "Transient error" in text and "collector.example:4318" in text
    assert not any(secret in text for secret in SECRETS), text
    assert record.args is None  # the raw arguments are not kept on the record


def test_an_exception_a_record_carries_is_redacted_in_its_traceback(kept: Kept) -> None:
    try:
        raise RuntimeError(f"error details: bad key {DETAILS_KEY} for {ENDPOINT}")
    except RuntimeError:
        logging.getLogger("opentelemetry.exporter.otlp.proto.grpc.exporter").error(
            "Failed to export traces, error details: %s", f"bad key {DETAILS_KEY}", exc_info=True)
    (record,) = [r for r in kept.records if r.name.endswith("grpc.exporter")]
    text = _text(record)
    assert "Traceback" in text and "RuntimeError" in text
    assert not any(secret in text for secret in SECRETS), text
    assert record.exc_info is None  # no handler can format the raw exception itself


@pytest.mark.parametrize("logger", ["grpc._channel", "cafe_otel._export.batch", "opentelemetry.sdk.trace"])
def test_gRPCs_and_our_own_records_are_redacted_too(kept: Kept, logger: str) -> None:
    logging.getLogger(logger).warning("to %s: \x1b[31m %s", ENDPOINT, DETAILS_KEY)
    (record,) = [r for r in kept.records if r.name == logger]
    text = _text(record)
    assert not any(secret in text for secret in SECRETS) and "\x1b" not in text and "\\x1b" in text


def test_another_librarys_record_is_left_as_it_is(kept: Kept) -> None:
    logging.getLogger("myapp.orders").warning("order for %s", DETAILS_KEY)
    (record,) = [r for r in kept.records if r.name == "myapp.orders"]
    assert record.getMessage() == f"order for {DETAILS_KEY}" and record.args == (DETAILS_KEY,)


def test_the_failure_kind_is_kept_when_the_arguments_go() -> None:
    logger = logging.getLogger(EXPORTER)
    with ExporterLogCapture() as capture:
        logger.error("Failed to export span batch code: %s, reason: %s", 503, f"busy {DETAILS_KEY}")
    assert capture.last_kind == "HTTP 503"
    record = logger.makeRecord(EXPORTER, logging.ERROR, __file__, 1, "status %s", (ValueError("x"),), None)
    assert record.args is None and kind_of(record) == "ValueError"
