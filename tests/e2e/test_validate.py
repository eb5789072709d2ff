"""`otelcol-cafe validate` accepts the shipped config and rejects a broken one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from otelstack import COLLECTOR_CONFIG

pytestmark = pytest.mark.e2e


def validate(binary: Path, config: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(binary), "validate", f"--config={config}"], capture_output=True, text=True, timeout=60, check=False
    )


def test_shipped_config_validates(otelcol_bin: Path) -> None:
    result = validate(otelcol_bin, COLLECTOR_CONFIG)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("good", "bad", "complaint"),
    [
        # memory_limiter refuses a zero check interval.
        ("check_interval: 1s", "check_interval: 0s", "check_interval"),
        # A persistent queue cannot wait for results.
        ("block_on_overflow: false", "block_on_overflow: false\n      wait_for_result: true", "wait_for_result"),
        # A pipeline naming a processor that is not configured.
        ("processors: [memory_limiter, redaction]", "processors: [memory_limiter, redaction, batch]", "batch"),
    ],
)
def test_broken_config_fails_validation(otelcol_bin: Path, tmp_path: Path, good: str, bad: str, complaint: str) -> None:
    text = COLLECTOR_CONFIG.read_text()
    assert text.count(good) == 1, f"{good!r} no longer appears once in collector.yaml: update this test"
    broken = tmp_path / "collector.yaml"
    broken.write_text(text.replace(good, bad))
    result = validate(otelcol_bin, broken)
    assert result.returncode != 0, f"validate accepted a config with {bad!r}"
    assert complaint in result.stderr, result.stderr
