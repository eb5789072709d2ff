"""`cafe demo`: one shift at the café counter, offline, and the three things it leaves behind.

The story is played by `cafe.counter.clients.story.StoryClient` (deterministic, no network): a
customer with an egg allergy asks about a dish, orders for a table, approves the proposal;
the ticket fires once and the model's retry is refused as a duplicate. Then: the private
recording (where, what it holds), the span tree with its real durations, what leaves the
process as OpenTelemetry (metadata-only spans and metrics, searched for every customer line
as OTLP bytes), and the same shift replayed from the recording with zero model calls.

Nothing is sent anywhere: spans and metrics go to in-memory exporters. The recording is
written in a temporary directory removed at the end, or under `--keep DIR`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.sdk.metrics.export import HistogramDataPoint, MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cafe.cli.plugins import path_argument
from cafe.counter import (
    SHIFT_WORDS,
    STORY_DECISIONS,
    STORY_SCRIPT,
    SYSTEM_PROMPT,
    ShiftRun,
    StoryClient,
    handover_note,
    make_responder,
    record_shift,
    replay_shift,
    transcript,
)
from cafe.errors import UsageError
from cafe.recording import Recording, RecordingError, RecordingExists, ReplayMismatch, Scrubber, load_recording
from cafe.trace import StopReason, Timeline, Tracer
from cafe.view import scrubbed, shift_page, timeline, write_mismatch_report, write_private_page
from cafe_otel._config.options import MetricsOptions
from cafe_otel._configure import configure
from cafe_otel._offline.otlp_bytes import encode

DEMO_SEED = 7
CONVERSATION_ID = "demo-shift-1"
RECORDING_NAME = "shift.jsonl"
MISMATCH_PAGE, SHIFT_PAGE = "mismatch.html", "shift.html"


class _KeptMetrics(MetricExporter):
    """The metrics the process would send, kept in memory (the demo sends nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self.last: MetricsData | None = None

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: object) -> MetricExportResult:
        self.last = metrics_data
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: object) -> None:
        return None


def _results(run: ShiftRun) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for message in run.messages:
        if message.get("role") == "tool":
            try:
                found[str(message.get("tool_call_id"))] = json.loads(str(message.get("content")))
            except ValueError:
                found[str(message.get("tool_call_id"))] = {}
    return found


def _tool_line(name: str, arguments: dict[str, Any], result: dict[str, Any], retry: bool) -> str:
    if name == "check_allergens":
        allergen = result.get("allergen")
        verdict = f"contains {allergen}" if result.get("contains") else f"no {allergen}"
        listed = ", ".join(result.get("allergens") or []) or "none"
        return f"  checks allergens: {arguments.get('item')} -> {verdict} (menu: {listed})"
    if name == "price_check":
        return f"  checks the price: {arguments.get('item')} -> EUR {result.get('price_eur', 0):.2f}"
    if name == "propose_order":
        ticket = result.get("ticket") or {}
        shown = ", ".join(arguments.get("items") or [])
        decision = result.get("status")
        approval = f" (approval {result.get('approval_id')})" if decision == "approved" else ""
        tail = f" -> customer {decision}{approval}"
        checked = ", allergens checked" if ticket.get("allergen_checked") else ""
        total = f"EUR {ticket.get('total_eur', 0):.2f}"
        return f"  proposes: table {arguments.get('table')}: {shown}, {total}{checked}{tail}"
    if name == "fire_ticket":
        again = " again (a retry)" if retry else ""
        if result.get("status") == "fired":
            return f"  fires the ticket{again} -> ticket {result.get('ticket_number')} sent to the kitchen"
        return f"  fires the ticket{again} -> REFUSED ({result.get('status')}): the executor consumed the approval once"
    return f"  {name}({json.dumps(arguments, sort_keys=True)})"


def _story(run: ShiftRun) -> list[str]:
    lines: list[str] = []
    results = _results(run)
    fires = 0
    for message in run.messages:
        role = message.get("role")
        if role == "user":
            lines.append(f"customer: {message.get('content')}")
        elif role == "assistant":
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                except ValueError:
                    arguments = {}
                if function.get("name") == "fire_ticket":
                    fires += 1
                lines.append(_tool_line(str(function.get("name")), arguments, results.get(str(call.get("id")), {}),
                                        retry=function.get("name") == "fire_ticket" and fires > 1))
            if message.get("content"):
                lines.append(f"agent: {message.get('content')}")
    return lines


def _span_lines(spans: Sequence[ReadableSpan]) -> list[str]:
    ordered = sorted(spans, key=lambda span: span.start_time or 0)
    names = Counter(span.name for span in ordered)
    lines = [f"{len(spans)} spans: " + ", ".join(f"{count} x {name}" if count > 1 else name
                                                 for name, count in names.items())]
    sample = next((span for span in ordered if span.name.startswith("chat ")), None)
    if sample is not None:
        shown = ", ".join(f"{key}={value!s}" for key, value in sorted((sample.attributes or {}).items()))
        lines.append(f"the first chat span's attributes, all of them: {shown}")
    statuses = Counter(
        f"{(span.attributes or {}).get('gen_ai.tool.name')}={(span.attributes or {}).get('cafe.tool.status')}"
        for span in ordered if span.name.startswith("execute_tool"))
    lines.append("tool spans: " + ", ".join(f"{label} x{n}" if n > 1 else label for label, n in statuses.items()))
    return lines


def _metric_lines(data: MetricsData | None) -> list[str]:
    if data is None:
        return ["(no metrics)"]
    lines = []
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                for point in metric.data.data_points:
                    attributes = dict(point.attributes or {})
                    label = ",".join(f"{v}" for k, v in sorted(attributes.items())
                                     if k in ("gen_ai.token.type", "cafe.stop_reason", "gen_ai.tool.name",
                                              "cafe.tool.status", "cafe.consent.outcome"))
                    if isinstance(point, HistogramDataPoint):
                        value = f"sum {point.sum:g} over {point.count}"
                    else:
                        value = f"{getattr(point, 'value', '?')}"
                    lines.append(f"{metric.name}{{{label}}} {value} {metric.unit or ''}".rstrip())
    return lines


def _customer_text(run: ShiftRun) -> list[str]:
    """Every string the customer said, and the words in them long enough to be telling."""
    said = [str(m.get("content")) for m in run.messages if m.get("role") == "user"]
    words = {w.strip("?!.,'") for line in said for w in line.split() if len(w.strip("?!.,'")) >= 6}
    return said + sorted(words)


class KeptRecordingExists(RecordingExists):
    """`--keep DIR` already holds a demo recording: the demo never overwrites one (and has
    no record mode to ask it to)."""

    def __init__(self, path: Path) -> None:
        RecordingError.__init__(self, f"{path}: a recording already exists; cafe demo never overwrites one "
                                      "(choose another --keep DIR, or remove it)")
        self.path, self.kept = path, None


def _keep_directory(keep: Path) -> Path:
    """Where a kept recording goes, checked before the shift: a directory, made if missing."""
    if os.path.lexists(keep) and not keep.is_dir():
        raise UsageError(f"cafe demo --keep {keep}: not a directory")
    path = keep / RECORDING_NAME
    if os.path.lexists(path):
        raise KeptRecordingExists(path)
    for page in (keep / MISMATCH_PAGE, keep / SHIFT_PAGE):
        if os.path.lexists(page):
            raise UsageError(f"cafe demo --keep {keep}: {page.name} is already there and the demo never "
                             "overwrites a page (choose another --keep DIR, or remove it)")
    try:
        keep.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"cafe demo --keep {keep}: the directory cannot be made ({type(error).__name__})") from None
    return keep


def run_demo(out: TextIO, keep: Path | None = None) -> int:
    directory = _keep_directory(keep) if keep is not None else Path(tempfile.mkdtemp(prefix="cafe-demo-"))
    path = directory / RECORDING_NAME
    try:
        return _demo(out, path, kept=keep is not None)
    finally:
        if keep is None:
            for leftover in directory.glob("*"):
                leftover.unlink()
            directory.rmdir()


def _demo(out: TextIO, path: Path, *, kept: bool) -> int:
    spans_out, metrics_out = InMemorySpanExporter(), _KeptMetrics()
    handle = configure("cafe-demo", exporter=spans_out, metrics=MetricsOptions(exporter=metrics_out), environ={})
    timeline = Timeline()
    tracer = handle.tracer(timeline, origin_unix_nano=timeline.origin_unix_nano)
    model = StoryClient()
    run, _ = record_shift(model, list(STORY_SCRIPT), path, responder=make_responder(STORY_DECISIONS), tracer=tracer,
                          decisions=list(STORY_DECISIONS), seed=DEMO_SEED, timeline=timeline,
                          conversation_id=CONVERSATION_ID)
    handle.shutdown(2.0)
    calls_live = model.calls

    out.write("cafe demo: one shift at the café counter, offline (a scripted model), and what it leaves behind.\n\n")
    out.write("== the shift ==\n" + "\n".join(_story(run)) + "\n")
    fired = [a for a in run.fires if a.status == "fired"]
    refused = [a for a in run.fires if a.status != "fired"]
    out.write(f"shift ended: {run.stop_reason} after {run.turns_used} turns; tickets fired: {len(fired)}; "
              f"fires refused: {len(refused)}"
              + (f" ({refused[0].status} of the fire at turn {refused[0].duplicate_of_turn})" if refused else "")
              + "\n")
    if run.stop_reason == StopReason.CONSENT_VIOLATION and fired:
        out.write("that is the guard at work, not a failure: the model fired one approval twice, the executor "
                  "refused the second, and the shift stopped there. The customer pays once.\n")
    out.write("\n")
    note = handover_note(run, clock=lambda: timeline.origin_unix_nano / 1e9, rng=random.Random(DEMO_SEED))
    out.write("== handover note ==\n" + note + "\n\n")

    recording = load_recording(path)
    size = path.stat().st_size
    mode = path.stat().st_mode & 0o777
    where = str(path) if kept else f"{path} (in a temporary directory removed at the end; keep it with --keep DIR)"
    out.write("== 1. the private recording (what CI replays) ==\n")
    out.write(f"{where}\nmode {mode:04o}, {len(recording.calls) + 2} lines (header, {len(recording.calls)} model "
              f"calls with request, response and timing, end line), {size:,} bytes: the whole conversation, "
              "kept private and never exported\n")
    if kept:
        out.write(f"look at it: cafe view {path} -o {path.with_suffix('.html')}\n")
    out.write("\n== 2. the span tree, in memory ==\n" + tracer.render() + "\n\n")

    spans = spans_out.get_finished_spans()
    out.write("== 3. what leaves the process: OpenTelemetry, metadata only ==\n")
    out.write("\n".join(_span_lines(spans)) + "\nmetrics:\n  " + "\n  ".join(_metric_lines(metrics_out.last)) + "\n")
    exported = encode(spans) + (encode_metrics(metrics_out.last).SerializeToString() if metrics_out.last else b"")
    searched = _customer_text(run)
    leaked = [text for text in searched if text.encode() in exported]
    out.write(f"customer text in the telemetry: {'none' if not leaked else len(leaked)} (each customer line "
              f"and its longer words, {len(searched)} strings, searched for in {len(exported):,} bytes of OTLP)\n")
    out.write(f"account: {handle.account.summary()}\n\n")

    replayed, _ = replay_shift(path, tracer=Tracer())
    same = transcript(replayed) == transcript(run)
    out.write("== 4. the replay ==\n")
    out.write(f"replayed {replayed.model_calls} calls from the recording with {model.calls - calls_live} model calls; "
              f"transcript identical: {'yes' if same else 'NO'}; stop reason {replayed.stop_reason}\n\n")

    caught = _changed_prompt(out, path, recording, kept=kept)
    _view_page(out, path, recording, kept=kept)
    _next_commands(out, path if kept else Path("DIR") / RECORDING_NAME)
    return 0 if same and not leaked and caught else 1


def _changed_prompt(out: TextIO, path: Path, recording: Recording, *, kept: bool) -> bool:
    """What CI buys: the recording, replayed after a one-word edit of the system prompt,
    fails on the first call, in one line, with a page that shows the difference."""
    edited = SYSTEM_PROMPT.replace("warm, brief and exact", "warm, chatty and exact", 1)
    out.write("== 5. what CI catches: the same replay after a one-word prompt edit ==\n")
    try:
        replay_shift(path, tracer=Tracer(), system_prompt=edited)
    except ReplayMismatch as error:
        page = write_mismatch_report(path.with_name(MISMATCH_PAGE), recording, error)
        out.write(f"cafe: error: {error}\n")
        out.write(f"exit {error.exit_code}; the page of the mismatch, recorded and incoming request side by side: "
                  f"{_where(page, kept)}\n\n")
        return True
    out.write("the edited prompt replayed without a mismatch: the demo is broken\n\n")
    return False


def _view_page(out: TextIO, path: Path, recording: Recording, *, kept: bool) -> None:
    shift = timeline(scrubbed(recording, Scrubber.from_environment({})), SHIFT_WORDS)
    page = write_private_page(path.with_name(SHIFT_PAGE), shift_page(shift, source=str(path)))
    out.write("== 6. the shift as a page (cafe view) ==\n")
    out.write(f"{_where(page, kept)}: the conversation, every call on its recorded timeline, tokens and tools; "
              "private (mode 0600), like the recording\n\n")


def _where(page: Path, kept: bool) -> str:
    return str(page) if kept else f"{page} (removed at the end; keep it with --keep DIR)"


def _next_commands(out: TextIO, recording: Path) -> None:
    out.write("== next ==\n")
    for command, what in (
        ("cafe demo --keep DIR", "keep the recording and both pages to open them"),
        (f"cafe view {recording} -o shift.html", "the page of a recording"),
        (f"cafe replay {recording} --show", "a replay with zero model calls, its transcript and span tree"),
        (f"cafe replay {recording} --report mismatch.html", "on a mismatch, its page too"),
        ("cafe shift --record my-shift.jsonl", "record a shift of your own (CAFE_MODE=live for a real model)"),
        (f"cafe export {recording} --otlp=http://127.0.0.1:4317", "send a recording to a collector as spans"),
    ):
        out.write(f"  {command}  # {what}\n")  # a line to paste into a shell, comment and all


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("demo", help="one offline shift: the story, its recording, spans, telemetry, replay")
    parser.add_argument("--keep", metavar="DIR", type=path_argument("a directory", kind="directory"),
                        help="keep the recording in DIR (default: a temporary directory, removed at the end)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    return run_demo(out, None if args.keep is None else Path(args.keep))
