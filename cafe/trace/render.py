"""Rendering a span tree as text: names, kinds, durations, tokens, tool calls, errors."""

from __future__ import annotations

from collections.abc import Sequence

from cafe.trace.span import SpanNode


def format_seconds(seconds: float) -> str:
    """A duration a person can read at any scale: 740µs, 12.3ms, 1.000s. An offline shift's
    spans last microseconds; printed as seconds to three places they would all read 0.000s."""
    if seconds < 0.001:
        return f"{seconds * 1e6:.0f}µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.1f}ms"
    return f"{seconds:.3f}s"


def _label(node: SpanNode) -> str:
    parts = [node.name, f"[{node.kind}]", format_seconds(node.duration)]
    g = node.generation
    if g is not None:
        parts.append(f"model={g.model}")
        parts.append(f"tokens={g.usage.get('prompt_tokens', 0)}+{g.usage.get('completion_tokens', 0)}")
        if g.tool_calls:
            parts.append("tool_calls=" + ",".join(g.tool_calls))
    for key in sorted(node.attrs):
        parts.append(f"{key}={node.attrs[key]}")
    if node.error_type:
        parts.append(f"error={node.error_type}")
    return "  ".join(parts)


def render_tree(roots: Sequence[SpanNode]) -> str:
    lines: list[str] = []

    def visit(node: SpanNode, prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└─ " if last else "├─ ")
        lines.append(prefix + branch + _label(node))
        child_prefix = prefix if top else prefix + ("   " if last else "│  ")
        for index, child in enumerate(node.children):
            visit(child, child_prefix, index == len(node.children) - 1, False)

    for root in roots:
        visit(root, "", True, True)
    return "\n".join(lines)
