"""`cafe demo` and `cafe golden` on the `cafe` command: the `counter-otel` plugin."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import TextIO

from cafe.cli.plugins import CommandContext, TelemetrySession, file_to_read
from cafe.recording import load_recording
from cafe.trace import Clock
from cafe_otel._config.environment import import_sdk


def _run_golden(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    import_sdk()
    from cafe_otel._counter.golden import check_golden

    recording = load_recording(args.recording, allow_truncated=args.allow_truncated)
    out.write(check_golden(recording, args.golden, update=args.update) + "\n")
    return 0


class CounterOTelPlugin:
    name = "counter-otel"
    order = 0

    def register(self, commands: argparse._SubParsersAction[argparse.ArgumentParser],
                 context: CommandContext) -> None:
        golden = commands.add_parser(
            "golden", help="replay a recording and compare its OTLP bytes with a golden file")
        golden.add_argument("recording", type=file_to_read, help="the recording to replay (zero model calls)")
        golden.add_argument("golden", type=file_to_read, help="the golden .otlp file kept beside it")
        golden.add_argument("--update", action="store_true", help="write the golden file instead of comparing")
        # A truncated recording's error suggests this flag, whichever command loaded it.
        golden.add_argument("--allow-truncated", action="store_true",
                            help="replay the complete calls of a recording whose last line was cut short")
        golden.set_defaults(run=_run_golden)
        # The commands are registered for every `cafe` command; the demo's module is the SDK's
        # first import, through the guard that names a span limit the SDK refuses.
        import_sdk()
        from cafe_otel._counter import demo

        demo.register(commands)

    def open_session(self, args: argparse.Namespace, environ: Mapping[str, str], *, clock: Clock | None,
                     origin_unix_nano: int | None, secrets: Sequence[str] = ()) -> TelemetrySession | None:
        return None


plugin = CounterOTelPlugin()
