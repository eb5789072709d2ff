"""The seed shift the telemetry tests observe: the café example's, so the tests that run it
are the example's (they go with it)."""

from __future__ import annotations

import cafe
from cafe import counter

SEED_DECISIONS = [("approve", None)]
SEED_CONVERSATION_ID = "shift-1"  # given, so that two runs of the seed shift compare equal


def seed_shift(tracer: cafe.Tracer, client: object = None) -> counter.ShiftRun:
    """The seed's two-line shift."""
    return counter.run_shift(client or counter.ScriptedClient(), counter.DEFAULT_SCRIPT,
                             counter.make_responder(SEED_DECISIONS), tracer=tracer,
                             conversation_id=SEED_CONVERSATION_ID)
