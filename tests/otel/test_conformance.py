"""Our output against the pinned 1.41.1 registry and metric definitions, as published
(`semconv-1.41.1/model/*.yaml`, `docs/gen-ai/gen-ai-metrics.md`): every convention key we
may send is defined there, with the type we send, and the metrics have its names, units and
bucket boundaries. The model is read from the shared notes beside the checkout when present
(`CAFE_SEMCONV_DIR` points elsewhere); without it these tests skip."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cafe_otel import configure
from cafe_otel import semconv as sc
from cafe_otel._metrics.listener import _INSTRUMENTS
from cafe_otel.instrumentation import OpenAIWireInstrumentor
from tests.wire.openai_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[2]
OURS = ("cafe.", "http.", "url.", "network.", "rpc.")  # not GenAI keys: our namespace, or other conventions


def _semconv_dir() -> Path:
    explicit = os.environ.get("CAFE_SEMCONV_DIR")
    candidates = [Path(explicit)] if explicit else [ROOT.parent / "shared" / "semconv-1.41.1",
                                                    ROOT.parent.parent / "shared" / "semconv-1.41.1"]
    for candidate in candidates:
        if (candidate / "model" / "gen-ai" / "registry.yaml").is_file():
            return candidate
    pytest.skip("the pinned semantic conventions (semconv-1.41.1) are not beside this checkout")


@pytest.fixture(scope="module")
def registry() -> dict[str, Any]:
    """attribute id -> its type (a string, or 'enum' for members), from every registry.yaml."""
    found: dict[str, Any] = {}
    for path in (_semconv_dir() / "model").glob("*/registry.yaml"):
        for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]:
            for attribute in group.get("attributes", []):
                kind = attribute.get("type")
                found[attribute["id"]] = "enum" if isinstance(kind, dict) else kind
    return found


def test_every_convention_key_we_may_send_is_in_the_registry(registry: dict[str, Any]) -> None:
    keys = (sc.METADATA_ALLOWLIST | sc.CONTENT_ATTRIBUTES | sc.METRIC_ATTRIBUTES)
    missing = sorted(key for key in keys if not key.startswith(OURS) and key not in registry
                     and not key.startswith("service.") and key != sc.EXCEPTION_TYPE)
    assert missing == []


def test_the_metrics_have_the_specs_names_units_and_buckets() -> None:
    model = yaml.safe_load((_semconv_dir() / "model" / "gen-ai" / "metrics.yaml").read_text(encoding="utf-8"))
    defined = {group["metric_name"]: group for group in model["groups"] if group.get("type") == "metric"}
    text = (_semconv_dir() / "docs" / "gen-ai" / "gen-ai-metrics.md").read_text(encoding="utf-8")
    for name in (sc.METRIC_GEN_AI_CLIENT_TOKEN_USAGE, sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION,
                 sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK,
                 sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK):
        unit, _, buckets = _INSTRUMENTS[name]
        assert defined[name]["instrument"] == "histogram" and defined[name]["unit"] == unit
        section = text.split(f"### Metric: `{name}`", 1)[1]
        listed = re.search(r"ExplicitBucketBoundaries\] of\s*\[([^\]]+)\]", section)
        assert listed is not None and buckets is not None
        assert tuple(float(v) for v in listed.group(1).split(",")) == buckets, name


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer.running() as running:
        yield running


_PYTHON_TYPES = {"string": (str,), "int": (int,), "double": (float,), "boolean": (bool,), "string[]": (tuple,),
                 "enum": (str,), "any": (str,)}


@pytest.mark.parametrize("stream", [False, True])
def test_a_wire_chat_span_sends_each_key_with_its_registry_type(registry: dict[str, Any], server: OpenAIServer,
                                                                 stream: bool) -> None:
    sink = InMemorySpanExporter()
    handle = configure(exporter=sink, environ={}, set_global=False, metrics=False, capture_content=True)
    instrumentor = OpenAIWireInstrumentor()
    instrumentor.instrument(telemetry=handle)
    try:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-conformance-0123456789", max_retries=0)
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=stream, max_tokens=3,  # type: ignore[call-overload]
            temperature=1, top_p=1, seed=1, stop="###", n=2)
        if stream:
            for _chunk in reply:
                pass
    finally:
        instrumentor.uninstrument()
        handle.shutdown(2.0)
    (span,) = sink.get_finished_spans()
    for key, value in (span.attributes or {}).items():
        kind = registry[key]
        assert isinstance(value, _PYTHON_TYPES[kind]), (key, kind, value)
        if kind == "int":
            assert type(value) is int, key  # not a bool
        if kind == "string[]":
            assert all(isinstance(item, str) for item in value), key
