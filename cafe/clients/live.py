"""The live model: any OpenAI-compatible endpoint through the official `openai` SDK.

Responses are reduced to the chat-completions fields the harness relies on, so that a
recording holds the same shape whichever server produced it. SDK errors are re-raised as
`ModelCallError` carrying the failure class and HTTP status only: server error bodies can
echo request content or parts of the key.

The SDK is imported when a live client is made, not with this module: it is most of what
`import cafe` would cost, and offline runs never need it.
"""

from __future__ import annotations

from typing import Any

from cafe.clients.base import Message, Response, check_tool_call_ids
from cafe.clients.settings import LiveSettings
from cafe.errors import ModelCallError


def _reduce(body: dict[str, Any]) -> Response:
    choices = []
    for choice in body.get("choices") or []:
        raw = choice.get("message") or {}
        message: Message = {"role": raw.get("role", "assistant"), "content": raw.get("content")}
        if raw.get("tool_calls"):
            message["tool_calls"] = [
                {
                    # Ids are matched as strings by the loop and the replay.
                    "id": str(call.get("id")),
                    "type": call.get("type", "function"),
                    "function": {
                        "name": (call.get("function") or {}).get("name"),
                        "arguments": (call.get("function") or {}).get("arguments"),
                    },
                }
                for call in raw["tool_calls"]
            ]
        choices.append(
            {"index": choice.get("index", 0), "message": message,
             "finish_reason": choice.get("finish_reason")}
        )
    usage = body.get("usage") or {}
    return {
        "id": body.get("id"),
        "model": body.get("model"),
        "choices": choices,
        "usage": {
            key: usage.get(key, 0) for key in ("prompt_tokens", "completion_tokens", "total_tokens")
        },
    }


class LiveClient:
    provider = "openai"

    def __init__(
        self,
        settings: LiveSettings,
        *,
        timeout: float = 60.0,
        max_retries: int = 2,
        http_client: Any = None,
    ) -> None:
        self._settings = settings
        self.model = settings.model
        self.server_address = settings.server_address
        self.server_port = settings.server_port
        self.calls = 0
        import openai

        self._sdk = openai.OpenAI(
            api_key=settings.api_key.reveal(),
            base_url=settings.base_url,
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
        )

    def __repr__(self) -> str:
        return f"LiveClient(model={self.model!r}, base_url={self._settings.base_url!r})"

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
        check_tool_call_ids(messages)
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
            completion = self._sdk.chat.completions.create(**arguments)
        except openai.APIStatusError as error:
            raise ModelCallError(
                f"model endpoint {self.server_address} answered {type(error).__name__} "
                f"(HTTP {error.status_code})"
            ) from None
        except openai.APIError as error:
            raise ModelCallError(
                f"model endpoint {self.server_address} failed: {type(error).__name__}"
            ) from None
        # warnings=False: an odd reply makes pydantic warn on stderr, quoting reply text.
        response = _reduce(completion.model_dump(mode="json", warnings=False))
        if not response["choices"]:
            # Nothing the shift could append: fail as a model error, not an IndexError later.
            raise ModelCallError(f"model endpoint {self.server_address} answered with no choices")
        return response
