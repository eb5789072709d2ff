"""Our instrumentation scope: name, version and the pinned schema URL."""

from __future__ import annotations

import functools
from importlib.metadata import PackageNotFoundError, version

from opentelemetry import trace

from cafe_otel import semconv as sc


@functools.cache
def our_version() -> str | None:
    # Read when first needed, not at import: importing cafe_otel does nothing.
    try:
        return version("cafe-otel")
    except PackageNotFoundError:  # an unpackaged checkout: the scope has no version
        return None


def otel_tracer_of(source: trace.TracerProvider | trace.Tracer) -> trace.Tracer:
    """Our instrumentation scope on a provider, with the pinned schema URL."""
    if isinstance(source, trace.Tracer):
        return source
    return source.get_tracer(sc.INSTRUMENTATION_NAME, our_version(), schema_url=sc.SCHEMA_URL)
