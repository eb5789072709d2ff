"""The span sampler `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` name, built from
the SDK's own samplers and read from the environment `configure()` is handed (the SDK's
default would read `os.environ` itself, whatever `environ=` said).

Unset, the sampler is `parentbased_always_on`: every shift is kept whole, and a shift run
inside a caller's sampled-out trace stays out of it. A ratio sampler decides by trace id,
so a shift is kept or left out whole either way; for keeping every failed shift whole
while sampling the rest, sample in the Collector (docs/deployment.md). Metrics are not
sampled: they count every call.

A value the specification names but cafe does not build (`jaeger_remote`, `xray`), or an
argument that is not a ratio from 0 to 1, is a `TelemetryConfigError` naming the variable:
the specification's fallback (keep everything, log a warning) would not do what was asked.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    ParentBasedTraceIdRatio,
    Sampler,
    TraceIdRatioBased,
)

from cafe_otel._config import variables as v
from cafe_otel._config.numbers import ascii_decimal
from cafe_otel._config.parse import TelemetryConfigError, shown

SAMPLER_VARIABLE = v.OTEL_TRACES_SAMPLER
ARGUMENT_VARIABLE = v.OTEL_TRACES_SAMPLER_ARG
DEFAULT_SAMPLER = "parentbased_always_on"
# The ones built here, in the specification's spelling.
SAMPLERS = ("always_on", "always_off", "traceidratio",
            "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio")
_RATIOS = frozenset(("traceidratio", "parentbased_traceidratio"))


def _ratio(environ: Mapping[str, str]) -> float:
    raw = environ.get(ARGUMENT_VARIABLE, "").strip()
    if not raw:
        return 1.0  # the specification's default for a ratio sampler
    ratio = ascii_decimal(raw)
    if ratio is None or not 0.0 <= ratio <= 1.0:
        raise TelemetryConfigError(
            f"{ARGUMENT_VARIABLE}: expected a ratio from 0 to 1 in ASCII digits (the value given is not shown)")
    return ratio


def sampler_from(environ: Mapping[str, str]) -> Sampler:
    """The sampler the environment names (`parentbased_always_on` when it names none)."""
    raw = environ.get(SAMPLER_VARIABLE, "")
    name = raw.strip().lower() or DEFAULT_SAMPLER
    if name not in SAMPLERS:
        raise TelemetryConfigError(
            f"{SAMPLER_VARIABLE}: {shown(raw, 30)} is not one cafe builds ({', '.join(SAMPLERS)})")
    if name in _RATIOS:
        ratio = _ratio(environ)
        return TraceIdRatioBased(ratio) if name == "traceidratio" else ParentBasedTraceIdRatio(ratio)
    if name == "always_on":
        return ALWAYS_ON
    if name == "always_off":
        return ALWAYS_OFF
    return ParentBased(ALWAYS_ON if name == "parentbased_always_on" else ALWAYS_OFF)
