"""Figure 9's child process: one variant of the same model call, timed in a fresh interpreter.

`python -m bench.peer_runner SPEC.json` sets the variant up, warms it up and says `ready`; then
each `sample N` line on stdin gets one JSON line (seconds a call over N calls, wall and CPU),
and `finish` gets the result: the spans the do-nothing exporter received, the metric points
recorded, the versions that ran. A span carrying message text fails the variant.

`python -m bench.peer_runner SPEC.json count N` is the process callgrind counts: set up, warm
up, flush and collect, then N more calls, flush and collect, then the result (checked as
above) on stdout. Its count with N minus its count with 0, over N, is one call's instructions.

It imports nothing of cafe unless the variant is ours (`bare`, `bare_live`, `ours`,
`wire_recording`, `wire_replaying` and `anthropic_sdk` run in the project's venv; the peers
in their own), so in a peer's virtualenv only the model's SDK, the OpenTelemetry SDK and the
peer are loaded. An unusable variant exits
2 with one line on stderr.

The spec: {"variant", "metrics", "api" (`chat`, `responses` or `anthropic`: which SDK call),
"base_url", "model", "request" (the create call's keyword arguments besides the model and the
stream switch), "body" (the mock response, a JSON object), "events" (the same answer as
server-sent events; for chat, None: this module writes its chunks), "floor" (the bare SDK
span's name and attributes), "stream" (the call streamed, read to the end), "warmup",
"markers" (strings that are content: none may appear in an exported attribute)}; bench/apis.py
writes the part that differs by API.
"""

from __future__ import annotations

import gc
import importlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any

API_KEY = "sk-bench-not-a-real-key"
# What each peer is called in the spec: its instrumentor's module and class, and the
# distribution to report.
PEERS = {
    "official": ("opentelemetry.instrumentation.genai.openai", "OpenAIInstrumentor",
                 "opentelemetry-instrumentation-genai-openai"),
    "openai_v2": ("opentelemetry.instrumentation.openai_v2", "OpenAIInstrumentor",
                  "opentelemetry-instrumentation-openai-v2"),
    "openllmetry": ("opentelemetry.instrumentation.openai", "OpenAIInstrumentor",
                    "opentelemetry-instrumentation-openai"),
    "openinference": ("openinference.instrumentation.openai", "OpenAIInstrumentor",
                      "openinference-instrumentation-openai"),
    "official_anthropic": ("opentelemetry.instrumentation.genai.anthropic", "AnthropicInstrumentor",
                           "opentelemetry-instrumentation-genai-anthropic"),
    "openllmetry_anthropic": ("opentelemetry.instrumentation.anthropic", "AnthropicInstrumentor",
                              "opentelemetry-instrumentation-anthropic"),
    "openinference_anthropic": ("openinference.instrumentation.anthropic", "AnthropicInstrumentor",
                                "openinference-instrumentation-anthropic"),
}


class Unusable(Exception):
    """The variant cannot run as asked (a missing package, no span produced, content leaked)."""


def _httpx() -> Any:
    # openai 3.x sends through httpx2 by default (and still accepts a legacy httpx client).
    try:
        return importlib.import_module("httpx2")
    except ImportError:
        return importlib.import_module("httpx")


def stream_events(body: dict[str, Any]) -> list[bytes]:
    """`body` (a chat.completion) as the server-sent events of the same answer streamed: a
    role chunk, the text, each tool call's name and arguments, the finish reason, the usage."""
    base = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"], "model": body["model"],
            "system_fingerprint": body.get("system_fingerprint")}
    choice = body["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    found = [chunk({"role": "assistant", "content": ""})]
    if message.get("content"):
        found += [chunk({"content": word + " "}) for word in str(message["content"]).split()]
    for index, call in enumerate(message.get("tool_calls") or []):
        found.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                            "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        arguments = call["function"]["arguments"]
        for start in range(0, len(arguments), 16):
            piece = arguments[start:start + 16]
            found.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    found.append(chunk({}, choice["finish_reason"]))
    found.append({**base, "choices": [], "usage": body["usage"]})
    return [b"data: " + json.dumps(event).encode() + b"\n\n" for event in found] + [b"data: [DONE]\n\n"]


def mock_http_client(body: dict[str, Any], *, stream: bool = False, events: Sequence[str] | None = None) -> Any:
    """An HTTP client whose transport answers every request at once with `body`, or, for a
    streamed request, with its server-sent events (`events`; by default the chat chunks of
    `body`), read by the caller one at a time."""
    httpx = _httpx()
    content = json.dumps(body).encode()
    headers = {"content-type": "application/json", "x-request-id": "req_bench", "request-id": "req_bench"}
    events = [event.encode() for event in events] if events is not None else stream_events(body)
    stream_headers = {**headers, "content-type": "text/event-stream; charset=utf-8"}
    # Each answer has an id of its own, as a service's have: an instrumentation that keeps
    # responses by id (OpenLLMetry's Responses wrapper) would otherwise take every call after
    # the first for the first one continued, and make no span.
    same = json.dumps(body["id"]).encode()
    answered = iter(range(1, 1 << 62))

    def answer(request: Any) -> Any:
        own = json.dumps(f"{body['id']}{next(answered):07d}").encode()
        if stream:
            return httpx.Response(200, content=iter([event.replace(same, own) for event in events]),
                                  headers=stream_headers)
        return httpx.Response(200, content=content.replace(same, own), headers=headers)

    return httpx.Client(transport=httpx.MockTransport(answer))


def _wrapped(client: Any, wrap: Callable[[Any], Any] | None) -> Any:
    """`client`, or a client of the same library whose transport is `wrap(client's transport)`."""
    if wrap is None:
        return client
    return _httpx().Client(transport=wrap(client._transport))


def _meter_provider() -> tuple[Any, Any]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    # Never collected during the run: what is timed is the recording, as in a live process.
    reader = InMemoryMetricReader()
    return MeterProvider(metric_readers=[reader], shutdown_on_exit=False), reader


def _metric_points(reader: Any) -> int:
    data = reader.get_metrics_data()
    return sum(len(metric.data.data_points) for resource in (data.resource_metrics if data else ())
               for scope in resource.scope_metrics for metric in scope.metrics)


class _KeepingFirst:
    """Wraps the do-nothing exporter to keep the first span it sees, for the content check."""

    def __init__(self) -> None:
        from bench.nothing import NothingExporter

        class Keeping(NothingExporter):
            first: Any = None

            def export(self, spans: Sequence[Any]) -> Any:
                if self.first is None and spans:
                    self.first = spans[0]
                return super().export(spans)

        self.exporter = Keeping()


def _sdk_client(spec: dict[str, Any], *, open_telemetry: Any = False, wrap: Callable[[Any], Any] | None = None) -> Any:
    """The API's SDK client over the mock (its transport put through `wrap`, when given). The
    same timeout and retries as cafe's LiveClient, so the SDK path is the same; the anthropic
    SDK's own spans off unless `open_telemetry` (its client option) asks for them."""
    http_client = _wrapped(mock_http_client(spec["body"], stream=bool(spec.get("stream")), events=spec.get("events")),
                           wrap)
    if spec.get("api") == "anthropic":
        import anthropic

        return anthropic.Anthropic(api_key=API_KEY, base_url=spec["base_url"], timeout=60.0, max_retries=2,
                                   http_client=http_client, open_telemetry=open_telemetry)
    import openai

    return openai.OpenAI(api_key=API_KEY, base_url=spec["base_url"], timeout=60.0, max_retries=2,
                         http_client=http_client)


def _sdk_call(spec: dict[str, Any], *, open_telemetry: Any = False,
              wrap: Callable[[Any], Any] | None = None) -> Callable[[], Any]:
    client = _sdk_client(spec, open_telemetry=open_telemetry, wrap=wrap)
    api = spec.get("api", "chat")
    create = {"chat": lambda: client.chat.completions.create, "responses": lambda: client.responses.create,
              "anthropic": lambda: client.messages.create}[api]()
    model, request = spec["model"], spec["request"]
    if spec.get("stream"):
        extra = {"stream_options": {"include_usage": True}} if api == "chat" else {}

        def streamed() -> Any:
            events = create(model=model, **request, stream=True, **extra)
            for _event in events:  # read to its end, as a caller showing the answer does
                pass
            return events
        return streamed

    def call() -> Any:
        return create(model=model, **request)
    return call


Prepared = tuple[Callable[[], Any], Callable[[], dict[str, Any]], Callable[[], object]]
"""(one call, the finish: flush, then the versions and counts; a flush of what is queued)"""


def _nothing() -> None:
    return None


def _peer(spec: dict[str, Any], keeper: _KeepingFirst) -> Prepared:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    module, class_name, distribution = PEERS[spec["variant"]]
    try:
        instrumentor_class = getattr(importlib.import_module(module), class_name)
    except ImportError as error:
        raise Unusable(f"{distribution} is not installed here ({error})") from None
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(keeper.exporter))
    options: dict[str, Any] = {"tracer_provider": provider}
    reader = None
    if spec["metrics"]:
        options["meter_provider"], reader = _meter_provider()
    if spec["variant"].startswith("openinference"):
        from openinference.instrumentation import TraceConfig

        # Its content switches, explicit (they would otherwise come from OPENINFERENCE_HIDE_*).
        options["config"] = TraceConfig(hide_inputs=True, hide_outputs=True)
    instrumentor_class().instrument(**options)

    def finish() -> dict[str, Any]:
        provider.force_flush(10_000)
        found = {"metric_points": _metric_points(reader) if reader is not None else None,
                 "version": metadata.version(distribution)}
        provider.shutdown()
        return found
    return _sdk_call(spec), finish, lambda: provider.force_flush(10_000)


def _batched(keeper: _KeepingFirst, version_of: str) -> tuple[Any, Callable[[], dict[str, Any]], Callable[[], object]]:
    """A `TracerProvider` with the SDK's `BatchSpanProcessor` over the do-nothing exporter,
    its finish (flush, then `version_of`'s version) and its flush."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(keeper.exporter))

    def finish() -> dict[str, Any]:
        provider.force_flush(10_000)
        found = {"metric_points": None, "version": metadata.version(version_of)}
        provider.shutdown()
        return found
    return provider, finish, lambda: provider.force_flush(10_000)


def _sdk_span(spec: dict[str, Any], keeper: _KeepingFirst) -> Prepared:
    """The floor of any instrumentation that makes a span: the bare SDK call inside one SDK
    span (CLIENT, current while the call runs) holding the GenAI attributes an instrumentation
    sets, from values known up front (no request or response is read), on a `TracerProvider`
    with the SDK's `BatchSpanProcessor` over the do-nothing exporter."""
    from opentelemetry.trace import SpanKind

    provider, finish, flush = _batched(keeper, "opentelemetry-sdk")
    tracer = provider.get_tracer("bench.floor")
    inner = _sdk_call(spec)
    floor = spec["floor"]
    name, request = floor["name"], floor["request"]
    # A span attribute's sequence value is a tuple, as an instrumentation sets it.
    response = {key: tuple(value) if isinstance(value, list) else value for key, value in floor["response"].items()}

    def call() -> Any:
        with tracer.start_as_current_span(name, kind=SpanKind.CLIENT, attributes=request) as span:
            result = inner()
            span.set_attributes(response)
        return result
    return call, finish, flush


def _bare_live(spec: dict[str, Any]) -> Prepared:
    from cafe.counter.clients.live import LiveClient
    from cafe.counter.clients.settings import LiveSettings

    settings = LiveSettings.from_env({"CAFE_BASE_URL": spec["base_url"], "CAFE_API_KEY": API_KEY,
                                      "CAFE_MODEL": spec["model"]})
    live = LiveClient(settings, http_client=mock_http_client(spec["body"]))
    messages, tools = spec["request"]["messages"], spec["request"]["tools"]
    return (lambda: live.chat(messages, tools, 0.0)), dict, _nothing


WIRE_RECORDED = 64  # the calls a replaying variant's recording holds beyond its warm-up


def _alternating(spec: dict[str, Any], wrap: Callable[[Any], Any]) -> Callable[[], Any]:
    """The bare call and the same call with its first message changed, in turn, each through
    `wrap`: no request extends the one before, so every recorded line holds its request whole
    (as a conversation's first call does), and a replay compares every request whole."""
    request = spec["request"]
    first, *rest = request.get("messages") or request.get("input")
    key = "messages" if "messages" in request else "input"
    other = {**spec, "request": {**request, key: [{**first, "content": f"{first['content']} (again)"}, *rest]}}
    calls = [_sdk_call(spec, wrap=wrap), _sdk_call(other, wrap=wrap)]
    made = [0]

    def call() -> Any:
        made[0] += 1
        return calls[made[0] % 2]()
    return call


def _wire(spec: dict[str, Any], replaying: bool) -> Prepared:
    """The bare SDK call through cafe's wire: each call recorded by a `WireRecorder`, or
    served by a `ReplayTransport` from a recording of the same calls (made here first)."""
    import shutil
    import tempfile
    from pathlib import Path

    from cafe.recording import load_recording
    from cafe.wire import WireRecorder

    wire = importlib.import_module(f"cafe.wire.{_httpx().__name__}")
    folder = Path(tempfile.mkdtemp(prefix="cafe-bench-wire-"))
    recorder = WireRecorder(folder / "calls.jsonl", mode="all")
    recording = _alternating(spec, lambda transport: wire.ObservedTransport(transport, [recorder]))

    def finish() -> dict[str, Any]:
        recorder.close()
        shutil.rmtree(folder, ignore_errors=True)
        return {"version": metadata.version("cafe-otel")}
    if not replaying:
        return recording, finish, _nothing
    for _ in range(spec["warmup"] + WIRE_RECORDED):
        recording()
    recorder.close()
    source = wire.ReplayTransport(load_recording(folder / "calls.jsonl"))
    return _alternating(spec, lambda _transport: source), finish, _nothing


def _ours(spec: dict[str, Any], keeper: _KeepingFirst) -> Prepared:
    """The bare SDK call under our instrumentor (`cafe_otel.instrumentation`, on the wire
    seam), reporting through `configure()`'s pipeline: content off, as figure 1 builds it;
    with metrics, the handle's MetricsListener on its in-process streams."""
    from bench import overhead
    from cafe_otel.instrumentation import OpenAIWireInstrumentor

    handle = overhead._configure(False, keeper.exporter, metrics=bool(spec["metrics"]))
    OpenAIWireInstrumentor().instrument(telemetry=handle)
    call = _sdk_call(spec)

    def finish() -> dict[str, Any]:
        handle.force_flush(10.0)  # exports the metrics: their points are then in the account
        found = {"metric_points": handle.account.snapshot().metric_points_exported if spec["metrics"] else None,
                 "dropped": handle.account.dropped, "version": metadata.version("cafe-otel")}
        handle.shutdown(2.0)
        return found
    return call, finish, lambda: handle.force_flush(10.0)


def _anthropic_sdk(spec: dict[str, Any], keeper: _KeepingFirst) -> Prepared:
    """The anthropic SDK's own spans (its `open_telemetry` client option, metadata only) on a
    `TracerProvider` with the SDK's `BatchSpanProcessor` over the do-nothing exporter."""
    provider, finish, flush = _batched(keeper, "anthropic")
    call = _sdk_call(spec, open_telemetry={"tracer_provider": provider, "traces": {"content_mode": "metadata_only"}})
    return call, finish, flush


def _content_found(span: Any, markers: Sequence[str]) -> str | None:
    """The first attribute (or event attribute) of `span` that carries one of the markers."""
    places = [("", dict(span.attributes or {}))]
    places += [(f"event {event.name}: ", dict(event.attributes or {})) for event in span.events]
    for where, attributes in places:
        for key, value in attributes.items():
            text = json.dumps(value, default=str) if not isinstance(value, str) else value
            if any(marker in text for marker in markers):
                return f"{where}{key}"
    return None


def prepare(spec: dict[str, Any]) -> tuple[Callable[[], Any], Callable[[], dict[str, Any]], _KeepingFirst | None,
                                           Callable[[], object]]:
    """The variant's call, its finish (flush, versions), its span keeper and its flush, warmed up."""
    variant = spec["variant"]
    keeper = _KeepingFirst() if variant not in ("bare", "bare_live", "wire_recording", "wire_replaying") else None
    if variant == "bare":
        call, finish, flush = _sdk_call(spec), dict, _nothing
    elif variant in PEERS:
        call, finish, flush = _peer(spec, keeper)
    elif variant == "bare_live":
        call, finish, flush = _bare_live(spec)
    elif variant == "ours":
        call, finish, flush = _ours(spec, keeper)
    elif variant in ("wire_recording", "wire_replaying"):
        call, finish, flush = _wire(spec, replaying=variant == "wire_replaying")
    elif variant == "sdk_span":
        call, finish, flush = _sdk_span(spec, keeper)
    elif variant == "anthropic_sdk":
        call, finish, flush = _anthropic_sdk(spec, keeper)
    else:
        raise Unusable(f"unknown variant {variant!r}")
    for _ in range(spec["warmup"]):
        call()
    return call, finish, keeper, flush


def counted(spec: dict[str, Any], extra: int) -> dict[str, Any]:
    """What callgrind counts: the warm-up, a flush and a collection, then `extra` more calls,
    a flush and a collection (so each phase pays for its own spans' export and garbage)."""
    call, finish, keeper, flush = prepare(spec)
    flush()
    gc.collect()
    for _ in range(extra):
        call()
    flush()
    gc.collect()
    return conclude(spec, finish, keeper, spec["warmup"] + extra)


def sample(call: Callable[[], Any], calls: int) -> dict[str, float]:
    """Seconds a call over `calls` calls: wall clock, and this process's CPU time (every
    thread, so the batch worker's export is counted; time spent descheduled is not)."""
    getattr(call, "new_sample", lambda: None)()
    gc.collect()  # this sample pays for its own garbage, not the previous one's
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        call()
    return {"wall": (time.perf_counter() - wall) / calls, "cpu": (time.process_time() - cpu) / calls}


def conclude(spec: dict[str, Any], finish: Callable[[], dict[str, Any]], keeper: _KeepingFirst | None,
             calls: int) -> dict[str, Any]:
    """Flush, then check what the variant produced: spans, no content, metrics if asked for."""
    variant = spec["variant"]
    sdk = "anthropic" if spec.get("api") == "anthropic" else "openai"
    result = {"variant": variant, "metrics": spec["metrics"], "calls": calls,
              "sdk": f"{sdk} {metadata.version(sdk)}", **finish()}
    if keeper is not None:
        exported = keeper.exporter.spans
        result["spans"] = exported
        if exported == 0 or keeper.exporter.first is None:
            raise Unusable(f"{variant}: no span reached the exporter after {calls} calls")
        if exported < calls:  # it would be priced on calls it did not instrument
            raise Unusable(f"{variant}: {exported} spans reached the exporter for {calls} calls")
        leaked = _content_found(keeper.exporter.first, spec["markers"])
        if leaked:
            raise Unusable(f"{variant}: content capture is not off (message text in {leaked})")
        if spec["metrics"] and not result.get("metric_points"):
            raise Unusable(f"{variant}: metrics were asked for but none were recorded")
    try:
        result["opentelemetry_sdk"] = metadata.version("opentelemetry-sdk")
    except metadata.PackageNotFoundError:
        result["opentelemetry_sdk"] = None
    return result


def main(argv: list[str]) -> int:
    """Prepare, say `ready`, then answer the parent's lines: `sample N` with one JSON sample,
    `finish` with the JSON result (then exit). The parent hands out the samples in turn so
    that all variants of a round are measured at the same moments of a noisy machine."""
    counting = len(argv) == 3 and argv[1] == "count" and argv[2].isdigit()
    if len(argv) != 1 and not counting:
        print("usage: python -m bench.peer_runner SPEC.json [count N]", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as handle:
        spec = json.load(handle)
    try:
        if counting:
            print(json.dumps(counted(spec, int(argv[2]))), flush=True)
            return 0
        call, finish, keeper, _flush = prepare(spec)
        calls = spec["warmup"]
        print("ready", flush=True)
        for line in sys.stdin:
            command = line.split()
            if command[:1] == ["sample"]:
                count = int(command[1])
                print(json.dumps(sample(call, count)), flush=True)
                calls += count
            elif command == ["finish"]:
                print(json.dumps(conclude(spec, finish, keeper, calls)), flush=True)
                return 0
        return 0  # the parent went away
    except Unusable as error:
        print(f"peer_runner: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
