"""A resource with nothing in it that holds a secret.

The resource is the operator's (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`), built when
telemetry is configured, usually before the live client's key is known; a key pasted into
one of those variables would otherwise leave with every span and every metric point. So
each export path asks for its resource without secrets: an attribute whose key or value
holds one (a known secret, or what the secret patterns find, `cafe_otel._privacy.secrets`),
or whose `key=value` reads as a secret's assignment (`deploy.password=hunter22`), is left
out (the rest of the resource stays), and the caller counts it.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.resources import Resource

from cafe.privacy import MIN_SECRET_CHARS, Scrubber, holds_secret
from cafe_otel._privacy.secrets import SecretCheck

# Shorter values are not looked for: a local server's placeholder key ("x", "EMPTY") would
# otherwise withhold every attribute that happens to contain it.
MIN_SECRET_LENGTH = MIN_SECRET_CHARS

__all__ = ["MIN_SECRET_LENGTH", "ResourceGuard", "holds_secret", "without_secrets"]


def _holds(key: str, value: object, check: SecretCheck) -> bool:
    if check(key) or check(value):
        return True
    return isinstance(value, str) and check.text(f"{key}={value}")


def without_secrets(resource: Resource, secrets: Sequence[str] | SecretCheck) -> Resource:
    """`resource` itself when nothing in it holds a secret (one of `secrets`, or what the
    default secret patterns find), else a copy without the attributes that do."""
    check = secrets if isinstance(secrets, SecretCheck) else SecretCheck(known=secrets)
    attributes = resource.attributes
    kept = {key: value for key, value in attributes.items() if not _holds(key, value, check)}
    if len(kept) == len(attributes):
        return resource
    return Resource(kept, resource.schema_url)


class ResourceGuard:
    """`without_secrets` for one export path, remembered for the resource it last saw (a
    provider has one resource, so each span or export pays an identity test, not a scan).
    `patterns`: the scrubber whose patterns find secrets (default: cafe's own)."""

    def __init__(self, secrets: Sequence[str] = (), *, patterns: Scrubber | None = None) -> None:
        self._check = SecretCheck(patterns, secrets)
        self._seen: tuple[Resource, Resource] | None = None

    def add_secrets(self, secrets: Sequence[str]) -> None:
        if self._check.add_known(secrets):
            self._seen = None  # what was clean may hold one of them

    def __call__(self, resource: Resource) -> Resource:
        seen = self._seen
        if seen is not None and seen[0] is resource:
            return seen[1]
        clean = without_secrets(resource, self._check)
        self._seen = (resource, clean)
        return clean
