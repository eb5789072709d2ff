"""The tracer: a tree of spans for one shift, kept in memory, rendered or exported.

`export()` propagates whatever the exporter raises, on purpose: nobody should be able to
mistake a dead backend for a good one. `export_fail_soft` is where that failure is turned
into a returned error text. Subclasses observe spans through `_span_started` and
`_span_ended` (cafe_otel mirrors them as OpenTelemetry spans there).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from cafe.jsondata import copy_json
from cafe.trace.clock import Clock
from cafe.trace.span import GENERATION, Generation, SpanNode

Exporter = Callable[[Sequence[dict[str, Any]]], Any]


class Tracer:
    def __init__(
        self, exporter: Exporter | None = None, clock: Clock | None = None, *, keep_inputs: bool = True
    ) -> None:
        """`keep_inputs=False` skips the copy of each model call's input messages: for a
        tracer whose spans go out as metadata only, the copy is most of its cost."""
        self._exporter = exporter
        self.keep_inputs = keep_inputs
        self._clock: Clock = clock or time.perf_counter
        self._roots: list[SpanNode] = []
        self._stack: list[SpanNode] = []
        self._next_id = 1

    @contextmanager
    def span(self, name: str, kind: str = "span", **attrs: Any) -> Iterator[SpanNode]:
        yield from self._lifetime(self._open(name, kind, attrs))

    def _lifetime(self, node: SpanNode) -> Iterator[SpanNode]:
        try:
            yield node
        except BaseException as error:
            node.error_type = type(error).__name__
            node.exception = error
            raise
        finally:
            self._close(node)

    @contextmanager
    def generation(
        self,
        name: str,
        *,
        model: str,
        provider: str,
        input: list[dict[str, Any]],
        temperature: float | None = None,
        tools: list[dict[str, Any]] | None = None,
        server_address: str | None = None,
        server_port: int | None = None,
        **attrs: Any,
    ) -> Iterator[SpanNode]:
        data = Generation(model=model, provider=provider,
                          input=copy_json(input) if self.keep_inputs else [],
                          temperature=temperature, tools=tools,
                          server_address=server_address, server_port=server_port)
        yield from self._lifetime(self._open(name, GENERATION, attrs, data))

    def _open(
        self, name: str, kind: str, attrs: dict[str, Any], generation: Generation | None = None
    ) -> SpanNode:
        parent = self._stack[-1] if self._stack else None
        node = SpanNode(self._next_id, name, kind, attrs, self._clock(), parent=parent,
                        generation=generation)
        self._next_id += 1
        (parent.children if parent else self._roots).append(node)
        self._stack.append(node)
        self._span_started(node)
        return node

    def _close(self, node: SpanNode) -> None:
        node.end = self._clock()
        self._stack.pop()
        self._span_ended(node)

    def _span_started(self, node: SpanNode) -> None:
        """Hook: a span has opened (its parent is `node.parent`)."""

    def _span_ended(self, node: SpanNode) -> None:
        """Hook: a span has closed, with its end time and any error type set."""

    @property
    def roots(self) -> list[SpanNode]:
        return list(self._roots)

    def nodes(self, kind: str | None = None) -> list[SpanNode]:
        found = [node for root in self._roots for node in root.walk()]
        return found if kind is None else [node for node in found if node.kind == kind]

    def generations(self) -> list[SpanNode]:
        return self.nodes(GENERATION)

    def render(self) -> str:
        from cafe.trace.render import render_tree

        return render_tree(self._roots)

    def export(self) -> Any:
        if self._exporter is None:
            return None
        return self._exporter([root.as_dict() for root in self._roots])


class _DiscardedNode(SpanNode):
    def set(self, **attrs: Any) -> None:
        return None


class NullTracer(Tracer):
    """The same interface, doing nothing, so instrumentation needs no `if tracer:`."""

    def __init__(self, exporter: Exporter | None = None, clock: Clock | None = None) -> None:
        super().__init__(exporter=None, clock=lambda: 0.0)

    def _open(self, name: str, kind: str, attrs: dict[str, Any], generation: Generation | None = None) -> SpanNode:
        return _DiscardedNode(0, name, kind, {}, 0.0)

    def _close(self, node: SpanNode) -> None:
        return None

    @contextmanager
    def generation(self, name: str, **kwargs: Any) -> Iterator[SpanNode]:
        # No deep copy: a tracer that records nothing must cost nothing.
        yield _DiscardedNode(0, name, GENERATION, {}, 0.0)
