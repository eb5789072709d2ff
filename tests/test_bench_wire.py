"""The wire's benchmarks price what they say: figure 10's recorded conversation writes what
each turn adds, and figure 11's recording and replaying variants make the call they count
(every replayed call served from the recording)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import peers, wire_conversation
from cafe.recording import load_recording

ROOT = Path(__file__).resolve().parents[1]


def test_a_recorded_conversation_writes_what_each_turn_adds(tmp_path: Path) -> None:
    _, short_line, short_request = wire_conversation.conversation(tmp_path / "short.jsonl", 4)
    _, long_line, long_request = wire_conversation.conversation(tmp_path / "long.jsonl", 40)
    assert long_request > 5 * short_request  # the SDK resends the whole conversation
    assert long_line < 1.2 * short_line
    recording = load_recording(tmp_path / "long.jsonl")
    assert len(recording.calls) == 40 and len(recording.calls[-1].request["messages"]) == 80


@pytest.mark.parametrize("variant", ["wire_recording", "wire_replaying"])
def test_the_wire_variants_make_the_call_they_count(variant: str, tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({**peers.workload(), "warmup": 2, "stream": False, "variant": variant,
                                "metrics": False}))
    done = subprocess.run([sys.executable, "-m", "bench.peer_runner", str(spec), "count", "3"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["variant"] == variant and result["calls"] == 5
