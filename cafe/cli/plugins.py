"""Command-line plugins, found through the `cafe.plugins` entry-point group.

This is how `cafe_otel` adds OpenTelemetry export to the `cafe` command, and the café example
(`cafe.counter`) its `shift` and `replay`, without the product importing either: a plugin may
add commands, add options to the commands that run an agent, and hand back a telemetry
session whose tracer the run then uses.

It is also a plugin's face on the harness: the argument types a command of its own needs
(`path_argument`, `file_to_read`, `AttachedValue`), the never-clobber output writer
(`check_output`, `write_output`), so that a plugin imports them from here
rather than from the modules that hold them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Protocol

from cafe.cli.arguments import AttachedValue, file_to_read, path_argument
from cafe.errors import CafeError
from cafe.recording.output import UnsafeOutput, check_output, write_output
from cafe.trace.clock import Clock
from cafe.trace.tracer import Tracer

__all__ = [
    "AttachedValue",
    "CliPlugin",
    "CommandContext",
    "PluginLoader",
    "TelemetrySession",
    "UnsafeOutput",
    "check_output",
    "file_to_read",
    "installed_plugins",
    "path_argument",
    "write_output",
]


class TelemetrySession(Protocol):
    tracer: Tracer

    def close(self) -> list[str]:
        """Flush and shut down within a bound; return report lines for stderr."""
        ...

    def notes(self) -> list[str]:
        """Lines for stdout after the shift: where to look at what was sent (a trace id)."""
        ...


@dataclass
class CommandContext:
    """What a plugin's `register` is handed besides the subcommands: every loaded plugin (a
    command that runs an agent opens their telemetry sessions), the conversation id of each
    run (an input), and `run_parsers`, the commands that run an agent, to which a plugin may
    add options (a plugin that adds such a command appends its parser here)."""

    plugins: Sequence[CliPlugin]
    new_conversation_id: Callable[[], str]
    run_parsers: list[argparse.ArgumentParser] = field(default_factory=list)


class CliPlugin(Protocol):
    name: str
    order: int
    """Plugins register in this order (then by name): one that adds commands others extend
    (the café's `shift` and `replay`) comes before one that adds options to them."""

    def register(self, commands: argparse._SubParsersAction[argparse.ArgumentParser],
                 context: CommandContext) -> None: ...

    def open_session(
        self, args: argparse.Namespace, environ: Mapping[str, str], *, clock: Clock | None,
        origin_unix_nano: int | None, secrets: Sequence[str] = (),
    ) -> TelemetrySession | None:
        """A session for this command, or None. The harness hands over what it holds: the
        run's clock, the Unix time in ns of that clock's zero (a replay: its recording's
        origin), and the client's secrets (the values a recording is scrubbed of), so a plugin
        need not read them again (a replay's recording is read once, by the harness)."""
        ...


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
        except ModuleNotFoundError as error:
            if _names_entry_module(entry.value, error.name):
                continue  # registered, but its package is not there (the café example deleted): nothing to add
            warn(f"cafe: warning: plugin {entry.name!r} did not load ({type(error).__name__})")
        except Exception as error:
            warn(f"cafe: warning: plugin {entry.name!r} did not load ({type(error).__name__})")
    return plugins


def _names_entry_module(value: str, missing: str | None) -> bool:
    """Whether the module an entry point names (`pkg.module:attr`), or a package above it,
    is the module found missing."""
    module = value.split(":", 1)[0].strip()
    return missing is not None and (module == missing or module.startswith(missing + "."))
