"""Command-line plugins, found through the `cafe.plugins` entry-point group.

This is how `cafe_otel` adds OpenTelemetry export to the `cafe` command without the
harness importing it: a plugin may add commands, add options to the shift-running
commands, and hand back a telemetry session whose tracer the shift then uses.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Protocol

from cafe.errors import CafeError
from cafe.trace.clock import Clock
from cafe.trace.tracer import Tracer


class TelemetrySession(Protocol):
    """May also have `protect(secrets: list[str])`: the harness hands it the client's
    secrets (as it hands them to a recording's scrubber) before the shift starts."""

    tracer: Tracer

    def close(self) -> list[str]:
        """Flush and shut down within a bound; return report lines for stderr."""
        ...

    def notes(self) -> list[str]:
        """Lines for stdout after the shift: where to look at what was sent (a trace id)."""
        ...


class CliPlugin(Protocol):
    name: str

    def register(
        self,
        commands: argparse._SubParsersAction[argparse.ArgumentParser],
        shift_parsers: list[argparse.ArgumentParser],
    ) -> None: ...

    def open_session(
        self, args: argparse.Namespace, environ: Mapping[str, str], clock: Clock | None
    ) -> TelemetrySession | None: ...


PluginLoader = Callable[[Callable[[str], None]], list[CliPlugin]]


def installed_plugins(warn: Callable[[str], None]) -> list[CliPlugin]:
    """Load every installed plugin. One that fails to load is reported through `warn` and
    left out: a broken add-on must not take the harness's own commands down with it. One
    that refuses to load with a CafeError (a setting of its that is bad, exit 20) says so
    as the command's error: left out, its options would be "unrecognized" instead."""
    plugins = []
    for entry in sorted(entry_points(group="cafe.plugins"), key=lambda e: e.name):
        try:
            factory = entry.load()
            plugins.append(factory() if callable(factory) else factory)
        except CafeError:
            raise
        except Exception as error:
            warn(f"cafe: warning: plugin {entry.name!r} did not load ({type(error).__name__})")
    return plugins
