"""Figure 11's recording and replaying variants make the call they count on figure 9's
workload (the café's conversation): every replayed call is served from the recording."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import peers

ROOT = Path(__file__).resolve().parents[2]


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
