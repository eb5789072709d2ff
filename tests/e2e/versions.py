"""Release pins the e2e tests and the compose check agree on, kept in one place.

The Collector release comes from collector-config/manifest.yaml and the Jaeger
module version from tools/jaeger/go.mod; this module only says how those map to
the container image tags used in docker-compose.yml.
"""

from __future__ import annotations

import re

from otelstack.layout import REPO

MANIFEST = REPO / "collector-config" / "manifest.yaml"
JAEGER_GO_MOD = REPO / "tools" / "jaeger" / "go.mod"
COMPOSE_FILE = REPO / "docker-compose.yml"

COLLECTOR_IMAGE = "otel/opentelemetry-collector-contrib"
JAEGER_IMAGE = "jaegertracing/jaeger"
JAEGER_MODULE = "github.com/jaegertracing/jaeger"

# Jaeger v2 is released from the v1 Go module: module tag -> v2 release (image tag).
# Add a line when bumping tools/jaeger/go.mod.
JAEGER_MODULE_TO_RELEASE = {"v1.76.0": "2.13.0"}


def manifest_release() -> str:
    """The one release every non-confmap component in the manifest is pinned at."""
    versions = set(
        re.findall(
            r"^\s*- gomod: \S+/\w+(?:receiver|processor|exporter|extension|filestorage) (v\S+)",
            MANIFEST.read_text(),
            re.M,
        )
    )
    if len(versions) != 1:
        raise AssertionError(f"manifest components are not at one release: {sorted(versions)}")
    return versions.pop().removeprefix("v")


def jaeger_module_version() -> str:
    match = re.search(rf"^\s*{re.escape(JAEGER_MODULE)} (v\S+)", JAEGER_GO_MOD.read_text(), re.M)
    if not match:
        raise AssertionError(f"{JAEGER_MODULE} is not required in {JAEGER_GO_MOD}")
    return match.group(1)


def jaeger_release() -> str:
    return JAEGER_MODULE_TO_RELEASE[jaeger_module_version()]
