"""Where telemetry settings are read: the only code in cafe_otel that reads an environment.

`resolve(environ, **explicit)` takes the known variables (`variables.KNOWN_VARIABLES`) from
`environ` once each (`read_environ`), checks them, lets every explicit argument win, and
returns a frozen `TelemetryConfig`; `configure()` builds a pipeline from that and nothing
else. Each signal's OTLP exporter is resolved by the one `signal.resolve_signal(signal, ...)`.
`resolve_command(environ)` is the same for the `cafe` command's own switches.

Importing this package imports no SDK: the parts that need one (the sampler, the metrics
signal) are resolved after the span limits of `environ` were checked, through `import_sdk`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cafe.urls import http_url_problem, shown_url
from cafe_otel._config import variables as v
from cafe_otel._config.capture import CaptureMode
from cafe_otel._config.options import AdvancedOptions, BatchOptions, MetricsOptions
from cafe_otel._config.parse import TelemetryConfigError
from cafe_otel._config.settings import (
    DEFAULT_SHUTDOWN_TIMEOUT,
    BatchSettings,
    Settings,
    resolve_batch_settings,
    resolve_settings,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricExporter
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.sdk.trace.sampling import Sampler

    from cafe_otel._config.metrics import MetricSettings
    from cafe_otel._privacy.shapes import Shape

CONSOLE = "console"


class UnlistedVariable(LookupError):
    """Code asked an environment read by `read_environ` for a name it does not list: the
    name belongs in `variables.py` (a LookupError, so `Mapping.get` does not hide it)."""


class EnvironSnapshot(Mapping[str, str]):
    """The known variables of one environment, each read from it once."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = dict(values)

    def __getitem__(self, name: str) -> str:
        if name not in v.KNOWN_VARIABLES:
            raise UnlistedVariable(f"{name} is not a constant in cafe_otel._config.variables")
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:  # values may be credentials (headers)
        return f"EnvironSnapshot({sorted(self._values)!r})"


def read_environ(environ: Mapping[str, str] | None = None) -> EnvironSnapshot:
    """Every known variable of `environ` (os.environ at call time when None), read once."""
    if isinstance(environ, EnvironSnapshot):
        return environ
    if environ is None:
        import os

        environ = os.environ
    found: dict[str, str] = {}
    for name in sorted(v.KNOWN_VARIABLES):
        value = environ.get(name)
        if value is not None:
            found[name] = value
    return EnvironSnapshot(found)


@dataclass(frozen=True)
class TelemetryConfig:
    """Everything `configure()` builds from: resolved, checked, explicit arguments applied.

    `sampler`, `span_limits` and `metrics` are None when telemetry is disabled
    (`settings.disabled`): nothing is built then. `metrics` None also means metrics are off."""

    settings: Settings
    batch: BatchSettings
    advanced: AdvancedOptions
    exporter: SpanExporter | None  # the caller's; None: OTLP (or the console, `console`)
    console: bool  # OTEL_TRACES_EXPORTER=console and no exporter of the caller's
    # CAFE_SCRUB_PATTERNS: content is scrubbed with them too (a pattern may be a secret's literal text)
    scrub_patterns: tuple[str, ...] = field(repr=False)
    shapes: Mapping[str, Shape]  # the caller's own keys
    set_global: bool
    sampler: Sampler | None = None
    span_limits: Mapping[str, int | None] | None = None  # SpanLimits argument -> limit (a None limit: unset)
    metrics: MetricSettings | None = None
    metric_exporter: MetricExporter | None = None  # the caller's; None: OTLP
    secrets: tuple[str, ...] = field(default=(), repr=False)

    @property
    def capture(self) -> CaptureMode:
        return self.settings.capture


def _group(value: object, name: str, kind: type[Any]) -> None:
    if value is not None and not isinstance(value, kind):
        raise TelemetryConfigError(f"{name}: {type(value).__name__} is not a cafe_otel.{kind.__name__}")


def resolve(
    environ: Mapping[str, str] | None = None,
    *,
    service_name: str | None = None,
    endpoint: str | None = None,
    protocol: str | None = None,
    headers: Mapping[str, str] | None = None,
    capture_content: CaptureMode | str | bool | None = None,
    exporter: SpanExporter | None = None,
    metrics: bool | MetricsOptions | None = None,
    batch: BatchOptions | None = None,
    advanced: AdvancedOptions | None = None,
    secrets: Iterable[str] = (),
    set_global: bool = True,
    shapes: Mapping[str, Shape] | None = None,
) -> TelemetryConfig:
    """The configuration `configure()` builds: explicit arguments beat the `OTEL_*` variables
    of `environ` (os.environ at call time when None), which beat the defaults.

    `metrics`: True or False decide; a `MetricsOptions` gives the signal's parts (and its
    `enabled` decides); undecided, `OTEL_METRICS_EXPORTER` does (metrics are off when `exporter`
    is given without a metric exporter, or with `OTEL_TRACES_EXPORTER=console`)."""
    _group(batch, "batch", BatchOptions)
    _group(advanced, "advanced", AdvancedOptions)
    if metrics is not None and not isinstance(metrics, (bool, MetricsOptions)):
        raise TelemetryConfigError(
            f"metrics: {type(metrics).__name__} is not True, False or a cafe_otel.MetricsOptions")
    batch = batch or BatchOptions()
    advanced = advanced or AdvancedOptions()
    metric_options = metrics if isinstance(metrics, MetricsOptions) else MetricsOptions(enabled=metrics)
    wanted = metric_options.enabled
    env = read_environ(environ)

    own_shapes = user_shapes({**named_shape_tables(env), **(shapes or {})})
    settings = resolve_settings(
        service_name=service_name, endpoint=endpoint, protocol=protocol, headers=headers,
        export_timeout=batch.export_timeout, capture_content=capture_content, environ=env)
    limits = resolve_batch_settings(
        max_queue_size=batch.max_queue_size, max_export_batch_size=batch.max_export_batch_size,
        schedule_delay=batch.schedule_delay,
        shutdown_timeout=DEFAULT_SHUTDOWN_TIMEOUT if batch.shutdown_timeout is None else batch.shutdown_timeout,
        environ=env, source="BatchOptions.{}")
    console = exporter is None and env.get(v.OTEL_TRACES_EXPORTER, "").strip().lower() == CONSOLE
    config = TelemetryConfig(
        settings=settings, batch=limits, advanced=advanced, exporter=exporter, console=console,
        scrub_patterns=tuple(line for line in env.get(v.CAFE_SCRUB_PATTERNS, "").splitlines() if line.strip()),
        shapes=own_shapes, set_global=set_global, secrets=tuple(secrets))
    if settings.disabled:
        return config

    # The SDK's parts are resolved only now: the span limits it reads on import are checked.
    from cafe_otel._config.environment import check_limits, import_sdk

    import_sdk()
    from cafe_otel._config.metrics import metrics_wanted, resolve_metric_settings
    from cafe_otel._config.sampling import sampler_from

    sampler = advanced.sampler if advanced.sampler is not None else sampler_from(env)
    if console and wanted is None and metric_options.exporter is None and not env.get(
            v.OTEL_METRICS_EXPORTER, "").strip():
        wanted = False  # no metrics to a Collector nobody started
    # A caller who hands in the span exporter has chosen where telemetry goes: metrics then
    # need their own exporter (or metrics=True) rather than an OTLP default of their own.
    if wanted is None and exporter is not None and metric_options.exporter is None:
        wanted = False
    metric_settings = None
    if metrics_wanted(wanted, env):
        metric_settings = resolve_metric_settings(settings.options, export_interval=metric_options.export_interval,
                                                  environ=env)
    return TelemetryConfig(
        settings=settings, batch=limits, advanced=advanced, exporter=exporter, console=console,
        scrub_patterns=config.scrub_patterns, shapes=own_shapes, set_global=set_global,
        sampler=sampler, span_limits=check_limits(env), metrics=metric_settings,
        metric_exporter=metric_options.exporter, secrets=config.secrets)


def named_shape_tables(environ: Mapping[str, str]) -> dict[str, Shape]:
    """The shapes of the tables `OTEL_PYTHON_CAFE_SHAPES` names (`package.module:TABLE`,
    comma-separated; each a mapping of attribute keys to `cafe_otel.Shape`), merged in order;
    an explicit `configure(shapes=...)` is added over them. A name that does not load is a
    named error (under `opentelemetry-instrument`: the one line that telemetry is off)."""
    import importlib

    variable = v.OTEL_PYTHON_CAFE_SHAPES
    found: dict[str, Shape] = {}
    for name in (part.strip() for part in environ.get(variable, "").split(",")):
        if not name:
            continue
        module_name, colon, attribute = name.partition(":")
        if not colon or not module_name.strip() or not attribute.strip():
            raise TelemetryConfigError(f"{variable}: {name!r} is not package.module:TABLE")
        try:
            module = importlib.import_module(module_name.strip())
        except Exception as error:  # its text may quote the program's own code: the class only
            raise TelemetryConfigError(f"{variable}: {module_name.strip()!r} cannot be imported "
                                       f"({type(error).__name__})") from None
        table = getattr(module, attribute.strip(), None)
        if not isinstance(table, Mapping):
            raise TelemetryConfigError(f"{variable}: {name!r} is not a mapping of attribute keys to cafe_otel shapes")
        found.update(table)
    return found


def user_shapes(shapes: Mapping[str, Shape] | None) -> dict[str, Shape]:
    """The caller's own keys and their shapes, checked: a key of the table (the conventions'
    or ours) keeps its shape, and free text has no shape (content has its own switch)."""
    from cafe_otel._privacy import shapes as sh

    found: dict[str, sh.Shape] = {}
    for key, shape in (shapes or {}).items():
        if not isinstance(key, str) or not key.strip():
            raise TelemetryConfigError("shapes: every key must be a non-empty attribute name")
        if key in sh.SHAPES:
            raise TelemetryConfigError(f"shapes: {key!r} already has a shape (cafe_otel._privacy.shapes.SHAPES); "
                                       "declare shapes for your own keys only")
        if not isinstance(shape, sh.Shape):
            raise TelemetryConfigError(f"shapes: the shape of {key!r} is not a cafe_otel.Shape")
        if shape.kind == sh.CONTENT:
            raise TelemetryConfigError(f"shapes: {key!r} cannot be content (free text leaves only with "
                                       "content capture, under the GenAI content keys)")
        found[key] = shape
    return found


@dataclass(frozen=True)
class CommandSettings:
    """The `cafe` command's own telemetry switches."""

    endpoint_set: bool  # OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT: export is on without --otlp
    debug: bool  # CAFE_DEBUG: the exporters' lines go to stderr as they come
    jaeger_url: str  # CAFE_JAEGER_URL, stripped; "" when unset

    def trace_ui(self) -> str | None:
        """CAFE_JAEGER_URL as the trace notes print it: an http(s) URL with a host, shown
        without a user:password, query or fragment (the notes go to stdout, and so into CI logs)."""
        if not self.jaeger_url:
            return None
        problem = http_url_problem(self.jaeger_url)
        if problem is not None:
            raise TelemetryConfigError(f"{v.CAFE_JAEGER_URL}: {problem}; use the http(s)://HOST[:PORT] of Jaeger's UI")
        return shown_url(self.jaeger_url)


def resolve_command(environ: Mapping[str, str] | None = None) -> CommandSettings:
    env = read_environ(environ)
    return CommandSettings(
        endpoint_set=any(env.get(name, "").strip() for name in v.ENDPOINT_VARIABLES),
        debug=bool(env.get(v.CAFE_DEBUG)),
        jaeger_url=env.get(v.CAFE_JAEGER_URL, "").strip(),
    )


@dataclass(frozen=True)
class LauncherSettings:
    """What `opentelemetry-instrument`'s run is told beside the pipeline's own settings."""

    debug: bool  # CAFE_DEBUG: the exporters' lines go to stderr as they come
    configurator: str | None  # OTEL_PYTHON_CONFIGURATOR as given; None when unset


def resolve_launcher(environ: Mapping[str, str] | None = None) -> LauncherSettings:
    env = read_environ(environ)
    return LauncherSettings(debug=bool(env.get(v.CAFE_DEBUG)), configurator=env.get(v.OTEL_PYTHON_CONFIGURATOR))


__all__ = [
    "AdvancedOptions", "BatchOptions", "CommandSettings", "EnvironSnapshot", "LauncherSettings", "MetricsOptions",
    "TelemetryConfig", "named_shape_tables", "read_environ", "resolve", "resolve_command", "resolve_launcher",
    "user_shapes",
]
