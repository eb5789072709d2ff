"""The `cafe` command's OpenTelemetry plugin (entry point `cafe.plugins: otel`).

Adds `--otlp [ENDPOINT]`, `--otlp-protocol` and `--capture-content` to `cafe shift` and
`cafe replay`, the command `cafe export RECORDING [--otlp ENDPOINT] [--out FILE]`, and
`cafe golden RECORDING GOLDEN [--update] [--allow-truncated]` (a replay's OTLP bytes against a golden file).
Export is on with `--otlp` or whenever OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set.
The session's close() shuts telemetry down within a bound and reports one line, e.g.
`telemetry: 17 spans exported, 0 dropped`. Errors are CafeErrors: one line, no traceback.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cafe.errors import CafeError
from cafe.recording.errors import RecordingError
from cafe.recording.reader import load_recording
from cafe.trace.clock import Clock, TickClock
from cafe.trace.tracer import Tracer
from cafe_otel.configure import DEFAULT_SHUTDOWN_TIMEOUT, TelemetryHandle, configure
from cafe_otel.golden import check_golden
from cafe_otel.ids import SequentialIdGenerator
from cafe_otel.otlp import encode
from cafe_otel.recording_export import export_recording
from cafe_otel.settings import GRPC, HTTP, seconds_in_range

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


class TelemetryExportFailed(CafeError):
    """Spans were lost on the way to the collector (the account says how many and why)."""

    exit_code = 48


class NothingToExportTo(CafeError):
    exit_code = 2


def _add_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("OpenTelemetry export (cafe_otel)")
    group.add_argument(
        "--otlp", nargs="?", const="", default=None, metavar="ENDPOINT",
        help="export spans over OTLP (to ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT, else "
             "localhost); on by default when OTEL_EXPORTER_OTLP_ENDPOINT is set. Put it after "
             "positional arguments, or write --otlp=ENDPOINT",
    )
    group.add_argument("--otlp-protocol", choices=[GRPC, HTTP], default=None,
                       help="OTLP protocol (default: OTEL_EXPORTER_OTLP_PROTOCOL, else grpc)")
    group.add_argument("--capture-content", action="store_true",
                       help="put messages, tool arguments and results on spans (off by default)")


def _wanted(args: argparse.Namespace, environ: Mapping[str, str]) -> bool:
    return getattr(args, "otlp", None) is not None or any(
        environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def _handle(args: argparse.Namespace, environ: Mapping[str, str], **options: Any) -> TelemetryHandle:
    return configure(
        endpoint=args.otlp or None,
        protocol=args.otlp_protocol,
        capture_content=True if args.capture_content else None,
        environ=environ,
        **options,
    )


class ExporterLogCapture(logging.Handler):
    """Holds the OTLP exporters' own log lines (retry notices, failure reasons) while a
    command runs, so stderr gets one telemetry line instead of a retry log; the last
    reason joins that line. Installed on the exporters' logger and removed on close."""

    LOGGER = "opentelemetry.exporter.otlp"
    MAX_CHARS = 160

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None
        self._logger = logging.getLogger(self.LOGGER)
        self._propagate = self._logger.propagate

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage().splitlines()[0]
        except Exception:  # a log record that cannot be formatted is not worth failing for
            return
        self.last = text[: self.MAX_CHARS] + ("…" if len(text) > self.MAX_CHARS else "")

    def __enter__(self) -> ExporterLogCapture:
        self._logger.addHandler(self)
        self._logger.propagate = False
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
        self._logger.propagate = self._propagate


def report_line(handle: TelemetryHandle, capture: ExporterLogCapture | None) -> str:
    line = f"telemetry: {handle.account.summary()}"
    if capture is not None and capture.last and handle.account.dropped:
        line += f" (exporter: {capture.last})"
    return line


@dataclass
class OTelSession:
    """What `open_session` returns to the harness: a tracer and a bounded close."""

    handle: TelemetryHandle
    tracer: Tracer
    timeout: float = DEFAULT_SHUTDOWN_TIMEOUT
    logs: ExporterLogCapture | None = None

    def close(self) -> list[str]:
        try:
            self.handle.shutdown(self.timeout)
        finally:
            if self.logs is not None:
                self.logs.__exit__()
        return [report_line(self.handle, self.logs)]


def _replay_timeline(args: argparse.Namespace) -> tuple[Clock, int] | None:
    # A replay's spans sit on the recording's own timeline, one tick a second after its
    # origin, so replaying twice gives the same timestamps.
    try:
        recording = load_recording(args.path, allow_truncated=getattr(args, "allow_truncated", False))
    except RecordingError:
        return None  # `cafe replay` itself reports the problem, with its own exit code
    return TickClock(), recording.header.clock_origin_unix_nano or 0


def _run_export(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    seconds_in_range(args.timeout, "--timeout", low_inclusive=True)
    recording = load_recording(args.recording, allow_truncated=args.allow_truncated)
    if args.out:
        sink = InMemorySpanExporter()
        handle = _handle(args, environ, exporter=sink, replay=True, id_generator=SequentialIdGenerator(),
                         service_name=args.service_name)
        if handle.provider is None or handle.settings is None:
            out.write("telemetry disabled (OTEL_SDK_DISABLED=true): nothing written\n")
            return 0
        count = export_recording(recording, handle.provider, capture_content=handle.settings.capture)
        handle.shutdown()
        spans = sink.get_finished_spans()
        if len(spans) != count:
            raise TelemetryExportFailed(f"{count} spans made, {len(spans)} encoded: "
                                        f"{handle.account.summary()}")
        Path(args.out).write_bytes(encode(spans))
        out.write(f"wrote {len(spans)} spans ({len(recording.calls)} model calls) to {args.out}\n")
        return 0
    if not _wanted(args, environ):
        raise NothingToExportTo("cafe export needs --otlp ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT or --out FILE")
    handle = _handle(args, environ, service_name=args.service_name)
    if handle.provider is None or handle.settings is None:
        out.write("telemetry disabled (OTEL_SDK_DISABLED=true): nothing exported\n")
        return 0
    with ExporterLogCapture() as logs:
        count = export_recording(recording, handle.provider, capture_content=handle.settings.capture)
        handle.shutdown(args.timeout)
    account = handle.account
    err.write(report_line(handle, logs) + "\n")
    if account.dropped or account.exported < count:
        raise TelemetryExportFailed(f"{count - account.exported} of {count} spans were not exported")
    out.write(f"exported {count} spans ({len(recording.calls)} model calls) from {args.recording}\n")
    return 0


def _run_golden(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    recording = load_recording(args.recording, allow_truncated=args.allow_truncated)
    out.write(check_golden(recording, args.golden, update=args.update) + "\n")
    return 0


class OTelCliPlugin:
    name = "otel"

    def register(
        self,
        commands: argparse._SubParsersAction[argparse.ArgumentParser],
        shift_parsers: list[argparse.ArgumentParser],
    ) -> None:
        for parser in shift_parsers:
            _add_options(parser)
        export = commands.add_parser(
            "export", help="turn a recording into OpenTelemetry spans and send them (or write OTLP)")
        export.add_argument("recording", help="a cafe recording or a plain {request, response} JSONL file")
        export.add_argument("--out", metavar="FILE.otlp",
                            help="write OTLP protobuf bytes to FILE instead of sending (deterministic)")
        export.add_argument("--service-name", default=None, help="service.name (default: OTEL_SERVICE_NAME or cafe)")
        export.add_argument("--allow-truncated", action="store_true",
                            help="convert the complete calls of a recording whose last line was cut short")
        export.add_argument("--timeout", type=float, default=DEFAULT_SHUTDOWN_TIMEOUT,
                            help="seconds to wait for the collector at the end (default %(default)s)")
        _add_options(export)
        export.set_defaults(run=_run_export)

        golden = commands.add_parser(
            "golden", help="replay a recording and compare its OTLP bytes with a golden file")
        golden.add_argument("recording", help="the recording to replay (zero model calls)")
        golden.add_argument("golden", help="the golden .otlp file kept beside it")
        golden.add_argument("--update", action="store_true", help="write the golden file instead of comparing")
        # A truncated recording's error suggests this flag, whichever command loaded it.
        golden.add_argument("--allow-truncated", action="store_true",
                            help="replay the complete calls of a recording whose last line was cut short")
        golden.set_defaults(run=_run_golden)

    def open_session(
        self, args: argparse.Namespace, environ: Mapping[str, str], clock: Clock | None
    ) -> OTelSession | None:
        if not _wanted(args, environ):
            return None
        handle = _handle(args, environ)
        if not handle.enabled:
            return None  # OTEL_SDK_DISABLED: the harness keeps its own tracer
        origin = None
        if getattr(args, "command", None) == "replay" and clock is None:
            timeline = _replay_timeline(args)
            if timeline is not None:
                clock, origin = timeline
        return OTelSession(handle, handle.tracer(clock, origin_unix_nano=origin),
                           logs=ExporterLogCapture().__enter__())


plugin = OTelCliPlugin()
