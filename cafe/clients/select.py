"""Choosing a client: offline unless live mode is asked for."""

from __future__ import annotations

from collections.abc import Mapping

from cafe.clients.base import ChatClient
from cafe.clients.live import LiveClient
from cafe.clients.scripted import ScriptedClient
from cafe.clients.settings import LiveSettings


def get_client(environ: Mapping[str, str] | None = None) -> ChatClient:
    """`COURSE_MODE=live` (or `CAFE_MODE=live`) gives the live client; anything else the
    scripted one. `environ` defaults to the process environment."""
    if environ is None:
        import os

        environ = os.environ
    mode = (environ.get("CAFE_MODE") or environ.get("COURSE_MODE") or "offline").strip().lower()
    if mode == "live":
        return LiveClient(LiveSettings.from_env(environ))
    return ScriptedClient()
