"""`configure(...)`: one call from settings to providers, their chains and a handle.

Spans: BoundedBatchSpanProcessor, whose worker checks each span's shape (`SpanSanitiser`,
the metadata-only guarantee) before anything is encoded and puts every exporter call behind
the fail-soft boundary -> OTLP exporter (gRPC or HTTP) or the explicit `exporter`. The
calling thread pays only the enqueue; `extra_processors` see the spans as they ended,
before the check (the guarantee holds for what leaves through this chain).
Metrics (unless `OTEL_METRICS_EXPORTER=none` or `metrics=False`): a MeterProvider beside the
TracerProvider, on the same resource, whose periodic reader exports through
`FailSoftMetricExporter` to OTLP (or the explicit `metric_exporter`); every tracer the handle
makes feeds a `MetricsListener`. Both signals' losses are in the one account, and
`shutdown` bounds both together.
Settings come from explicit arguments first, then the `OTEL_*` variables of `environ`
(os.environ at call time), then defaults. From the first enabled handle on, what the SDK, its
exporters, gRPC and cafe_otel log is redacted as it is made (`cafe_otel._privacy.logs`).

The handle's providers become the global ones (`set_global=True`, the default) when no
global provider is set yet, so that any other instrumentation reports through the same
metadata-only, fail-soft pipeline; `set_global=False` touches nothing global. The
OpenTelemetry API lets a global provider be set once a process: a later handle stays
local (`handle.is_global` says which). `shapes=` declares the shapes of the caller's own
attribute keys (they pass the metadata-only processor when their values fit).
`OTEL_TRACES_EXPORTER=console` prints the (sanitised) spans on stdout, for development.

How settings are resolved, checked and the OTEL_* variables read is `cafe_otel._config.settings`.
"""

from __future__ import annotations

import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import Sampler
from opentelemetry.sdk.version import __version__ as SDK_VERSION

from cafe.privacy import Scrubber, structure_scrubber
from cafe.trace import Clock, Tracer, fail_soft
from cafe_otel import semconv as sc
from cafe_otel._config import TelemetryConfig, resolve
from cafe_otel._config import variables as v
from cafe_otel._config.capture import CaptureMode
from cafe_otel._config.environment import span_limits
from cafe_otel._config.metrics import MetricSettings
from cafe_otel._config.options import AdvancedOptions, BatchOptions, MetricsOptions
from cafe_otel._config.settings import (
    DEFAULT_SHUTDOWN_TIMEOUT,
    Settings,
    TelemetryConfigError,
    seconds_in_range,
)
from cafe_otel._export.account import TelemetryAccount
from cafe_otel._export.attempts import AttemptLog
from cafe_otel._export.batch import BoundedBatchSpanProcessor
from cafe_otel._export.metrics_export import FailSoftMetricExporter, build_meter_provider
from cafe_otel._export.otlp import build_exporter, export_target
from cafe_otel._export.partial_success import RejectionCounter
from cafe_otel._metrics.aggregation import InProcessMetrics
from cafe_otel._metrics.listener import MetricsListener, our_scope
from cafe_otel._privacy import shapes as sh
from cafe_otel._privacy.logs import redact_records, redactor
from cafe_otel._privacy.metrics import MetricsSanitiser
from cafe_otel._privacy.processor import SpanSanitiser
from cafe_otel._spans.scope import our_version
from cafe_otel._spans.tracer import OTelTracer

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import LoggerProvider

    from cafe_otel._export.logs_export import ContentEventExporter
    from cafe_otel._wire.builder import CallBuilder
    from cafe_otel._wire.observer import GenAIWireObserver

REPLAY_HASH_KEY = b"cafe-otel replay"


def build_resource(settings: Settings, *, replay: bool) -> Resource:
    """Built directly with `Resource(...)`: `Resource.create()` reads os.environ and adds a
    random service.instance.id. A replay gets no random part; a live run gets an instance id."""
    attributes: dict[str, Any] = {
        "telemetry.sdk.language": "python",
        "telemetry.sdk.name": "opentelemetry",
        "telemetry.sdk.version": SDK_VERSION,
        **settings.resource_attributes,
        sc.SERVICE_NAME: settings.service_name,
    }
    if not replay:
        attributes.setdefault(sc.SERVICE_INSTANCE_ID, str(uuid.uuid4()))
    return Resource(attributes)


@dataclass
class TelemetryHandle:
    """What `configure` returns: make tracers, read the account, flush and shut down."""

    provider: TracerProvider | None
    account: TelemetryAccount
    settings: Settings | None = None
    replay: bool = False
    meter_provider: MeterProvider | None = None
    metric_settings: MetricSettings | None = None
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT
    _batch: BoundedBatchSpanProcessor | None = field(default=None, repr=False)
    _sanitiser: SpanSanitiser | None = field(default=None, repr=False)
    _metric_exporter: FailSoftMetricExporter | None = field(default=None, repr=False)
    _metrics: MetricsListener | None = field(default=None, repr=False)
    _in_process: InProcessMetrics | None = field(default=None, repr=False)
    _builder: CallBuilder | None = field(default=None, repr=False)
    # The content event's pipeline (a log record), made only when capture sends content there.
    logger_provider: LoggerProvider | None = field(default=None, repr=False)
    _log_exporter: ContentEventExporter | None = field(default=None, repr=False)
    _builder_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _closed: bool = field(default=False, repr=False)
    is_global: bool = False

    def wire_observer(self, *, wall_clock: Callable[[], int] = time.time_ns) -> GenAIWireObserver | None:
        """An observer for `cafe.wire` that reports every `openai` SDK call through this
        handle: its provider, its metrics, its account, and the API keys the calls carry
        kept out of every exported byte. None when telemetry is disabled.

        Each call's span and metrics are built on the handle's one builder thread
        (`cafe_otel._wire.builder.CallBuilder`), which `force_flush`, `shutdown`, every
        metrics collection and the process's exit drain first."""
        from cafe_otel._spans.scope import otel_tracer_of
        from cafe_otel._wire.observer import GenAIWireObserver

        if self.provider is None:
            return None
        account = self.account
        return GenAIWireObserver(
            otel_tracer_of(self.provider), metrics=self._metrics,
            capture=self.settings.capture if self.settings is not None else CaptureMode.NO_CONTENT,
            wall_clock=wall_clock, on_secret=self.add_secrets, on_error=account.add_listener_error,
            builder=None if self._closed else self._call_builder(),
            event_logger=(self.logger_provider.get_logger(sc.INSTRUMENTATION_NAME, our_version(),
                                                          schema_url=sc.SCHEMA_URL)
                          if self.logger_provider is not None else None))

    def _call_builder(self) -> CallBuilder:
        from cafe_otel._wire.builder import CallBuilder

        with self._builder_lock:
            if self._builder is None:
                self._builder = CallBuilder(exit_timeout=self.shutdown_timeout)
                if self._in_process is not None:
                    self._in_process.before_collect = self._builder.drain
            return self._builder

    @property
    def enabled(self) -> bool:
        return self.provider is not None

    def tracer(self, clock: Clock | None = None, *, origin_unix_nano: int | None = None,
               tree: bool = True) -> Tracer:
        """A fresh tracer for one shift (a tracer holds one shift's tree). `tree=False`:
        spans only, no in-memory tree to render (nothing is built twice). With metrics on,
        the tracer feeds the handle's `MetricsListener` too."""
        if self.provider is None:
            return Tracer(clock=clock, tree=tree)
        tracer = OTelTracer(self.provider, clock=clock, origin_unix_nano=origin_unix_nano,
                            capture_content=self.settings.capture if self.settings else None,
                            account=self.account, tree=tree)
        if self._metrics is not None:
            tracer.add_listener(self._metrics)
        return tracer

    def add_secrets(self, secrets: Iterable[str]) -> None:
        """Values that must never leave in a span or a metric, e.g. `client.secrets()` of the live
        client (the same values a recording is scrubbed of)."""
        secrets = tuple(secrets)
        if self._sanitiser is not None:
            self._sanitiser.add_secrets(secrets)
        if self._metrics is not None:
            self._metrics.add_secrets(secrets)
        if self._metric_exporter is not None:
            self._metric_exporter.add_secrets(secrets)
        if self._log_exporter is not None:
            self._log_exporter.add_secrets(secrets)

    def force_flush(self, timeout: float = DEFAULT_SHUTDOWN_TIMEOUT) -> bool:
        bound = seconds_in_range(timeout, "force_flush timeout", low_inclusive=True)
        if self.provider is None:
            return True
        flushed = True
        if self._builder is not None:  # what is still to build (or waits for a retry) reaches the processors first
            started = time.monotonic()
            flushed = self._builder.drain(bound, expire=True)
            bound = max(bound - (time.monotonic() - started), 0.0)
        flushed = self.provider.force_flush(int(bound * 1000)) and flushed
        if self.meter_provider is not None:
            flushed = self.meter_provider.force_flush(bound * 1000) and flushed
        if self.logger_provider is not None:
            flushed = self.logger_provider.force_flush(int(bound * 1000)) and flushed
        return flushed

    def shutdown(self, timeout: float | None = None) -> float:
        """Flush and shut down within `timeout` seconds (default: configure's
        `shutdown_timeout`); returns the seconds it took. A dead collector costs at most
        the bound (the stock SDK waits 7-30 s)."""
        started = time.monotonic()
        if timeout is not None:
            seconds_in_range(timeout, "shutdown timeout", low_inclusive=True)
        if self.provider is None or self._closed:
            return 0.0
        self._closed = True
        if self._builder is not None:  # every call heard so far reaches the processors below
            self._builder.close(self.shutdown_timeout if timeout is None else timeout)
        metrics = self._shut_metrics_down(timeout)
        logs = self._shut_logs_down()
        if self._batch is not None:
            self._batch.shutdown(timeout=timeout)
        # Everything below is already shut down; this only marks the provider closed.
        self.provider.shutdown()
        if metrics is not None and self._metric_exporter is not None:
            bound = self.shutdown_timeout if timeout is None else timeout
            # The final export ends by the deadline; its outcome must be in the account
            # before anyone reads the report, so wait for it, not only for the shutdown.
            metrics.join(max(started + bound - time.monotonic(), 0.0) + 0.1)
            self._metric_exporter.wait_settled(max(started + bound - time.monotonic(), 0.0) + 0.1)
        if logs is not None:  # each export is bounded by the boundary; the wait by the handle's bound
            bound = self.shutdown_timeout if timeout is None else timeout
            logs.join(max(started + bound - time.monotonic(), 0.0) + 0.1)
        return time.monotonic() - started

    def _shut_logs_down(self) -> threading.Thread | None:
        """Start the logs' shutdown (their last export) beside the spans' own."""
        provider = self.logger_provider
        if provider is None:
            return None
        worker = threading.Thread(target=lambda: fail_soft(provider.shutdown, "logs shutdown"),
                                  name="cafe-otel-logs-shutdown", daemon=True)
        worker.start()
        return worker

    def _shut_metrics_down(self, timeout: float | None) -> threading.Thread | None:
        """Start the metrics shutdown (its final export) beside the spans' own, under the
        same bound: the exporter is given the deadline, so neither waits for the other."""
        if self.meter_provider is None or self._metric_exporter is None:
            return None
        bound = self.shutdown_timeout if timeout is None else timeout
        self._metric_exporter.close_by(time.monotonic() + bound)
        provider = self.meter_provider
        worker = threading.Thread(
            target=lambda: fail_soft(lambda: provider.shutdown(timeout_millis=bound * 1000), "metrics shutdown"),
            name="cafe-otel-metrics-shutdown", daemon=True)
        worker.start()
        return worker


class _MovedArguments(TypedDict, total=False):
    """The flat keywords that moved into a group; each still works, with a DeprecationWarning."""

    export_timeout: float
    max_queue_size: int
    max_export_batch_size: int
    schedule_delay: float
    shutdown_timeout: float
    metric_exporter: MetricExporter
    metric_export_interval: float
    id_generator: IdGenerator
    sampler: Sampler
    resource: Resource
    extra_processors: tuple[SpanProcessor, ...]
    metadata_only: bool
    replay: bool


# Moved keyword -> (its group's keyword, its group's class); `_FIELD` renames the two whose field differs.
MOVED_ARGUMENTS: dict[str, tuple[str, str]] = {
    **{name: ("batch", "BatchOptions") for name in
       ("export_timeout", "max_queue_size", "max_export_batch_size", "schedule_delay", "shutdown_timeout")},
    "metric_exporter": ("metrics", "MetricsOptions"), "metric_export_interval": ("metrics", "MetricsOptions"),
    **{name: ("advanced", "AdvancedOptions") for name in
       ("id_generator", "sampler", "resource", "extra_processors", "metadata_only", "replay")},
}
_FIELD = {"metric_exporter": "exporter", "metric_export_interval": "export_interval"}


def _moved(moved: Mapping[str, Any], batch: BatchOptions | None, metrics: bool | MetricsOptions | None,
           advanced: AdvancedOptions | None) -> tuple[BatchOptions | None, bool | MetricsOptions | None,
                                                      AdvancedOptions | None]:
    """The groups with the moved keywords folded in, each warned about by its new spelling."""
    unknown = sorted(set(moved) - set(MOVED_ARGUMENTS))
    if unknown:
        raise TypeError(f"configure() got an unexpected keyword argument {unknown[0]!r}")
    given: dict[str, dict[str, Any]] = {"batch": {}, "metrics": {}, "advanced": {}}
    for name, value in moved.items():
        keyword, group = MOVED_ARGUMENTS[name]
        spelling = f"{keyword}={group}({_FIELD.get(name, name)}=...)"
        warnings.warn(f"configure({name}=...) is deprecated: use configure({spelling})",
                      DeprecationWarning, stacklevel=3)
        existing = {"batch": batch, "metrics": metrics, "advanced": advanced}[keyword]
        if existing is not None and not isinstance(existing, bool):
            raise TelemetryConfigError(f"{name}: given both as a keyword and in {keyword}={group}(...); "
                                       f"keep {spelling}")
        given[keyword][_FIELD.get(name, name)] = value
    return (BatchOptions(**given["batch"]) if given["batch"] else batch,
            MetricsOptions(**given["metrics"], enabled=metrics if isinstance(metrics, bool) else None)
            if given["metrics"] else metrics,
            AdvancedOptions(**given["advanced"]) if given["advanced"] else advanced)


def configure(
    service_name: str | None = None,
    *,
    endpoint: str | None = None,
    protocol: str | None = None,
    headers: Mapping[str, str] | None = None,
    capture_content: CaptureMode | str | bool | None = None,
    environ: Mapping[str, str] | None = None,
    secrets: Iterable[str] = (),
    set_global: bool = True,
    shapes: Mapping[str, sh.Shape] | None = None,
    exporter: SpanExporter | None = None,
    metrics: bool | MetricsOptions | None = None,
    batch: BatchOptions | None = None,
    advanced: AdvancedOptions | None = None,
    **moved: Unpack[_MovedArguments],
) -> TelemetryHandle:
    """Build the providers and their chains from `cafe_otel._config.resolve(environ, ...)`:
    every argument given wins over the `OTEL_*` variables of `environ` (os.environ at call
    time), which win over the defaults.

    `OTEL_SDK_DISABLED=true` gives a no-op handle whose tracer is a plain cafe `Tracer` and
    whose shutdown returns at once. `secrets` (a live client's `secrets()`) never leave:
    captured content is scrubbed of them as a recording is, and a metadata value holding one
    is withheld. `exporter` replaces the spans' OTLP exporter. `metrics`: False for none, True for
    the MeterProvider, `MetricsOptions(exporter=, export_interval=, enabled=)` for its parts;
    undecided, it is on unless `OTEL_METRICS_EXPORTER=none` or `exporter` is given without a
    metric exporter.
    `batch=BatchOptions(...)` bounds the batch processor and the exports;
    `advanced=AdvancedOptions(...)` replaces the id generator, sampler or resource, adds
    processors, or makes a replay's output deterministic. `set_global` makes the providers the
    global ones when none is set yet; `shapes` adds the caller's own keys to the shape table
    (`cafe_otel.Shape`). The keywords that moved into a group still work, with a
    DeprecationWarning naming the group."""
    if moved:
        batch, metrics, advanced = _moved(moved, batch, metrics, advanced)
    config = resolve(environ, service_name=service_name, endpoint=endpoint, protocol=protocol, headers=headers,
                     capture_content=capture_content, exporter=exporter, metrics=metrics, batch=batch,
                     advanced=advanced, secrets=secrets, set_global=set_global, shapes=shapes)
    return build(config)


def build(config: TelemetryConfig) -> TelemetryHandle:
    """The providers, their chains and the handle, from `config` alone."""
    settings, limits, advanced = config.settings, config.batch, config.advanced
    account = TelemetryAccount()
    secrets = config.secrets  # read by the span sanitiser and the metrics listener both
    if settings.disabled or config.sampler is None or config.span_limits is None:
        return TelemetryHandle(provider=None, account=account, settings=settings, replay=advanced.replay)
    # What the SDK, its exporters and gRPC log from now on is redacted as it is made.
    redact_records(redactor(settings, config.metrics))
    exporter = config.exporter
    rejections = RejectionCounter("traces", on_unreadable=account.note_error) if exporter is None else None
    if config.console:
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        exporter, rejections = ConsoleSpanExporter(), None
    attempts = AttemptLog() if exporter is None else None
    inner = exporter if exporter is not None else build_exporter(
        "traces", settings.traces, rejections=rejections, attempts=attempts)
    target = export_target(settings.traces) if exporter is None else type(exporter).__name__
    own_shapes = dict(config.shapes)
    shapes = {**sh.SHAPES, **own_shapes}
    # Content capture is an explicit opt-in, so its keys may pass; nothing else unlisted does.
    metadata = sc.METADATA_ALLOWLIST | frozenset(own_shapes)
    allowlist = metadata | (sc.CONTENT_ATTRIBUTES if settings.capture.enabled else frozenset())
    # The patterns a recording is scrubbed with: content is scrubbed with them, and no
    # exported value (span, scope, resource, metric point) may hold what they find.
    patterns = Scrubber(extra_patterns=list(config.scrub_patterns)) if config.scrub_patterns else structure_scrubber()
    # A replay's bytes must not depend on a random key (golden files).
    hash_key = REPLAY_HASH_KEY if advanced.replay else None
    sanitiser = None
    if advanced.metadata_only:
        sanitiser = SpanSanitiser(
            allowlist, shapes=shapes, account=account, secrets=secrets,
            content_scrubber=patterns if settings.capture.enabled else None,
            hash_key=hash_key, secret_patterns=patterns)
    batch = BoundedBatchSpanProcessor(
        inner, account=account, target=target, export_timeout=settings.export_timeout,
        max_queue_size=limits.max_queue_size, max_export_batch_size=limits.max_export_batch_size,
        schedule_delay=limits.schedule_delay, shutdown_timeout=limits.shutdown_timeout,
        rejected=rejections.take if rejections is not None else None,
        refused=rejections.take_refusal if rejections is not None else None,
        # On the worker, before the exporter encodes anything (see `cafe_otel._export.batch`).
        prepare=sanitiser,
        attempts=attempts,
    )
    resource = advanced.resource if advanced.resource is not None else build_resource(settings,
                                                                                       replay=advanced.replay)
    metric_settings, metric_exporter = config.metrics, config.metric_exporter
    meter_provider = failsoft_metrics = ours = None
    if metric_settings is not None:
        point_rejections = (RejectionCounter("metrics", on_unreadable=account.note_error)
                            if metric_exporter is None else None)
        point_attempts = AttemptLog() if metric_exporter is None else None
        inner_metrics = (metric_exporter if metric_exporter is not None else build_exporter(
            "metrics", metric_settings.exporter, timeout=metric_settings.export_timeout,
            preferred_temporality=metric_settings.preferred_temporality(),
            preferred_aggregation=metric_settings.preferred_aggregation(),
            rejections=point_rejections, attempts=point_attempts))
        ours = InProcessMetrics(our_scope())
        meter_provider, failsoft_metrics = build_meter_provider(
            metric_settings, resource=resource, account=account, inner=inner_metrics,
            explicit_exporter=metric_exporter is not None, ours=ours,
            rejected=point_rejections.take if point_rejections is not None else None,
            refused=point_rejections.take_refusal if point_rejections is not None else None,
            attempts=point_attempts,
            # Anyone's instruments on the provider: the spans' allowlist and shapes (no content).
            sanitiser=MetricsSanitiser(metadata | sc.METRIC_ATTRIBUTES, shapes=shapes, account=account, secrets=secrets,
                                       secret_patterns=patterns, hash_key=hash_key))
    provider = TracerProvider(
        resource=resource,
        id_generator=advanced.id_generator,
        sampler=config.sampler,
        span_limits=span_limits(config.span_limits),  # every one explicit: the SDK reads none itself
        # Our handle's shutdown is the bounded one; at exit the provider's hook finds
        # everything already closed, or closes it within the batch processor's bound.
        shutdown_on_exit=True,
        # Explicit, so that no tracer asks the global one (which OTEL_PYTHON_METER_PROVIDER
        # would have the API load, and fail on): its own metrics, when the SDK is told to keep
        # them, go where ours go.
        meter_provider=meter_provider if meter_provider is not None else NoOpMeterProvider(),
    )
    for processor in advanced.extra_processors:
        provider.add_span_processor(processor)
    provider.add_span_processor(batch)
    handle = TelemetryHandle(provider=provider, account=account, settings=settings, replay=advanced.replay,
                             shutdown_timeout=limits.shutdown_timeout, _batch=batch, _sanitiser=sanitiser)
    # A caller who hands in the span exporter (or asks for the console) has chosen where
    # telemetry goes: the content event then needs its own exporter, as metrics do.
    events_chosen = advanced.log_exporter is not None or (config.exporter is None and not config.console)
    if settings.capture.on_event and not events_chosen:
        account.note_error(f"content capture {settings.capture.value}: no content event is emitted (exporter= "
                           "was given without AdvancedOptions(log_exporter=...))")
    if settings.capture.on_event and events_chosen:
        handle.logger_provider, handle._log_exporter = _logs_pipeline(
            settings, advanced, account=account, resource=resource, schedule_delay=limits.schedule_delay,
            sanitiser=SpanSanitiser(
                metadata | sc.CONTENT_ATTRIBUTES, shapes=shapes, account=account, secrets=secrets,
                content_scrubber=patterns, hash_key=hash_key, secret_patterns=patterns)
            if advanced.metadata_only else None)
    if metric_settings is not None and ours is not None:
        handle.metric_settings = metric_settings
        handle.meter_provider, handle._metric_exporter = meter_provider, failsoft_metrics
        handle._metrics = MetricsListener(ours, account=account, secrets=secrets, secret_patterns=patterns)
        handle._in_process = ours
        account.enable_metrics()
    if config.set_global:
        _make_global(handle)
        if not handle.is_global:
            _say_local(handle)
    return handle


def _say_local(handle: TelemetryHandle) -> None:
    """A handle that asked to be the global one and could not be: what it is instead, said as
    a warning (where the caller is), with how a zero-code process declares its shapes. Not in
    the account: the handle's own spans are counted there as always."""
    by = ("an earlier configure() (under opentelemetry-instrument, its configurator's)" if global_handle() is not None
          else "another TracerProvider")
    text = (f"configure(): the global providers were already set by {by}; this handle is local: only what "
            "reports through it (handle.tracer(), instrument(telemetry=handle)) uses its settings and shapes, "
            f"and instrumented libraries report through the global ones (zero-code: declare shapes with "
            f"{v.OTEL_PYTHON_CAFE_SHAPES}=package.module:TABLE)")
    warnings.warn(text, RuntimeWarning, stacklevel=4)  # at the caller of configure()


def _logs_pipeline(
    settings: Settings, advanced: AdvancedOptions, *, account: TelemetryAccount, resource: Resource,
    schedule_delay: float, sanitiser: SpanSanitiser | None,
) -> tuple[LoggerProvider, ContentEventExporter]:
    """The content event's LoggerProvider: into `advanced.log_exporter`, else the OTLP logs
    exporter the settings resolved, behind the boundary and the checks the spans pass."""
    from cafe_otel._export.logs_export import ContentEventExporter, build_logger_provider

    inner = advanced.log_exporter
    rejections = attempts = None
    if inner is not None:
        target = type(inner).__name__
    else:
        assert settings.logs is not None  # resolved with the capture that sends content to the event
        rejections = RejectionCounter("logs", on_unreadable=account.note_error)
        attempts = AttemptLog()
        inner = build_exporter("logs", settings.logs, rejections=rejections, attempts=attempts)
        target = export_target(settings.logs)
    timeout = settings.logs.timeout if settings.logs is not None else settings.export_timeout
    exporter = ContentEventExporter(
        inner, account=account, target=target, export_timeout=timeout, sanitiser=sanitiser,
        rejected=rejections.take if rejections is not None else None,
        refused=rejections.take_refusal if rejections is not None else None, attempts=attempts)
    return build_logger_provider(exporter, resource=resource, schedule_delay=schedule_delay), exporter


_GLOBAL: list[TelemetryHandle] = []  # the handle whose providers are the global ones


def _make_global(handle: TelemetryHandle) -> None:
    """The handle's providers as the global ones, when none is set yet: the API allows one
    a process, and overriding one would log a warning and change nothing."""
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import trace
    from opentelemetry.metrics import _internal as metrics_state

    with _GLOBAL_LOCK:
        # Whether one is set is read from the API's own state: `get_tracer_provider()` would,
        # with OTEL_PYTHON_TRACER_PROVIDER set, load and set that one first (or fail to).
        if handle.provider is None or trace._TRACER_PROVIDER is not None:
            return
        trace.set_tracer_provider(handle.provider)
        if handle.meter_provider is not None and metrics_state._METER_PROVIDER is None:
            otel_metrics.set_meter_provider(handle.meter_provider)
        handle.is_global = True
        _GLOBAL[:] = [handle]


_GLOBAL_LOCK = threading.Lock()


def global_handle() -> TelemetryHandle | None:
    """The handle whose providers `configure()` made the global ones, if any."""
    return _GLOBAL[0] if _GLOBAL else None
