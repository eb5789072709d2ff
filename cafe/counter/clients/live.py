"""The live model: any OpenAI-compatible endpoint through the official `openai` SDK.

Responses are checked and reduced to the chat-completions fields the harness relies on
(`cafe.counter.clients.reply`), so that a recording holds the same shape whichever server produced
it, and a malformed reply is a model error (exit 21), not a crash later. SDK errors are re-raised as
`ModelCallError` carrying the failure class and HTTP status only: server error bodies can
echo request content or parts of the key.

The SDK's HTTP client goes through `cafe.wire`'s observed transport, the seam every agent's
calls take: `wire_log` is where a café recording takes each call's HTTP exchange from,
`observers` (telemetry) hear every call, and `transport` (a `cafe.wire.WireReplay`)
answers in place of the network.

The SDK is imported when a live client is made, not with this module: it is most of what
`import cafe` would cost, and offline runs never need it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from cafe.counter.clients.base import Message, Response, ToolCallIdCheck
from cafe.counter.clients.reply import MalformedReply, reduce_reply
from cafe.counter.clients.settings import LiveSettings, check_max_retries, check_timeout
from cafe.errors import ModelCallError
from cafe.urls import shown_url


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class LiveClient:
    """`timeout` (seconds an attempt may wait) and `max_retries` win over the settings'
    (`CAFE_TIMEOUT`, `CAFE_MAX_RETRIES`, or their defaults of 60 s and 2).

    The SDK's calls go through a `cafe.wire.ObservedTransport` over `transport` (the network
    when None) with `observers` and the client's own `wire_log`. An `http_client` handed in
    is used as it is (its calls are then not observed, and a recording of them holds no
    exchange)."""

    provider = "openai"

    def __init__(
        self,
        settings: LiveSettings,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
        http_client: Any = None,
        transport: Any = None,
        observers: Sequence[Any] = (),
    ) -> None:
        self._settings = settings
        self.timeout = settings.timeout if timeout is None else check_timeout(timeout, "timeout argument")
        self.max_retries = (settings.max_retries if max_retries is None
                            else check_max_retries(max_retries, "max_retries argument"))
        # Where the bounds came from, for the timeout's remedy: the environment's variables
        # cannot change what the caller's arguments set.
        self._bounds_from = ("CAFE_TIMEOUT and CAFE_MAX_RETRIES set these"
                             if timeout is None and max_retries is None
                             else "set by the caller's timeout and max_retries arguments")
        self.model = settings.model
        self.server_address = settings.server_address
        self.server_port = settings.server_port
        self.calls = 0
        self._check_tool_call_ids = ToolCallIdCheck()  # each message once, when first sent
        import openai

        from cafe.wire._capture import ExchangeLog, sdk_http_client

        self.wire_log: ExchangeLog | None = None
        if http_client is None:
            self.wire_log = ExchangeLog()
            http_client = sdk_http_client([self.wire_log, *observers], transport=transport)

        self._sdk = openai.OpenAI(
            api_key=settings.api_key.reveal(),
            base_url=settings.base_url,
            timeout=self.timeout,
            max_retries=self.max_retries,
            http_client=http_client,
        )

    def __repr__(self) -> str:
        return f"LiveClient(model={self.model!r}, base_url={shown_url(self._settings.base_url)!r})"

    def secrets(self) -> list[str]:
        """Values a recorder must scrub from anything it writes."""
        return [self._settings.api_key.reveal()]

    def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        temperature: float = 0.0,
        tool_choice: Any = None,
    ) -> Response:
        self._check_tool_call_ids(messages)
        arguments: dict[str, Any] = {
            "model": self.model, "messages": messages, "temperature": temperature,
        }
        if tools:
            arguments["tools"] = tools
        if tool_choice is not None:
            arguments["tool_choice"] = tool_choice
        import openai  # loaded by __init__ already: a lookup in sys.modules

        self.calls += 1
        try:
            # The raw reply, not the SDK's pydantic model: that one takes any shape (warning on
            # stderr with reply text in it), and what the harness keeps is checked below.
            raw = self._sdk.chat.completions.with_raw_response.create(**arguments)
            content = raw.http_response.content
        except openai.APITimeoutError:
            attempts = self.max_retries + 1
            raise ModelCallError(
                f"model endpoint {self.server_address} failed: APITimeoutError (no answer within "
                f"{self.timeout:g} s, {attempts} attempt{'s' if attempts > 1 else ''}; "
                f"{self._bounds_from})"
            ) from None
        except openai.APIStatusError as error:
            raise ModelCallError(
                f"model endpoint {self.server_address} answered {type(error).__name__} "
                f"(HTTP {error.status_code})"
            ) from None
        except openai.APIError as error:
            raise ModelCallError(
                f"model endpoint {self.server_address} failed: {type(error).__name__}"
            ) from None
        try:
            body = json.loads(content, parse_constant=_not_json)
        except (ValueError, RecursionError):  # HTML from a proxy, a cut-off body, NaN, too deep
            raise MalformedReply(self.server_address, "$", "a JSON body", content.decode("utf-8", "replace")) from None
        return reduce_reply(body, self.server_address)
