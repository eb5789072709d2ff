"""Model clients: scripted (offline default), canned (fixed replies), live (openai SDK)."""

from cafe.clients.base import ChatClient, HoldsSecrets, NetworkClient, check_tool_call_ids
from cafe.clients.canned import CannedClient, CannedRepliesExhausted
from cafe.clients.choose import get_client
from cafe.clients.live import LiveClient
from cafe.clients.scripted import ScriptedClient
from cafe.clients.settings import InvalidLiveSetting, LiveSettings, Secret

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
