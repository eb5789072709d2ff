"""Golden OTLP files: a replay's telemetry pinned byte for byte beside its recording.

A replay under sequential ids, the recording's own timeline and a resource without random
parts encodes to the same OTLP bytes on every run, so any difference is a change in what
the harness emits. The mismatch names the first span that changed and the field, in one
line; `otlp.diff` gives the whole picture when it is wanted.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from google.protobuf.message import DecodeError
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cafe.cli.plugins import UnsafeOutput, check_output, write_output
from cafe.counter import replay_shift
from cafe.errors import CafeError
from cafe.recording import Recording, load_recording
from cafe.trace import TickClock
from cafe_otel._config.options import AdvancedOptions
from cafe_otel._configure import configure
from cafe_otel._offline.otlp_bytes import describe, encode
from cafe_otel._spans.ids import SequentialIdGenerator

REPLAY_SERVICE = "cafe-replay"


def _update_command(recording: Path | str | None, golden: Path, truncated: bool = False) -> str:
    flags = " --allow-truncated" if truncated else ""
    return f"cafe golden {recording if recording is not None else 'RECORDING'} {golden} --update{flags}"


def remedy(recording: Path | str | None, golden: Path, truncated: bool = False, verb: str = "write one") -> str:
    """The way to (re)write the golden file, checked: `--update` is named only where it
    would write; elsewhere (a directory, a FIFO, the recording itself) why it would not."""
    try:
        check_output(golden, reads=[recording] if recording is not None else [])
    except UnsafeOutput as error:
        return f"--update cannot write it there: {error.why}; choose another golden path"
    return f"{verb} with `{_update_command(recording, golden, truncated)}`"


class GoldenMissing(CafeError):
    exit_code = 46

    def __init__(self, path: Path, recording: Path | str | None = None, fix: str | None = None) -> None:
        fix = fix or f"write one with `{_update_command(recording, path)}`"
        super().__init__(f"{path}: no golden OTLP file ({fix})")


class GoldenMismatch(CafeError):
    exit_code = 47

    def __init__(self, path: Path, where: str, expected: bytes, actual: bytes,
                 recording: Path | str | None = None, fix: str | None = None) -> None:
        self.path, self.where, self.expected, self.actual = path, where, expected, actual
        fix = fix or f"accept it with `{_update_command(recording, path)}`"
        super().__init__(
            f"{path}: the replay's OTLP differs from the golden file: {where} "
            f"(if the change is intended, {fix})"
        )


def replay_otlp(
    source: Recording | Path | str,
    *,
    service_name: str = REPLAY_SERVICE,
    environ: Mapping[str, str] | None = None,
) -> bytes:
    """Replay a recording (zero model calls) and encode its spans as OTLP protobuf."""
    recording = source if isinstance(source, Recording) else load_recording(source)
    sink = InMemorySpanExporter()
    handle = configure(service_name, exporter=sink, environ={} if environ is None else environ,
                       advanced=AdvancedOptions(replay=True, id_generator=SequentialIdGenerator()))
    tracer = handle.tracer(TickClock(), origin_unix_nano=recording.header.clock_origin_unix_nano or 0)
    try:
        replay_shift(recording, tracer=tracer)
    finally:
        handle.shutdown()
    return encode(sink.get_finished_spans())


def _spans(data: bytes) -> list[list[str]]:
    """The readable form, one block of lines per span (resource and scope lines are their
    own blocks, so a changed resource is named too)."""
    blocks: list[list[str]] = []
    for line in describe(data):
        if not line.startswith("      ") or not blocks:
            blocks.append([line.strip()])
        else:
            blocks[-1].append(line.strip())
    return blocks


def first_change(expected: bytes, actual: bytes) -> str | None:
    """Where two encodings first differ, as 'span #3 'chat m': field: old -> new'."""
    if expected == actual:
        return None
    try:
        old = _spans(expected)
    except DecodeError:
        return "the golden file is not a readable OTLP export request"
    new = _spans(actual)
    for index, (a, b) in enumerate(zip(old, new, strict=False), start=1):
        if a == b:
            continue
        title = b[0].split(" kind=")[0]
        for line_a, line_b in zip(a, b, strict=False):
            if line_a != line_b:
                return f"block {index} ({title}): {line_a[:80]!r} became {line_b[:80]!r}"
        extra = (b[len(a):] or a[len(b):])[0]
        return f"block {index} ({title}): {'added' if len(b) > len(a) else 'removed'} {extra[:80]!r}"
    if len(old) != len(new):
        return f"{len(old)} blocks recorded, {len(new)} now: the span tree changed its size"
    return "the bytes differ but no described field does"


def check_golden(recording: Recording | Path | str, golden: Path | str, *, update: bool = False) -> str:
    """Compare a replay's OTLP bytes with `golden`; with `update`, (re)write it instead.
    Returns a one-line report; raises GoldenMissing or GoldenMismatch."""
    golden = Path(golden)
    source = recording.path if isinstance(recording, Recording) else Path(recording)
    if update:
        check_output(golden, reads=[source])  # never over the recording it is made from
    actual = replay_otlp(recording)
    if update:
        write_output(golden, actual, reads=[source])
        return f"wrote golden OTLP ({len(actual)} bytes) to {golden}"
    truncated = isinstance(recording, Recording) and recording.truncated
    if not golden.is_file():
        raise GoldenMissing(golden, source, remedy(source, golden, truncated))
    expected = golden.read_bytes()
    where = first_change(expected, actual)
    if where is not None:
        raise GoldenMismatch(golden, where, expected, actual, source,
                             remedy(source, golden, truncated, verb="accept it"))
    return f"golden OTLP matches ({len(actual)} bytes, {golden})"
