"""A recording's call starts are its shift's generation starts, on one clock."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from cafe.counter import record_shift
from cafe.counter.clients.scripted import ScriptedClient
from cafe.counter.consent import make_responder
from cafe.recording import load_recording
from cafe.trace.clock import TickClock, Timeline
from cafe.trace.tracer import Tracer
from tests.recording.helpers import run_cli

SCRIPT = ["A latte and a chocolate croissant, please.", "What is in the croissant?", "Nothing else, thanks."]
COMMITTED = Path(__file__).resolve().parents[1] / "recordings" / "seed-shift.jsonl"


def _starts(path: Path) -> list[int]:
    return [call.timing.start_unix_nano for call in load_recording(path).calls]


def test_call_starts_are_the_tracers_generation_starts(tmp_path: Path):
    timeline = Timeline()
    tracer = Tracer(clock=timeline)
    path = tmp_path / "t.jsonl"
    record_shift(ScriptedClient(), SCRIPT, path, responder=make_responder([("approve", None)]),
                 tracer=tracer, timeline=timeline)
    starts = _starts(path)
    generations = [timeline.unix_nano(node.start) for node in tracer.generations()]
    assert len(starts) >= 3
    assert starts == generations  # the same reading, not a second clock
    assert all(a < b for a, b in pairwise(starts))
    assert load_recording(path).header.clock_origin_unix_nano == timeline.origin_unix_nano < starts[0]


def test_a_deterministic_timeline_gives_deterministic_starts(tmp_path: Path):
    for name in ("a.jsonl", "b.jsonl"):
        ticks = iter(range(0, 10**12, 1000))
        timeline = Timeline(1_700_000_000_000_000_000, monotonic_ns=ticks.__next__)
        record_shift(ScriptedClient(), SCRIPT, tmp_path / name, responder=make_responder([("approve", None)]),
                     tracer=Tracer(clock=timeline), timeline=timeline)
    assert _starts(tmp_path / "a.jsonl") == _starts(tmp_path / "b.jsonl")


def test_without_a_timeline_of_the_tracer_the_recorder_reads_its_own(tmp_path: Path):
    path = tmp_path / "own.jsonl"
    record_shift(ScriptedClient(), SCRIPT, path, responder=make_responder([("approve", None)]),
                 tracer=Tracer(clock=TickClock()))
    starts = _starts(path)
    assert all(a < b for a, b in pairwise(starts))


def test_cafe_shift_records_strictly_increasing_call_starts(tmp_path: Path):
    path = tmp_path / "cli.jsonl"
    assert run_cli("shift", "--record", str(path), "--seed", "7")[0] == 0
    recording = load_recording(path)
    starts = _starts(path)
    assert len(set(starts)) == len(starts) == 5
    assert all(a < b for a, b in pairwise(starts))
    assert recording.header.clock_origin_unix_nano < starts[0]
    for call, following in zip(recording.calls, recording.calls[1:], strict=False):
        assert call.timing.start_unix_nano + call.timing.duration_ns <= following.timing.start_unix_nano


def test_the_committed_recording_has_increasing_call_starts():
    starts = _starts(COMMITTED)
    assert all(a < b for a, b in pairwise(starts))


def test_exported_chat_spans_start_where_the_recorded_calls_start(tmp_path: Path, monkeypatch):
    import importlib
    import io

    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    # The CLI plugin resolves its settings, then builds: the sink goes in where it resolves.
    plugin_module = importlib.import_module("cafe_otel._cli.plugin")
    from cafe.cli import main
    from cafe.cli.plugins import installed_plugins

    sink = InMemorySpanExporter()
    real_resolve = plugin_module.resolve
    monkeypatch.setattr(plugin_module, "resolve",
                        lambda environ, **options: real_resolve(environ, **options, exporter=sink))
    path = tmp_path / "live.jsonl"
    err = io.StringIO()
    code = main(["shift", "--record", str(path), "--seed", "7", "--otlp=http://127.0.0.1:9"], environ={},
                out=io.StringIO(), err=err, load_plugins=installed_plugins)
    assert code == 0, err.getvalue()
    chats = sorted(span.start_time for span in sink.get_finished_spans() if span.name.startswith("chat "))
    assert chats == _starts(path)
