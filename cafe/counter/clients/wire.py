"""Replaying a café shift recorded live through the wire: the live client, built as the
shift would build it now, its SDK calls answered by a `WireReplay` from the recording.

The whole JSON body is compared, not only the four arguments of `chat`: a changed model or
base path (`CAFE_MODEL`, `CAFE_BASE_URL`), or anything else the client adds to the body,
fails the replay naming the first differing path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cafe.counter.clients.base import Message, Response
from cafe.counter.clients.live import LiveClient
from cafe.counter.clients.settings import API_KEY_VARIABLES, BASE_URL_VARIABLES, MODEL_VARIABLES, LiveSettings, Secret
from cafe.errors import CafeError
from cafe.privacy import Scrubber
from cafe.recording.format import Recording
from cafe.wire._replay import WireReplay

# Where the replaying client "sends": the name can never resolve (RFC 6761), and the
# transport answers before any lookup would be made.
REPLAY_ORIGIN = "http://cafe-replay.invalid"
# The key the replaying client carries when the environment gives none: the recorded one
# was never written, and a replay sends nothing.
REPLAY_KEY = "cafe-replay-no-key"
_CHAT_PATH = "/chat/completions"


def _setting(environ: Mapping[str, str], *names: str) -> str | None:
    return next((environ[name].strip() for name in names if environ.get(name, "").strip()), None)


def replay_settings(recording: Recording, environ: Mapping[str, str]) -> LiveSettings:
    """The live settings the shift would run with now: the environment's `CAFE_*` (or
    `OPENAI_*`) where it gives them, the recorded ones otherwise (the model from the
    header, the base path from the first call's target)."""
    target = str((recording.calls[0].exchange or {}).get("target", "")) if recording.calls else ""
    path = target.partition("?")[0]
    recorded_base = REPLAY_ORIGIN + (path[: -len(_CHAT_PATH)] if path.endswith(_CHAT_PATH) else "/v1")
    return LiveSettings(
        base_url=_setting(environ, *BASE_URL_VARIABLES) or recorded_base,
        api_key=Secret(_setting(environ, *API_KEY_VARIABLES) or REPLAY_KEY),
        model=_setting(environ, *MODEL_VARIABLES) or recording.model or "unknown",
    )


class WireReplayClient:
    """A café chat client that replays a shift recorded live, through the wire: `chat` is
    the live client's, answered by `source`. A refusal (`ReplayMismatch`, `RecordingExhausted`)
    is raised as itself, not as the model error the live client would make of the SDK's
    wrapping; `assert_exhausted()` raises `UnusedCalls`. Like `ReplayClient`, it names the
    recorded model and provider and holds no endpoint, so the spans are a replay's."""

    def __init__(self, recording: Recording, *, ignore: Sequence[str] = (), scrubber: Scrubber | None = None,
                 environ: Mapping[str, str] | None = None) -> None:
        self.recording = recording
        self.source = WireReplay(recording, ignore=ignore, scrubber=scrubber)
        self._live = LiveClient(replay_settings(recording, environ or {}), max_retries=0, transport=self.source)
        self.model = recording.model or "unknown"
        self.provider = recording.header.provider or "unknown"

    @property
    def calls(self) -> int:
        return self.source.served

    @property
    def path(self) -> Path:
        return self.recording.path

    def __repr__(self) -> str:
        return f"WireReplayClient(path={str(self.path)!r}, recorded={len(self.recording.calls)}, served={self.calls})"

    def chat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None, temperature: float = 0.0,
             tool_choice: Any = None) -> Response:
        try:
            return self._live.chat(messages, tools, temperature, tool_choice)
        except CafeError:
            if self.source.failure is not None:
                raise self.source.failure from None
            raise

    def assert_exhausted(self) -> None:
        if self.source.failure is not None:
            raise self.source.failure
        self.source.assert_exhausted()
