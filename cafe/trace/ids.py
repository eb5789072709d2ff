"""Conversation ids: an input of every run, drawn from the OS's entropy unless a test hands
in its own."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable


def new_conversation_id(random_bytes: Callable[[int], bytes] = os.urandom) -> str:
    """A fresh `gen_ai.conversation.id`: a UUID4 drawn from `random_bytes` (the OS's
    entropy unless a test hands in its own), so two runs never share one, whatever seed
    their RNG was given."""
    return f"shift-{uuid.UUID(bytes=random_bytes(16), version=4)}"
