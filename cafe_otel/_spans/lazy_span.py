"""`LazySpan`: the current span of a generation that is made only if someone looks at it.

A local generation (a replay, a scripted model) is usually seen by nobody while it runs:
its OTel span can then be made once, at its end, with every attribute at once. But code
inside the call may still ask for the current span (an instrumented HTTP client starting
a child, an application adding an attribute), and must get the real one. So the
generation's context holds this stand-in: the first call on it makes the real span (its
start time and start attributes as they were) and every call is handed to that span.
A subclass says how the real span is made (`_make`): the stand-in can then be the record
of what the span will be made from, one object a call.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.trace import SpanContext, Status, StatusCode
from opentelemetry.util import types


class LazySpan(trace.Span):
    __slots__ = ()

    def _make(self) -> trace.Span:
        """The real span, made on the first call (and the same one after)."""
        raise NotImplementedError

    def get_span_context(self) -> SpanContext:
        return self._make().get_span_context()

    def is_recording(self) -> bool:
        return self._make().is_recording()

    def set_attributes(self, attributes: types.Attributes) -> None:
        self._make().set_attributes(attributes)  # type: ignore[arg-type]

    def set_attribute(self, key: str, value: types.AttributeValue) -> None:
        self._make().set_attribute(key, value)

    def add_event(self, name: str, attributes: types.Attributes = None, timestamp: int | None = None) -> None:
        self._make().add_event(name, attributes, timestamp)

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        self._make().add_link(context, attributes)

    def update_name(self, name: str) -> None:
        self._make().update_name(name)

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        self._make().set_status(status, description)

    def record_exception(self, exception: BaseException, attributes: types.Attributes = None,
                         timestamp: int | None = None, escaped: bool = False) -> None:
        self._make().record_exception(exception, attributes, timestamp, escaped)

    def end(self, end_time: int | None = None) -> None:
        self._make().end(end_time)

    def __repr__(self) -> str:
        return "LazySpan()"

