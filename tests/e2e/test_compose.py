"""docker-compose.yml agrees with what the end-to-end tests build and run.

No binaries needed: this reads docker-compose.yml, the manifest, tools/jaeger/go.mod
and the two configs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from otelstack import COLLECTOR_CONFIG, JAEGER_CONFIG, REPO

from .versions import (
    COLLECTOR_IMAGE,
    COMPOSE_FILE,
    JAEGER_IMAGE,
    jaeger_release,
    manifest_release,
)

COLLECTOR_UID = "10001"  # the user the contrib image runs as


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())["services"]


def env_defaults(config: Path) -> dict[str, str]:
    """`${env:NAME:-default}` occurrences of a config: {NAME: default}."""
    return dict(re.findall(r"\$\{env:(\w+):-([^}]*)\}", config.read_text()))


def port_of(address: str) -> str:
    return address.rsplit(":", 1)[1]


def image(service: dict) -> tuple[str, str]:
    name, tag = service["image"].rsplit(":", 1)
    return name, tag


def test_image_tags_match_the_builds(services: dict) -> None:
    assert image(services["otelcol"]) == (COLLECTOR_IMAGE, manifest_release())
    assert image(services["jaeger"]) == (JAEGER_IMAGE, jaeger_release())


@pytest.mark.parametrize(("service", "config"), [("otelcol", COLLECTOR_CONFIG), ("jaeger", JAEGER_CONFIG)])
def test_mounts_the_shipped_config_read_only(services: dict, service: str, config: Path) -> None:
    mounts = [m.split(":") for m in services[service]["volumes"]]
    (target,) = [t for src, t, *mode in mounts if (REPO / src).resolve() == config and mode == ["ro"]]
    assert services[service]["command"] == [f"--config={target}"]


def test_published_ports_bind_loopback_only(services: dict) -> None:
    for name, service in services.items():
        for mapping in service.get("ports", []):
            assert str(mapping).startswith("127.0.0.1:"), f"{name} publishes {mapping} beyond loopback"


def published(service: dict) -> set[str]:
    return {str(m).split(":")[2] for m in service.get("ports", [])}


def test_ports_agree_with_config_defaults(services: dict) -> None:
    col_defaults = env_defaults(COLLECTOR_CONFIG)
    col_env = services["otelcol"]["environment"]
    assert set(col_env) <= set(col_defaults), "compose sets variables collector.yaml does not read"
    # In the container only the interface changes (0.0.0.0); every listening port is the default.
    listeners = ("CAFE_OTLP_GRPC_ENDPOINT", "CAFE_OTLP_HTTP_ENDPOINT", "CAFE_OTELCOL_HEALTH_ENDPOINT")
    for var in listeners:
        assert port_of(col_env[var]) == port_of(col_defaults[var]), var
    assert col_env["CAFE_OTELCOL_METRICS_PORT"] == col_defaults["CAFE_OTELCOL_METRICS_PORT"]
    default_ports = {port_of(col_defaults[v]) for v in listeners} | {col_defaults["CAFE_OTELCOL_METRICS_PORT"]}
    assert published(services["otelcol"]) == default_ports == {"4317", "4318", "13133", "8888"}

    jaeger_defaults = env_defaults(JAEGER_CONFIG)
    assert set(services["jaeger"]["environment"]) <= set(jaeger_defaults)
    assert published(services["jaeger"]) == {port_of(jaeger_defaults["CAFE_JAEGER_QUERY_HTTP_ENDPOINT"])} == {"16686"}

    # Host port = container port, so what the host sees is the configs' defaults.
    for service in services.values():
        for mapping in service.get("ports", []):
            _, host, container = str(mapping).split(":")
            assert host == container, mapping

    # The collector's default upstream is the compose Jaeger's OTLP gRPC listener.
    upstream = col_env["CAFE_UPSTREAM_OTLP_ENDPOINT"]
    assert upstream == col_defaults["CAFE_UPSTREAM_OTLP_ENDPOINT"] == "jaeger:4317"
    assert port_of(services["jaeger"]["environment"]["CAFE_JAEGER_OTLP_GRPC_ENDPOINT"]) == port_of(upstream)


def test_queue_volume_is_persistent_and_owned_by_the_collector_user(services: dict) -> None:
    queue_dir = services["otelcol"]["environment"]["CAFE_OTELCOL_QUEUE_DIR"]
    (volume,) = [m.split(":")[0] for m in services["otelcol"]["volumes"] if m.split(":")[1] == queue_dir]
    assert volume in yaml.safe_load(COMPOSE_FILE.read_text())["volumes"], "queue must be on a named volume"
    init_name, condition = next(
        (name, dep["condition"]) for name, dep in services["otelcol"]["depends_on"].items() if name != "jaeger"
    )
    assert condition == "service_completed_successfully"
    init = services[init_name]
    assert f"{volume}:{queue_dir}" in init["volumes"]
    assert f"{COLLECTOR_UID}:{COLLECTOR_UID}" in init["command"]


def test_the_collector_allowlist_covers_every_metadata_key_cafe_otel_sends() -> None:
    """Defense in depth must not eat our own metadata: every key the metadata-only
    processor lets out is on the Collector's redaction allowlist too (else it never
    reaches the backend and each span carries a false redaction count)."""
    from cafe_otel.semconv import METADATA_ALLOWLIST

    config = yaml.safe_load(COLLECTOR_CONFIG.read_text())
    allowed = set(config["processors"]["redaction"]["allowed_keys"])
    assert sorted(METADATA_ALLOWLIST - allowed) == []
    assert "service.name" in allowed


def test_the_collector_metrics_allowlist_is_the_metric_attributes_cafe_otel_sends() -> None:
    from cafe_otel.semconv import METRIC_ATTRIBUTES

    config = yaml.safe_load(COLLECTOR_CONFIG.read_text())
    allowed = set(config["processors"]["redaction/metrics"]["allowed_keys"])
    resource = {key for key in allowed if key.startswith(("service.", "telemetry.sdk."))}
    assert allowed - resource == set(METRIC_ATTRIBUTES)
    pipeline = config["service"]["pipelines"]["metrics"]
    assert pipeline["processors"] == ["memory_limiter", "redaction/metrics"]
    exporter = config["exporters"][pipeline["exporters"][0]]
    assert exporter["sending_queue"]["storage"] == "file_storage/queue"  # persistent, as the traces'
    assert exporter["retry_on_failure"]["max_elapsed_time"] == 0  # never gives up


def test_compose_has_prometheus_receiving_the_metrics_pipeline_and_scraping_the_collector(services: dict) -> None:
    found = services
    prometheus = found["prometheus"]
    assert re.fullmatch(r"prom/prometheus:v\d+\.\d+\.\d+", prometheus["image"])  # pinned, never latest
    assert "--web.enable-otlp-receiver" in prometheus["command"]
    assert prometheus["ports"] == ["127.0.0.1:9090:9090"]
    assert found["otelcol"]["environment"]["CAFE_METRICS_UPSTREAM_ENDPOINT"] == "http://prometheus:9090/api/v1/otlp"
    scrape = yaml.safe_load((REPO / "collector-config" / "prometheus.yml").read_text())["scrape_configs"]
    assert {"targets": ["otelcol:8888"]} in scrape[0]["static_configs"]


def test_the_collector_logs_pipeline_applies_the_spans_allowlist_and_a_persistent_queue() -> None:
    """The content event is a log record: it passes the same `redaction` as the spans (its
    content keys only where a deployment put them on that list), then a queue on disk."""
    config = yaml.safe_load(COLLECTOR_CONFIG.read_text())
    pipeline = config["service"]["pipelines"]["logs"]
    assert pipeline["receivers"] == ["otlp"]
    assert pipeline["processors"] == config["service"]["pipelines"]["traces"]["processors"]
    from cafe_otel.semconv import CONTENT_ATTRIBUTES

    assert not CONTENT_ATTRIBUTES & set(config["processors"]["redaction"]["allowed_keys"])
    (name,) = pipeline["exporters"]
    exporter = config["exporters"][name]
    assert exporter["endpoint"] != config["exporters"]["otlp_grpc"]["endpoint"]  # Jaeger stores no logs
    assert exporter["sending_queue"] == config["exporters"]["otlp_grpc"]["sending_queue"]
    assert exporter["retry_on_failure"]["max_elapsed_time"] == 0
