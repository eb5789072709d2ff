"""A resource with nothing in it that holds a secret.

The resource is the operator's (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`), built when
telemetry is configured, usually before the live client's key is known; a key pasted into
one of those variables would otherwise leave with every span and every metric point. So
each export path asks for its resource without secrets: an attribute whose key or value
holds one is left out (the rest of the resource stays), and the caller counts it.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.resources import Resource

from cafe.privacy import MIN_SECRET_CHARS, holds_secret

# Shorter values are not looked for: a local server's placeholder key ("x", "EMPTY") would
# otherwise withhold every attribute that happens to contain it.
MIN_SECRET_LENGTH = MIN_SECRET_CHARS

__all__ = ["MIN_SECRET_LENGTH", "ResourceGuard", "holds_secret", "without_secrets"]


def without_secrets(resource: Resource, secrets: Sequence[str]) -> Resource:
    """`resource` itself when nothing in it holds one of `secrets`, else a copy without the
    attributes that do."""
    if not secrets:
        return resource
    attributes = resource.attributes
    kept = {key: value for key, value in attributes.items()
            if not holds_secret(key, secrets) and not holds_secret(value, secrets)}
    if len(kept) == len(attributes):
        return resource
    return Resource(kept, resource.schema_url)


class ResourceGuard:
    """`without_secrets` for one export path, remembered for the resource it last saw (a
    provider has one resource, so each span or export pays a dict lookup, not a scan)."""

    def __init__(self, secrets: Sequence[str] = ()) -> None:
        self._secrets: tuple[str, ...] = ()
        self._seen: tuple[Resource, Resource] | None = None
        self.add_secrets(secrets)

    def add_secrets(self, secrets: Sequence[str]) -> None:
        new = tuple(s for s in secrets if len(s) >= MIN_SECRET_LENGTH and s not in self._secrets)
        if new:
            self._secrets += new
            self._seen = None  # what was clean may hold one of them

    def __call__(self, resource: Resource) -> Resource:
        seen = self._seen
        if seen is not None and seen[0] is resource:
            return seen[1]
        clean = without_secrets(resource, self._secrets)
        self._seen = (resource, clean)
        return clean
