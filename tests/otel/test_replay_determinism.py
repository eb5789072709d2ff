"""Acceptance: two replays of one recording yield byte-identical OTLP protobuf; a recording
(ours or the seed's plain format) converts straight to spans on its own timeline."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import cafe
from cafe import counter
from cafe.cli import main
from cafe_otel import AdvancedOptions, SequentialIdGenerator, configure, describe, diff, encode, export_recording
from cafe_otel._cli.plugin import plugin

from .conftest import SEED_DECISIONS

ORIGIN = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def recording(tmp_path) -> Path:
    path = tmp_path / "seed-shift.jsonl"
    run, _ = counter.record_shift(
        counter.ScriptedClient(), counter.DEFAULT_SCRIPT, path, responder=counter.make_responder(SEED_DECISIONS),
        decisions=SEED_DECISIONS, seed=7, wall_clock_ns=lambda: ORIGIN,
    )
    assert run.stop_reason == "answered"
    return path


def replay_to_otlp(path: Path) -> bytes:
    """One replay under sequential ids, a fixed resource and the recording's timeline."""
    recording = cafe.load_recording(path)
    sink = InMemorySpanExporter()
    handle = configure("cafe-replay", exporter=sink, environ={},
                       advanced=AdvancedOptions(replay=True, id_generator=SequentialIdGenerator()))
    tracer = handle.tracer(cafe.TickClock(), origin_unix_nano=recording.header.clock_origin_unix_nano)
    run, _ = counter.replay_shift(recording, tracer=tracer)
    assert run.stop_reason == "answered"
    handle.shutdown(2.0)
    assert handle.account.dropped == 0
    return encode(sink.get_finished_spans())


def test_two_replays_give_byte_identical_otlp(recording):
    first, second = replay_to_otlp(recording), replay_to_otlp(recording)
    assert first == second, diff(first, second)
    request = ExportTraceServiceRequest.FromString(first)
    spans = request.resource_spans[0].scope_spans[0].spans
    assert len(spans) == 17
    # On the recording's own timeline (one tick a second from its origin), not the wall
    # clock's: a wall-clock replay would start later than ORIGIN and differ run to run.
    assert min(span.start_time_unix_nano for span in spans) == ORIGIN
    assert max(span.end_time_unix_nano for span in spans) == ORIGIN + 33 * 10**9  # 17 spans, 34 ticks
    resource = {kv.key for kv in request.resource_spans[0].resource.attributes}
    assert "service.instance.id" not in resource


def test_a_replay_in_another_process_gives_the_same_bytes(recording, tmp_path):
    script = (
        "import sys; from pathlib import Path; "
        "from tests.otel.test_replay_determinism import replay_to_otlp; "
        "Path(sys.argv[2]).write_bytes(replay_to_otlp(Path(sys.argv[1])))"
    )
    out = tmp_path / "other.otlp"
    subprocess.run([sys.executable, "-c", script, str(recording), str(out)], cwd=REPO, check=True,
                   timeout=120, env={"PYTHONHASHSEED": "123", "PATH": ""})
    assert out.read_bytes() == replay_to_otlp(recording)


def test_the_diff_names_what_differs(recording):
    first = replay_to_otlp(recording)
    sink = InMemorySpanExporter()
    handle = configure("cafe-replay", exporter=sink, environ={},
                       advanced=AdvancedOptions(replay=True, id_generator=SequentialIdGenerator()))
    counter.replay_shift(recording, tracer=handle.tracer(cafe.TickClock(step=2.0), origin_unix_nano=ORIGIN))
    handle.shutdown(2.0)
    other = encode(sink.get_finished_spans())
    text = diff(first, other)
    assert text.startswith("--- expected")
    assert "start=" in text and "span 'invoke_agent cafe-counter'" in text
    assert diff(first, first) == ""
    assert describe(first)[0].startswith("resource ")


def _export(path, provider_sink=None) -> tuple[bytes, list]:
    sink = provider_sink or InMemorySpanExporter()
    handle = configure("cafe-export", exporter=sink, environ={},
                       advanced=AdvancedOptions(replay=True, id_generator=SequentialIdGenerator()))
    count = export_recording(path, handle.provider)
    handle.shutdown(2.0)
    spans = list(sink.get_finished_spans())
    assert len(spans) == count
    return encode(spans), spans


def test_export_puts_each_recorded_call_on_its_recorded_timeline(recording):
    data, spans = _export(recording)
    assert data == _export(recording)[0]
    calls = cafe.load_recording(recording).calls
    by_id = {s.context.span_id: s for s in spans}
    chats = [s for s in spans if s.name == "chat scripted-barista-1"]
    agent = next(s for s in spans if s.name == "invoke_agent cafe-counter")
    assert len(chats) == len(calls) == 5
    for number, (span, call) in enumerate(zip(chats, calls, strict=True), start=1):
        turn = by_id[span.parent.span_id]
        assert turn.name == f"turn {number}" and turn.parent.span_id == agent.context.span_id
        assert span.start_time == call.timing.start_unix_nano
        assert span.end_time == call.timing.start_unix_nano + call.timing.duration_ns
        assert turn.start_time <= span.start_time and span.end_time <= turn.end_time
        assert span.attributes["gen_ai.usage.input_tokens"] == call.response["usage"]["prompt_tokens"]
        assert span.attributes["gen_ai.response.id"] == call.response["id"]
        assert span.attributes["gen_ai.response.finish_reasons"] == (call.response["choices"][0]["finish_reason"],)
    assert chats[0].attributes["cafe.gen_ai.tool_calls"] == ("price_check", "price_check")
    assert agent.start_time == ORIGIN and agent.end_time == max(s.end_time for s in chats)
    assert all(agent.start_time <= s.start_time <= s.end_time <= agent.end_time for s in spans)
    assert agent.attributes["cafe.stop_reason"] == "answered"
    assert agent.attributes["gen_ai.provider.name"] == "cafe.scripted"


def _plain_seed_file(recording: Path, tmp_path: Path) -> Path:
    plain = tmp_path / "seed-format.jsonl"
    lines = [json.dumps({"request": c.request, "response": c.response}) for c in cafe.load_recording(recording).calls]
    plain.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return plain


def test_a_plain_seed_format_file_converts_on_a_synthetic_timeline(recording, tmp_path):
    plain = _plain_seed_file(recording, tmp_path)
    assert cafe.load_recording(plain).header.version == 0
    data, spans = _export(plain)
    assert data == _export(plain)[0]
    chats = [s for s in spans if s.name.startswith("chat ")]
    ticks = [(n * 1_000_000, (n + 1) * 1_000_000) for n in (1, 3, 5, 7, 9)]
    assert [(s.start_time, s.end_time) for s in chats] == ticks
    assert [s.attributes["gen_ai.usage.output_tokens"] for s in chats] == [12, 9, 12, 12, 9]
    assert chats[0].name == "chat scripted-barista-1"  # the model from the responses


def _cli(argv, environ=None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, environ=environ or {}, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("kind", ["recording", "plain"])
def test_cafe_export_writes_deterministic_otlp(recording, tmp_path, kind):
    source = recording if kind == "recording" else _plain_seed_file(recording, tmp_path)
    first, second = tmp_path / "a.otlp", tmp_path / "b.otlp"
    code, out, err = _cli(["export", str(source), "--out", str(first)])
    assert (code, err) == (0, ""), err
    assert out == f"wrote 17 spans (5 model calls) to {first}\n"
    assert _cli(["export", str(source), "--out", str(second)])[0] == 0
    assert first.read_bytes() == second.read_bytes()
    request = ExportTraceServiceRequest.FromString(first.read_bytes())
    names = [s.name for s in request.resource_spans[0].scope_spans[0].spans]
    assert sorted(names) == sorted(["chat scripted-barista-1"] * 5 + ["invoke_agent cafe-counter"]
                                   + ["execute_tool price_check"] * 2 + ["execute_tool propose_order"]
                                   + ["execute_tool fire_ticket"] + ["setup", "wrapup"]
                                   + [f"turn {n}" for n in (1, 2, 3, 4, 5)])


def test_the_plugin_is_found_through_its_entry_point():
    from cafe.cli.plugins import installed_plugins

    found = installed_plugins(lambda line: None)
    assert any(p is plugin for p in found)


def test_the_conversation_id_travels_from_the_recording_to_replays_and_exported_spans(tmp_path):
    path = tmp_path / "conversation.jsonl"
    counter.record_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, path, responder=counter.make_responder([]),
                      conversation_id="shift-7f3a")
    assert cafe.load_recording(path).header.conversation_id == "shift-7f3a"
    replayed, _ = counter.replay_shift(path, responder=counter.make_responder([]))
    assert replayed.conversation_id == "shift-7f3a"
    sink = InMemorySpanExporter()
    handle = configure("cafe-export", exporter=sink, environ={}, advanced=AdvancedOptions(replay=True))
    export_recording(path, handle.provider)
    handle.shutdown(2.0)
    genai = [s for s in sink.get_finished_spans()
             if s.attributes.get("gen_ai.operation.name") in ("invoke_agent", "chat")]
    assert len(genai) == 5  # invoke_agent and 4 chats: the order was rejected
    assert {span.attributes.get("gen_ai.conversation.id") for span in genai} == {"shift-7f3a"}
