"""`MetadataOnlySpanProcessor`: what reaches the exporter is metadata, never content.

It wraps the next processor and, at `on_end`, hands it a sanitised COPY of the span
(a `ReadableSpan`'s attributes are read-only): span, event, link and scope attributes
reduced to an allowlist of keys, exception events down to `exception.type`, status
description removed. Resource attributes are kept (service identity). It applies to
every span on the provider, ours and any third-party instrumentation's.

It fails CLOSED: if sanitising raises, the span is dropped and counted in the account,
and nothing is raised into `span.end()` (that would surface in application code).
`on_start` is not forwarded: at start the span is the live, unsanitised object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, Status

from cafe_otel.account import TelemetryAccount
from cafe_otel.semconv import METADATA_ALLOWLIST

Sanitiser = Callable[[ReadableSpan], ReadableSpan]


def _filter(attributes: Mapping[str, Any] | None, allowed: frozenset[str]) -> dict[str, Any]:
    if not attributes:
        return {}
    return {key: value for key, value in attributes.items() if key in allowed}


def _already_clean(span: ReadableSpan, keys: frozenset[str]) -> bool:
    """Nothing to strip: every key allowed, no status description. Our own spans are
    usually this (they are built from metadata), and copying them would be pure cost."""
    if span.status.description:
        return False
    if span.attributes and not keys.issuperset(span.attributes):
        return False
    if any(event.attributes and not keys.issuperset(event.attributes) for event in span.events):
        return False
    if any(link.attributes and not keys.issuperset(link.attributes) for link in span.links):
        return False
    scope = span.instrumentation_scope
    return not (scope is not None and scope.attributes and not keys.issuperset(scope.attributes))


def sanitise_span(span: ReadableSpan, allowed: Iterable[str] = METADATA_ALLOWLIST) -> ReadableSpan:
    """`span` itself when it holds nothing to strip, else a copy holding only allowlisted
    keys and no free text but its name."""
    keys = allowed if isinstance(allowed, frozenset) else frozenset(allowed)
    if _already_clean(span, keys):
        return span
    events = [
        Event(event.name, _filter(event.attributes, keys), timestamp=event.timestamp)
        for event in span.events
    ]
    links = [Link(link.context, _filter(link.attributes, keys)) for link in span.links]
    scope = span.instrumentation_scope
    if scope is not None:
        scope = InstrumentationScope(scope.name, scope.version, scope.schema_url,
                                     _filter(scope.attributes, keys))
    status = span.status
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=_filter(span.attributes, keys),
        events=events,
        links=links,
        kind=span.kind,
        status=Status(status.status_code),  # the description is free text: dropped
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=scope,
    )


class MetadataOnlySpanProcessor(SpanProcessor):
    def __init__(
        self,
        next_processor: SpanProcessor,
        *,
        allowlist: Iterable[str] = METADATA_ALLOWLIST,
        account: TelemetryAccount | None = None,
        sanitiser: Sanitiser | None = None,
    ) -> None:
        self._next = next_processor
        self._allowed = frozenset(allowlist)
        self.account = account if account is not None else TelemetryAccount()
        self._sanitise: Sanitiser = sanitiser or (lambda span: sanitise_span(span, self._allowed))

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        try:
            clean = self._sanitise(span)
        except Exception as error:  # fail closed: never hand on the raw span
            self.account.add_redaction_failed(
                f"sanitising a span raised {type(error).__name__}; span dropped")
            return
        try:
            self._next.on_end(clean)
        except Exception as error:  # a processor must not raise into span.end()
            self.account.add_export_failed(
                1, f"next processor raised {type(error).__name__} in on_end; span dropped")

    def shutdown(self) -> None:
        self._next.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._next.force_flush(timeout_millis)
