"""OTLP over gRPC is the `grpc` extra (`pip install -e '.[grpc]'` in a checkout): recording,
replay and OTLP/HTTP do not need gRPC, whose wheels are the largest of our dependencies.
Asking for gRPC without it is a `TelemetryConfigError` (exit 20) whose remedy installs the
extra's one requirement, from PyPI, however cafe-otel itself was installed (it is not on PyPI)."""

from __future__ import annotations

import importlib
from types import ModuleType

from cafe_otel._config.parse import TelemetryConfigError

GRPC_EXTRA = "grpc"
GRPC_REQUIREMENT = "opentelemetry-exporter-otlp-proto-grpc>=1.45,<1.46"  # pyproject.toml's grpc extra
INSTALL_GRPC = f"pip install '{GRPC_REQUIREMENT}'"


class GrpcExtraMissing(TelemetryConfigError):
    """OTLP/gRPC was asked for and its exporter cannot be imported."""


def grpc_exporter(signal: str) -> tuple[ModuleType, ModuleType]:
    """(`grpc`, the OTLP/gRPC exporter module for `signal`: "trace" or "metric")."""
    try:
        import grpc  # type: ignore[import-untyped]
        exporter = importlib.import_module(f"opentelemetry.exporter.otlp.proto.grpc.{signal}_exporter")
    except ImportError as error:
        # The module's name only: an import error's text can carry a path.
        raise GrpcExtraMissing(
            f"OTLP {signal}s over gRPC: {getattr(error, 'name', None) or 'its exporter'} cannot be imported "
            f"(the grpc extra is not installed); install it with {INSTALL_GRPC}, "
            "or export over HTTP (OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf)") from None
    return grpc, exporter
