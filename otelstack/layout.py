"""Where the stack's configurations live in the repository."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COLLECTOR_CONFIG = REPO / "collector-config" / "collector.yaml"
GATEWAY_CONFIG = REPO / "collector-config" / "gateway.yaml"
JAEGER_CONFIG = REPO / "collector-config" / "jaeger.yaml"
