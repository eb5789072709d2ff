"""The two-tier configs agree with the code that owns the names they use.

No binaries needed: this reads collector.yaml, gateway.yaml and docker-compose.yml and
imports the Python modules that own the attribute names (cafe_otel.semconv) and the
stop reasons (cafe.counter.loop). The Collector YAML cannot import them, so this is the link.
"""

from __future__ import annotations

import pytest
import yaml

from otelstack import COLLECTOR_CONFIG, GATEWAY_CONFIG

from .versions import COMPOSE_FILE

# Stop reasons of shifts that ended as intended: kept only at the sampled fraction.
# A new stop reason must be added either to the gateway's failed-shifts policy or here,
# on purpose; until then this test fails.
DELIBERATELY_SAMPLED = frozenset({"answered", "script_done"})


@pytest.fixture(scope="module")
def gateway() -> dict:
    return yaml.safe_load(GATEWAY_CONFIG.read_text())


@pytest.fixture(scope="module")
def agent() -> dict:
    return yaml.safe_load(COLLECTOR_CONFIG.read_text())


def policy(gateway: dict, name: str) -> dict:
    (found,) = [p for p in gateway["processors"]["tail_sampling"]["policies"] if p["name"] == name]
    return found


def stop_reasons() -> set[str]:
    from cafe.counter.loop import STOP_REASONS

    # Plain strings today; an enum's members carry the string as `.value`.
    return {getattr(reason, "value", reason) for reason in STOP_REASONS}


def test_the_failed_shift_policy_names_our_attribute(gateway: dict) -> None:
    from cafe_otel.semconv import CAFE_STOP_REASON

    failed = policy(gateway, "failed-shifts")
    assert failed["type"] == "string_attribute"
    assert failed["string_attribute"]["key"] == CAFE_STOP_REASON


def test_every_stop_reason_is_kept_or_deliberately_sampled(gateway: dict) -> None:
    kept = set(policy(gateway, "failed-shifts")["string_attribute"]["values"])
    reasons = stop_reasons()
    assert kept >= {"consent_violation", "retries_exhausted", "turn_cap"}
    assert not kept & DELIBERATELY_SAMPLED, "a stop reason is both kept and deliberately sampled"
    assert sorted(kept - reasons) == [], "the policy names a stop reason cafe no longer has"
    assert sorted(reasons - kept - DELIBERATELY_SAMPLED) == [], (
        "a stop reason is neither kept by the gateway's failed-shifts policy nor in DELIBERATELY_SAMPLED"
    )


def test_the_rest_is_sampled_at_ten_percent_by_default_and_errors_and_slow_shifts_are_kept(gateway: dict) -> None:
    rest = policy(gateway, "the-rest")
    assert rest["type"] == "probabilistic"
    assert rest["probabilistic"]["sampling_percentage"] == "${env:CAFE_SAMPLE_PERCENT:-10}"
    assert policy(gateway, "errors")["status_code"]["status_codes"] == ["ERROR"]
    assert policy(gateway, "slow-shifts")["type"] == "latency"


def test_agent_and_gateway_allowlists_agree_with_cafe_otel(agent: dict, gateway: dict) -> None:
    from cafe_otel.semconv import METADATA_ALLOWLIST

    agent_keys = agent["processors"]["redaction"]["allowed_keys"]
    gateway_keys = gateway["processors"]["redaction"]["allowed_keys"]
    assert gateway_keys == agent_keys, "gateway.yaml's redaction allowlist drifted from collector.yaml's"
    assert sorted(METADATA_ALLOWLIST - set(gateway_keys)) == []
    assert gateway["processors"]["redaction"]["allow_all_keys"] is False


def test_the_gateway_samples_after_the_memory_limiter_and_the_allowlist(gateway: dict) -> None:
    processors = gateway["service"]["pipelines"]["traces"]["processors"]
    assert processors == ["memory_limiter", "redaction", "tail_sampling"]
    # A late span must follow its trace's decision, or a kept trace loses it.
    cache = gateway["processors"]["tail_sampling"]["decision_cache"]
    assert cache["sampled_cache_size"] > 0 and cache["non_sampled_cache_size"] > 0


def test_the_agent_routes_by_trace_id_through_its_persistent_queue(agent: dict) -> None:
    exporters = agent["exporters"]
    balancer = exporters["load_balancing"]
    assert balancer["routing_key"] == "traceID"  # case-sensitive; validate does not check it
    # The same on-disk queue and never-give-up retry as the one-tier exporter.
    assert balancer["sending_queue"] == exporters["otlp_grpc"]["sending_queue"]
    assert balancer["sending_queue"]["storage"] in agent["service"]["extensions"]
    assert balancer["retry_on_failure"]["max_elapsed_time"] == 0
    # Per-gateway queues would hold spans in memory, off the disk queue.
    inner = balancer["protocol"]["otlp"]
    assert inner["sending_queue"]["enabled"] is False
    assert inner["retry_on_failure"]["enabled"] is False
    # One tier stays the default: a plain `otelcol --config=collector.yaml` needs no gateways.
    assert agent["service"]["pipelines"]["traces"]["exporters"] == ["${env:CAFE_AGENT_EXPORTER:-otlp_grpc}"]


def test_compose_has_a_two_gateway_profile() -> None:
    services = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    gateways = {name: s for name, s in services.items() if "two-tier" in s.get("profiles", [])
                and s["command"] == ["--config=/etc/otelcol-cafe/gateway.yaml"]}
    assert sorted(gateways) == ["gateway-1", "gateway-2"]
    agent = services["otelcol-agent"]
    assert agent["profiles"] == ["two-tier"]
    env = agent["environment"]
    assert env["CAFE_AGENT_EXPORTER"] == "load_balancing"
    assert yaml.safe_load(env["CAFE_GATEWAYS"]) == [f"{name}:4317" for name in sorted(gateways)]
    for gateway in gateways.values():
        assert gateway["environment"]["CAFE_UPSTREAM_OTLP_ENDPOINT"] == "jaeger:4317"
    # The one-tier Collector is not in the profile, so the two never both listen on 4317.
    assert "profiles" not in services["otelcol"]
    # Its own ports (the one-tier Collector's + 10), so both can run on one host.
    assert env["CAFE_OTLP_GRPC_ENDPOINT"] == "0.0.0.0:4327"
    assert "127.0.0.1:4327:4327" in [str(p) for p in agent["ports"]]


def test_the_gateway_passes_log_records_through_the_same_allowlist_without_sampling(gateway: dict) -> None:
    pipeline = gateway["service"]["pipelines"]["logs"]
    assert pipeline["processors"] == ["memory_limiter", "redaction"]  # tail sampling is for traces
    (name,) = pipeline["exporters"]
    assert gateway["exporters"][name]["sending_queue"] == gateway["exporters"]["otlp_grpc"]["sending_queue"]
