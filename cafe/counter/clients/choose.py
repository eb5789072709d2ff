"""Choosing a client: offline unless live mode is asked for.

`CAFE_MODE` is the switch; `COURSE_MODE`, the lesson's name for it, is read as an alias
(`CAFE_MODE` wins when both are set). Each accepts `live` or `offline` (any case); unset
or empty means offline. Any other value is refused: a typo must not quietly run offline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from cafe.counter.clients.base import ChatClient
from cafe.counter.clients.live import LiveClient
from cafe.counter.clients.scripted import ScriptedClient
from cafe.counter.clients.settings import LiveSettings
from cafe.errors import ConfigurationError

MODE_VARIABLE, MODE_ALIAS = "CAFE_MODE", "COURSE_MODE"
MODES = ("live", "offline")
Mode = Literal["live", "offline"]


class UnknownMode(ConfigurationError):
    """CAFE_MODE or COURSE_MODE holds something other than live or offline. The value is
    not shown: whatever was pasted there stays off the terminal."""

    def __init__(self, variable: str) -> None:
        self.variable = variable
        super().__init__(f"{variable}: expected live or offline (unset means offline); "
                         "the value given is not shown")


def _mode_in(environ: Mapping[str, str], variable: str) -> Mode | None:
    value = environ.get(variable, "").strip().lower()
    if not value:
        return None
    if value == "live":
        return "live"
    if value == "offline":
        return "offline"
    raise UnknownMode(variable)


def chosen_mode(environ: Mapping[str, str]) -> Mode | None:
    """The mode the environment asks for, or None when neither variable is set. Both are
    checked, so a bad alias is reported even when CAFE_MODE decides."""
    mode, alias = _mode_in(environ, MODE_VARIABLE), _mode_in(environ, MODE_ALIAS)
    return mode if mode is not None else alias


def get_client(environ: Mapping[str, str] | None = None) -> ChatClient:
    """`CAFE_MODE=live` (or `COURSE_MODE=live`) gives the live client; unset, empty or
    `offline` the scripted one; anything else is `UnknownMode`. `environ` defaults to
    the process environment."""
    if environ is None:
        import os

        environ = os.environ
    if chosen_mode(environ) == "live":
        return LiveClient(LiveSettings.from_env(environ))
    return ScriptedClient()
