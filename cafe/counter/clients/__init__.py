"""Model clients: scripted (offline default), canned (fixed replies), live (openai SDK)."""

from cafe.counter.clients.base import ChatClient, HoldsSecrets, NetworkClient, check_tool_call_ids
from cafe.counter.clients.canned import CannedClient, CannedRepliesExhausted
from cafe.counter.clients.choose import get_client
from cafe.counter.clients.live import LiveClient
from cafe.counter.clients.scripted import ScriptedClient
from cafe.counter.clients.settings import InvalidLiveSetting, LiveSettings, Secret

__all__ = [
    "CannedClient",
    "CannedRepliesExhausted",
    "ChatClient",
    "HoldsSecrets",
    "InvalidLiveSetting",
    "LiveClient",
    "LiveSettings",
    "NetworkClient",
    "ScriptedClient",
    "Secret",
    "check_tool_call_ids",
    "get_client",
]
