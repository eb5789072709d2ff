"""Spans: cafe's trace events mapped onto GenAI spans (listener, tracer, scope, ids, content)."""
