"""A node of the shift's span tree, and the generation data a model-call node carries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cafe.trace.events import NodeKind

# Module-level names for the node kinds, kept importable: they are the enum's members.
SHIFT, PHASE, GENERATION, TOOL = NodeKind.SHIFT, NodeKind.PHASE, NodeKind.GENERATION, NodeKind.TOOL


@dataclass
class Generation:
    """One model call: what went in (read-only: the shift's shared history as the call was
    sent it; `copy.deepcopy` it for a list to change), what came out, and what it cost."""

    model: str
    provider: str
    input: Sequence[Mapping[str, Any]]
    temperature: float | None = None
    output: str | None = None
    tool_calls: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    response: Mapping[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None  # the tool definitions offered to the model
    # Where the model was reached, when it was over the network (a live client).
    server_address: str | None = None
    server_port: int | None = None

    def record_response(self, response: Mapping[str, Any]) -> None:
        self.response = response
        choice = (response.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        self.output = message.get("content")
        self.tool_calls = [
            (call.get("function") or {}).get("name", "") for call in message.get("tool_calls") or []
        ]
        self.usage = dict(response.get("usage") or {})

    @property
    def finish_reason(self) -> str | None:
        choices = (self.response or {}).get("choices") or [{}]
        reason = choices[0].get("finish_reason")
        return reason if isinstance(reason, str) else None


@dataclass
class ToolCall:
    """What a tool span ran: the arguments as the model sent them and the result text the
    model was given. Content, so kept off `attrs` (which renders and exports as metadata)."""

    arguments: str | None
    result: str | None = None


@dataclass(eq=False)
class SpanNode:
    span_id: int
    name: str
    kind: str
    attrs: dict[str, Any]
    start: float
    parent: SpanNode | None = field(default=None, repr=False)
    children: list[SpanNode] = field(default_factory=list, repr=False)
    end: float | None = None
    error_type: str | None = None
    generation: Generation | None = field(default=None, repr=False)
    tool_call: ToolCall | None = field(default=None, repr=False)
    # The exception that ended the span, for exporters that record it (cafe_otel). Kept out
    # of repr and as_dict: its message may quote customer text.
    exception: BaseException | None = field(default=None, repr=False)

    @property
    def duration(self) -> float:
        return 0.0 if self.end is None else self.end - self.start

    @property
    def failed(self) -> bool:
        return self.error_type is not None

    def set(self, **attrs: Any) -> None:
        self.attrs.update(attrs)

    def walk(self) -> list[SpanNode]:
        found = [self]
        for child in self.children:
            found.extend(child.walk())
        return found

    def inherited(self, key: str) -> Any:
        """The nearest value of `key` on this node or an ancestor (a tool span's turn)."""
        node: SpanNode | None = self
        while node is not None:
            if key in node.attrs:
                return node.attrs[key]
            node = node.parent
        return None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "span_id": self.span_id,
            "name": self.name,
            "kind": self.kind,
            "attrs": dict(self.attrs),
            "start": self.start,
            "end": self.end,
            "error_type": self.error_type,
            "children": [child.as_dict() for child in self.children],
        }
        if self.generation is not None:
            g = self.generation
            data["generation"] = {
                "model": g.model, "provider": g.provider, "input": list(g.input), "output": g.output,
                "tool_calls": list(g.tool_calls), "usage": dict(g.usage),
            }
        return data
