"""The `cafe` command's view of what other libraries log: `cafe_otel._privacy.logs`, whose
names the command (and code written against this module) imports from here."""

from cafe_otel._privacy.logs import (
    KIND_ATTRIBUTE,
    LOGGERS,
    MASK,
    REDACTED_LOGGERS,
    Destination,
    ExporterLogCapture,
    Redaction,
    Redactor,
    kind_of,
    redact_records,
    redactor,
    report_line,
)

__all__ = ["KIND_ATTRIBUTE", "LOGGERS", "MASK", "REDACTED_LOGGERS", "Destination", "ExporterLogCapture", "Redaction",
           "Redactor", "kind_of", "redact_records", "redactor", "report_line"]
