"""Where the stack's configurations live in the repository."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COLLECTOR_CONFIG = REPO / "collector-config" / "collector.yaml"
GATEWAY_CONFIG = REPO / "collector-config" / "gateway.yaml"
# Overlays for the agent: merged over collector.yaml, they swap the static list of gateways.
RESOLVER_DNS = REPO / "collector-config" / "resolver-dns.yaml"
RESOLVER_K8S = REPO / "collector-config" / "resolver-k8s.yaml"
JAEGER_CONFIG = REPO / "collector-config" / "jaeger.yaml"
