"""`otelcol-cafe validate` accepts the shipped config and rejects a broken one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from otelstack import COLLECTOR_CONFIG, GATEWAY_CONFIG, LOOPBACK, free_ports
from otelstack.layout import RESOLVER_DNS, RESOLVER_K8S

pytestmark = pytest.mark.e2e


def validate(
    binary: Path, config: Path, env: dict[str, str] | None = None, *, command: str = "validate",
    overlays: tuple[Path, ...] = (),
) -> subprocess.CompletedProcess:
    configs = [f"--config={c}" for c in (config, *overlays)]
    return subprocess.run(
        [str(binary), command, *configs], capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, **(env or {})},
    )


def test_shipped_config_validates(otelcol_bin: Path) -> None:
    result = validate(otelcol_bin, COLLECTOR_CONFIG)
    assert result.returncode == 0, result.stderr


def test_gateway_config_validates(otelcol_bin: Path) -> None:
    result = validate(otelcol_bin, GATEWAY_CONFIG)
    assert result.returncode == 0, result.stderr


TWO_TIERS = {"CAFE_AGENT_EXPORTER": "load_balancing", "CAFE_GATEWAYS": "[gw-1:4317, gw-2:4317]"}


def test_the_agent_validates_in_its_two_tier_mode(otelcol_bin: Path) -> None:
    result = validate(otelcol_bin, COLLECTOR_CONFIG, TWO_TIERS)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("overlay", "resolver"), [(RESOLVER_DNS, "dns"), (RESOLVER_K8S, "k8s")])
def test_a_resolver_overlay_replaces_the_static_list(otelcol_bin: Path, overlay: Path, resolver: str) -> None:
    result = validate(otelcol_bin, COLLECTOR_CONFIG, TWO_TIERS, overlays=(overlay,))
    assert result.returncode == 0, result.stderr
    printed = validate(otelcol_bin, COLLECTOR_CONFIG, TWO_TIERS, command="print-config", overlays=(overlay,))
    assert printed.returncode == 0, printed.stderr
    resolvers = yaml.safe_load(printed.stdout)["exporters"]["load_balancing"]["resolver"]
    # Exactly one resolver survives the merge: the exporter refuses two.
    assert [name for name, value in resolvers.items() if value] == [resolver]


def test_a_misspelled_agent_exporter_fails_validation(otelcol_bin: Path) -> None:
    result = validate(otelcol_bin, COLLECTOR_CONFIG, {**TWO_TIERS, "CAFE_AGENT_EXPORTER": "loadbalancer"})
    assert result.returncode != 0
    assert "loadbalancer" in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("good", "bad", "complaint"),
    [
        # A misspelled tail-sampling key is refused, not ignored.
        ("sample_on_first_match: true", "sample_on_frist_match: true", "sample_on_frist_match"),
        # The pipeline needs tail_sampling configured.
        ("processors: [memory_limiter, redaction, tail_sampling]",
         "processors: [memory_limiter, redaction, tail_sampling, batch]", "batch"),
    ],
)
def test_broken_gateway_config_fails_validation(
    otelcol_bin: Path, tmp_path: Path, good: str, bad: str, complaint: str
) -> None:
    text = GATEWAY_CONFIG.read_text()
    assert text.count(good) == 1, f"{good!r} no longer appears once in gateway.yaml: update this test"
    broken = tmp_path / "gateway.yaml"
    broken.write_text(text.replace(good, bad))
    result = validate(otelcol_bin, broken)
    assert result.returncode != 0, f"validate accepted a gateway config with {bad!r}"
    assert complaint in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("good", "bad", "complaint"),
    [
        # memory_limiter refuses a zero check interval.
        ("check_interval: 1s", "check_interval: 0s", "check_interval"),
        # A persistent queue cannot wait for results.
        ("block_on_overflow: false", "block_on_overflow: false\n      wait_for_result: true", "wait_for_result"),
        # A pipeline (the traces') naming a processor that is not configured.
        ("first.\n      processors: [memory_limiter, redaction]",
         "first.\n      processors: [memory_limiter, redaction, batch]", "batch"),
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


def test_a_misspelled_policy_type_passes_validate_but_stops_the_gateway_at_start(
    otelcol_bin: Path, tmp_path: Path
) -> None:
    """tail_sampling builds its policies only at start: `validate` cannot see a wrong policy
    type (collector-config/README.md says so), but the gateway refuses to run with it, so
    a typo cannot silently keep nothing."""
    broken = tmp_path / "gateway.yaml"
    broken.write_text(GATEWAY_CONFIG.read_text().replace("type: string_attribute", "type: string_atribute"))
    assert validate(otelcol_bin, broken).returncode == 0
    ports = free_ports("otlp_grpc", "health", "metrics")
    env = {
        **os.environ,
        "CAFE_OTLP_GRPC_ENDPOINT": f"{LOOPBACK}:{ports['otlp_grpc']}",
        "CAFE_OTELCOL_HEALTH_ENDPOINT": f"{LOOPBACK}:{ports['health']}",
        "CAFE_OTELCOL_METRICS_PORT": str(ports["metrics"]),
    }
    started = subprocess.run([str(otelcol_bin), f"--config={broken}"], capture_output=True, text=True,
                             timeout=60, check=False, env=env)
    assert started.returncode != 0
    assert "unknown sampling policy type string_atribute" in started.stderr, started.stderr[-2000:]
