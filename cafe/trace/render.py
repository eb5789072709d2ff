"""Rendering a span tree as text: names, kinds, durations, tokens, tool calls, errors."""

from __future__ import annotations

from collections.abc import Sequence

from cafe.trace.span import SpanNode


def _label(node: SpanNode) -> str:
    parts = [node.name, f"[{node.kind}]", f"{node.duration:.3f}s"]
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
