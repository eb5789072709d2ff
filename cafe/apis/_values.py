"""Small readers every API's module shares: JSON values of the expected type or None, the
provider a host names, and the conversation's common parts."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cafe.apis._model import Part

# `gen_ai.provider.name` of the services that speak another maker's wire format, by host.
_PROVIDER_HOSTS = (
    (".openai.azure.com", "azure.ai.openai"),
    (".services.ai.azure.com", "azure.ai.inference"),
    ("api.groq.com", "groq"),
    ("api.x.ai", "x_ai"),
    ("api.deepseek.com", "deepseek"),
    ("api.perplexity.ai", "perplexity"),
    ("api.mistral.ai", "mistral_ai"),
    ("generativelanguage.googleapis.com", "gcp.gemini"),
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
    ("api.cohere.com", "cohere"),
    ("api.cohere.ai", "cohere"),
)
_BEDROCK_HOST = ("bedrock-runtime.", ".amazonaws.com")  # bedrock-runtime.<region>.amazonaws.com


def provider_for(host: str | None, wire_format: str) -> str:
    """The provider a call goes to: a well-known service by its host, otherwise the maker
    of the wire format it speaks (`openai` for any OpenAI-compatible server)."""
    if host:
        name = host.lower().rstrip(".")
        if name.startswith(_BEDROCK_HOST[0]) and name.endswith(_BEDROCK_HOST[1]):
            return "aws.bedrock"
        for pattern, provider in _PROVIDER_HOSTS:
            if pattern.startswith("."):
                if name.endswith(pattern):
                    return provider
            elif name == pattern or name.endswith(("." + pattern, "-" + pattern)):  # regional hosts
                return provider
    return wire_format


_INT64 = 1 << 63


def integer(value: Any) -> int | None:
    # Only what a telemetry attribute can carry (OTLP's int64): a larger number a request
    # or answer holds would fail the export of its whole batch.
    return value if type(value) is int and -_INT64 <= value < _INT64 else None


def number(value: Any) -> float | None:
    return float(value) if type(value) in (int, float) else None


def text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def strings(value: Any) -> tuple[str, ...] | None:
    """A string or a non-empty list of strings, as a tuple; None for anything else."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return tuple(value)
    return None


def mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def items(value: Any) -> list[dict[str, Any]]:
    """The objects of a JSON array (anything else in it, or a non-array, left out)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def maybe_json(value: Any) -> Any:
    """Tool arguments and results are JSON text on the wire; the conventions prefer the
    structured value when there is one (an object or an array: `3.20` stays the text it is)."""
    if not isinstance(value, str) or not value.lstrip().startswith(("{", "[")):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def output_type(response_format: Any) -> str | None:
    """`gen_ai.output.type` of an OpenAI `response_format` / `text.format`."""
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind in ("json_object", "json_schema"):
        return "json"
    return "text" if kind == "text" else None


def other_part(kind: Any) -> Part:
    """A part no reading turns into text: kept by its type alone (an image, a file, audio)."""
    return {"type": kind if isinstance(kind, str) and kind else "unknown"}
