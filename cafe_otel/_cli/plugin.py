"""The `cafe` command's OpenTelemetry plugin (entry point `cafe.plugins: otel`).

Adds `--otlp[=ENDPOINT]`, `--otlp-protocol` and `--capture-content` to the commands that open
a telemetry session (a plugin's, such as the café example's), and the command
`cafe export RECORDING [--otlp=ENDPOINT] [--out FILE]`.
Export is on with `--otlp` or whenever OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set.
The session's close() shuts telemetry down within a bound and reports one line, e.g.
`telemetry: 17 spans exported, 0 dropped`. Errors are CafeErrors: one line, no traceback.
What the exporters and gRPC print meanwhile is held and redacted (`cafe_otel._privacy.logs`).

Loading the plugin imports no OpenTelemetry SDK: the `cafe` command loads it for every
command, and the SDK reads `os.environ` when it is imported. The SDK is imported through
`cafe_otel._config.environment.import_sdk` when a command first needs it, after the settings of
the environ handed in were resolved and checked.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from cafe.cli.plugins import AttachedValue, CommandContext, check_output, file_to_read, path_argument, write_output
from cafe.errors import CafeError, UsageError
from cafe.recording import load_recording
from cafe.trace import Clock, Tracer
from cafe_otel._config import AdvancedOptions, CommandSettings, EnvironSnapshot, read_environ, resolve, resolve_command
from cafe_otel._config import variables as v
from cafe_otel._config.environment import import_grpc_quietly, import_sdk
from cafe_otel._config.numbers import ascii_decimal
from cafe_otel._config.settings import (
    DEFAULT_SHUTDOWN_TIMEOUT,
    GRPC,
    HTTP,
    MAX_SECONDS,
    seconds_in_range,
)
from cafe_otel._privacy.logs import ExporterLogCapture, redactor
from cafe_otel._privacy.logs import report_line as telemetry_line

if TYPE_CHECKING:
    from cafe_otel._configure import TelemetryHandle


class TelemetryExportFailed(CafeError):
    """Spans were lost on the way to the collector (the account says how many and why)."""

    exit_code = 48


class NothingToExportTo(UsageError):
    """`cafe export` was given no endpoint and no `--out`."""


def _seconds(text: str) -> float:
    """A number of seconds in [0, MAX_SECONDS], in ASCII digits (nan and inf are not a bound)."""
    value = ascii_decimal(text)
    if value is None or not 0 <= value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"expected a number of seconds in [0, {MAX_SECONDS:g}], in ASCII digits")
    return value


# host:port, as `--otlp=localhost:4317` takes it: a name, an IPv4 or a bracketed IPv6, then digits.
_HOST_AND_PORT = re.compile(r"(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}")


def _is_url(word: str) -> bool:
    """A word after a bare --otlp that is its endpoint: a URL with a scheme, or a host:port,
    so that a recording's path after the option (it has neither shape) stays the path."""
    return "://" in word or _HOST_AND_PORT.fullmatch(word) is not None


_ENDPOINT = v.otlp_variable(v.ENDPOINT)


def _add_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("OpenTelemetry export (cafe_otel)")
    group.add_argument(
        "--otlp", action=AttachedValue, separate=_is_url, default=None, metavar="ENDPOINT",
        help="export spans over OTLP: to ENDPOINT when written --otlp=ENDPOINT (or --otlp URL, "
             f"a URL with its scheme or a host:port), else to {_ENDPOINT}, else localhost; on by "
             f"default when {_ENDPOINT} is set. A bare --otlp takes no value, "
             "wherever it stands",
    )
    group.add_argument("--otlp-protocol", choices=[GRPC, HTTP], default=None,
                       help=f"OTLP protocol (default: {v.otlp_variable(v.PROTOCOL)}, else grpc)")
    group.add_argument("--capture-content", action="store_true",
                       help="put messages, tool arguments and results on spans (off by default)")


def _wanted(args: argparse.Namespace, command: CommandSettings) -> bool:
    return getattr(args, "otlp", None) is not None or command.endpoint_set


def _handle(args: argparse.Namespace, environ: EnvironSnapshot, command: CommandSettings,
            **options: Any) -> TelemetryHandle:
    # Resolved before the SDK is imported: a bad setting of `environ` is its own named error.
    config = resolve(environ, endpoint=args.otlp or None, protocol=args.otlp_protocol,
                     capture_content=True if args.capture_content else None, **options)
    if GRPC in (config.settings.protocol, config.metrics.protocol if config.metrics else None):
        _quiet_grpc_core(command)
    import_sdk()
    from cafe_otel._configure import build

    return build(config)


def report_line(handle: TelemetryHandle, capture: ExporterLogCapture | None) -> str:
    return telemetry_line(f"telemetry: {handle.account.summary()}", capture, dropped=bool(handle.account.dropped),
                          redact=redactor(handle.settings, handle.metric_settings))


def _capture(handle: TelemetryHandle, command: CommandSettings) -> ExporterLogCapture:
    return ExporterLogCapture(redactor(handle.settings, handle.metric_settings), debug=command.debug)


def _quiet_grpc_core(command: CommandSettings) -> None:
    """gRPC's C core writes its own lines (a failed TLS handshake, ...) straight to stderr, not
    through logging: imported by `import_grpc_quietly`, it writes none (`CAFE_DEBUG` shows them)."""
    if not command.debug:
        import_grpc_quietly()


@dataclass
class OTelSession:
    """What `open_session` returns to the harness: a tracer and a bounded close."""

    handle: TelemetryHandle
    tracer: Tracer
    timeout: float = DEFAULT_SHUTDOWN_TIMEOUT
    logs: ExporterLogCapture | None = None
    trace_ui: str | None = None  # CAFE_JAEGER_URL: a Jaeger UI whose /trace/<id> shows a trace

    def notes(self) -> list[str]:
        """The trace id of each shift sent (and its page, with CAFE_JAEGER_URL), once close()
        has settled the account: only when spans were delivered, marked when delivery is
        unconfirmed, and none when nothing was delivered (the link would show nothing)."""
        from cafe_otel._spans.listener import SpanListener

        listener = getattr(self.tracer, "span_listener", None)
        ids = listener.trace_ids if isinstance(listener, SpanListener) else []
        account = self.handle.account
        if account.exported:
            mark = ""
        elif account.unconfirmed:
            mark = "  (unconfirmed: its export had not answered when the command ended)"
        else:
            return []
        if self.trace_ui:
            return [f"trace: {trace_id}  {self.trace_ui.rstrip('/')}/trace/{trace_id}{mark}" for trace_id in ids]
        return [f"trace: {trace_id}{mark}" for trace_id in ids]

    def protect(self, secrets: list[str]) -> None:
        """The live client's secrets: never in a span (content is scrubbed of them)."""
        self.handle.add_secrets(secrets)

    def close(self) -> list[str]:
        try:
            self.handle.shutdown(self.timeout)
        finally:
            if self.logs is not None:
                self.logs.__exit__()
        return [report_line(self.handle, self.logs)]


def _run_export(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    env = read_environ(environ)
    command = resolve_command(env)
    if args.timeout is not None:
        seconds_in_range(args.timeout, "--timeout", low_inclusive=True)
    recording = load_recording(args.recording, allow_truncated=args.allow_truncated)
    if args.out:
        # Checked before any work: the output must not destroy the recording it is made from.
        check_output(args.out, reads=[args.recording], private=bool(args.capture_content))
        import_sdk()
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from cafe_otel._offline.otlp_bytes import encode
        from cafe_otel._offline.recording_export import export_recording
        from cafe_otel._spans.ids import SequentialIdGenerator

        sink = InMemorySpanExporter()
        handle = _handle(args, env, command, exporter=sink, service_name=args.service_name, metrics=False,
                         advanced=AdvancedOptions(replay=True, id_generator=SequentialIdGenerator()))
        if handle.provider is None or handle.settings is None:
            out.write(f"telemetry disabled ({v.OTEL_SDK_DISABLED}=true): nothing written\n")
            return 0
        count = export_recording(recording, handle.provider, capture_content=handle.settings.capture,
                                 environ=env)
        handle.shutdown()
        spans = sink.get_finished_spans()
        if len(spans) != count:
            raise TelemetryExportFailed(f"{count} spans made, {len(spans)} encoded: "
                                        f"{handle.account.summary()}")
        # Content on the spans is conversation text: then the file is private, like a recording.
        write_output(args.out, encode(spans), reads=[args.recording], private=handle.settings.capture.enabled)
        out.write(f"wrote {len(spans)} spans ({len(recording.calls)} model calls) to {args.out}\n")
        return 0
    if not _wanted(args, command):
        raise NothingToExportTo(f"cafe export needs --otlp=ENDPOINT, {_ENDPOINT} or --out FILE")
    # A recording is exported as spans only: its metrics were (or were not) sent when it ran.
    handle = _handle(args, env, command, service_name=args.service_name, metrics=False)
    if handle.provider is None or handle.settings is None:
        out.write(f"telemetry disabled ({v.OTEL_SDK_DISABLED}=true): nothing exported\n")
        return 0
    from cafe_otel._export.failsoft import GRACE_SECONDS
    from cafe_otel._offline.recording_export import export_recording

    # Delivering is this command's whole job: it waits as long as one export may take (the
    # export timeout in force, and the grace its exporter is given), not the short exit bound.
    wait = args.timeout if args.timeout is not None else handle.settings.export_timeout + 2 * GRACE_SECONDS
    with _capture(handle, command) as logs:
        count = export_recording(recording, handle.provider, capture_content=handle.settings.capture,
                                 environ=env)
        handle.shutdown(wait)
    account = handle.account
    report = report_line(handle, logs)
    if account.exported < count:
        # One line on stderr: the error carries the report. Unconfirmed is not called lost.
        missing = count - account.exported
        if account.unconfirmed:
            raise TelemetryExportFailed(f"{missing} of {count} spans were not confirmed delivered "
                                        f"({account.unconfirmed} unconfirmed: {report})")
        raise TelemetryExportFailed(f"{missing} of {count} spans were not exported ({report})")
    err.write(report + "\n")
    out.write(f"exported {count} spans ({len(recording.calls)} model calls) from {args.recording}\n")
    return 0


class OTelCliPlugin:
    name = "otel"
    order = 0

    def register(self, commands: argparse._SubParsersAction[argparse.ArgumentParser],
                 context: CommandContext) -> None:
        for parser in context.run_parsers:
            _add_options(parser)
        export = commands.add_parser(
            "export", help="turn a recording into OpenTelemetry spans and send them (or write OTLP)")
        export.add_argument("recording", type=file_to_read,
                            help="a cafe recording or a plain {request, response} JSONL file")
        export.add_argument("--out", metavar="FILE.otlp", type=path_argument("a file path for the spans"),
                            help="write OTLP protobuf bytes to FILE instead of sending (deterministic)")
        export.add_argument("--service-name", default=None,
                            help=f"service.name (default: {v.OTEL_SERVICE_NAME} or cafe)")
        export.add_argument("--allow-truncated", action="store_true",
                            help="convert the complete calls of a recording whose last line was cut short")
        export.add_argument("--timeout", type=_seconds, default=None,
                            help="seconds to wait for the collector at the end (default: the export "
                                 f"timeout, {v.otlp_pair_name(v.TIMEOUT, 'traces')}, 5 s unless set)")
        _add_options(export)
        export.set_defaults(run=_run_export)

    def open_session(
        self, args: argparse.Namespace, environ: Mapping[str, str], *, clock: Clock | None,
        origin_unix_nano: int | None, secrets: Sequence[str] = (),
    ) -> OTelSession | None:
        """The harness hands over what it holds: the shift's clock and where its readings sit
        on the wall clock (a replay: the recording's own origin, one tick a second, so replaying
        twice gives the same timestamps), and the live client's secrets (never in a span)."""
        env = read_environ(environ)
        command = resolve_command(env)
        if not _wanted(args, command):
            return None
        trace_ui = command.trace_ui()  # checked before a handle exists that would need closing
        handle = _handle(args, env, command, secrets=tuple(secrets))
        if not handle.enabled:
            return None  # OTEL_SDK_DISABLED: the harness keeps its own tracer
        # The OTel spans sit on the harness's clock too, so a recorded call's start is its
        # exported chat span's start, to the nanosecond.
        return OTelSession(handle, handle.tracer(clock, origin_unix_nano=origin_unix_nano),
                           logs=_capture(handle, command).__enter__(),
                           trace_ui=trace_ui)


plugin = OTelCliPlugin()
