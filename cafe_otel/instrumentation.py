"""GenAI telemetry for any agent that calls a model over the wire, with no code change.

`OpenAIWireInstrumentor` installs one observer (`cafe_otel._wire.observer.GenAIWireObserver`)
on the wire seam (`cafe.wire`): the same interception recording and replay use, so the three
stack. The observer reads the wire, never the SDK's Python types: the request's JSON body,
the response head, and the body as the caller reads it (a JSON document, or server-sent
events for a streamed call), each through the reading of its API (`cafe.apis`). Each call
becomes one `{operation} {model}` CLIENT span on the pinned 1.41.1 schema URL, and the GenAI
client metrics (duration and token usage; time to first chunk and time per output chunk for
a streamed call).

One span per HTTP attempt: a call the SDK retries shows each attempt, each with its own
`error.type`. The span ends exactly once however the call ends (read to its end, closed
early, dropped to the garbage collector unclosed, or failed), because the seam promises one
`end` per call.

`error.type` names the failure's kind: the HTTP status for an answer of 400 or more
(`429`, `500`), the qualified exception class for a transport failure
(`httpx2.ReadTimeout`, `httpx2.ConnectError`, `asyncio.exceptions.CancelledError`).

What runs where: on the calling thread, only what must happen there (the parent context
read when the request is sent, the API key noted so that it never leaves, the wall clock,
references to the request, the response head and each piece of the body with its time, and
the outcome). The span and the metrics are built from those once the call has ended: under
a `configure()` handle, on the handle's one builder thread (`CallBuilder`), drained by
`force_flush`, `shutdown`, every metrics collection and the process's exit; under any other
provider, and for a call made under an agent span (which adds up its calls' totals before
it ends), on the thread that ended the call, before it goes on.

The observer never fails a call: anything it raises is caught and counted in the account
(as a listener error) when it has one.

`opentelemetry-instrument python agent.py` loads this module's `CafeDistro` and
`CafeConfigurator` (entry points in pyproject.toml): `configure()` from the `OTEL_*`
variables, set as the global providers, shut down within its bound at exit, with the
account's line on stderr. The instrumentor is the `cafe_openai` instrumentor entry point.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import metrics as otel_metrics
from opentelemetry import trace
from opentelemetry.instrumentation.distro import BaseDistro  # type: ignore[attr-defined]
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

# First of ours: the SDK imported through the guard against a span limit it refuses on import.
import cafe_otel._config.sdk_import  # noqa: F401
from cafe_otel import semconv as sc
from cafe_otel._metrics.listener import MetricsListener
from cafe_otel._spans.content import CaptureMode, capture_mode
from cafe_otel._spans.scope import our_version
from cafe_otel._wire.observer import GenAIWireObserver, WallClock

if TYPE_CHECKING:
    from cafe.wire import WireLayer
    from cafe_otel._configure import TelemetryHandle
    from cafe_otel._privacy.logs import ExporterLogCapture

def observer_for(handle: TelemetryHandle | None = None, *,
                 tracer_provider: trace.TracerProvider | None = None,
                 meter_provider: otel_metrics.MeterProvider | None = None,
                 capture_content: CaptureMode | str | bool | None = None,
                 environ: Mapping[str, str] | None = None,
                 wall_clock: WallClock = time.time_ns) -> GenAIWireObserver | None:
    """The observer that reports through `handle` (its provider, metrics, account and
    secrets), or through the given or global providers when there is no handle. None when
    the handle is disabled (`OTEL_SDK_DISABLED=true`)."""
    if handle is not None:
        return handle.wire_observer(wall_clock=wall_clock)
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    tracer = provider.get_tracer(sc.INSTRUMENTATION_NAME, our_version(), schema_url=sc.SCHEMA_URL)
    meters = meter_provider if meter_provider is not None else otel_metrics.get_meter_provider()
    return GenAIWireObserver(tracer, metrics=MetricsListener(meters), capture=capture_mode(capture_content, environ),
                             wall_clock=wall_clock)


class OpenAIWireInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Instruments every `openai` SDK call in the process, sync, async and streamed, on the
    wire seam. `instrument()` takes the usual `tracer_provider` and `meter_provider`, or
    `telemetry=` a `cafe_otel.configure()` handle; with none, the handle that set the global
    providers, else the global providers themselves."""

    _layer: WireLayer | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("openai >= 1.40",)

    def _instrument(self, **kwargs: Any) -> None:
        import cafe.wire as wire
        from cafe_otel._configure import global_handle

        handle: TelemetryHandle | None = kwargs.get("telemetry")
        if handle is None and kwargs.get("tracer_provider") is None:
            handle = global_handle()
        observer = observer_for(handle, tracer_provider=kwargs.get("tracer_provider"),
                                meter_provider=kwargs.get("meter_provider"),
                                capture_content=kwargs.get("capture_content"))
        if observer is not None:
            self._layer = wire.install(wire.WireLayer((observer,)))

    def _uninstrument(self, **kwargs: Any) -> None:
        import cafe.wire as wire

        if self._layer is not None:
            wire.uninstall(self._layer)
            self._layer = None


# --- zero-code: `opentelemetry-instrument python agent.py` ---------------------------------
# What `opentelemetry-instrument` (`opentelemetry.instrumentation.auto_instrumentation`) runs,
# in this order: our distro's `configure`, then the configurator named by
# OTEL_PYTHON_CONFIGURATOR (any one when unset: ours), then each instrumentor through the
# distro. Its one line on stderr is ours: the exporters', the SDK's and gRPC's log records are
# held from the distro on (redacted as they are made; the last failure's kind joins the line;
# `CAFE_DEBUG=1` shows each), and any failure to configure is "telemetry is off".
CONFIGURATOR_NAME = "cafe_otel"  # our `opentelemetry_configurator` entry point
_PREFIX = "cafe-otel"


class _ZeroCode:
    """One process's zero-code state: the handle, or why telemetry is off, and the held logs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.handle: TelemetryHandle | None = None
        self.off = False  # telemetry is off (its line was printed): nothing to instrument
        self.logs: ExporterLogCapture | None = None  # holding the loggers' records

    def hold_logs(self, *, debug: bool) -> None:
        if self.logs is not None:
            return
        from cafe_otel._privacy.logs import ExporterLogCapture, redact_records

        self.logs = ExporterLogCapture(redact_records(), debug=debug, propagate=True,
                                       prefix=f"{_PREFIX}: debug").__enter__()

    def telemetry_off(self, why: str) -> None:
        from cafe_otel._privacy.logs import redact_records

        self.off = True
        print(f"{_PREFIX}: telemetry is off: {redact_records()(why)}", file=sys.stderr)


_ZERO_CODE = _ZeroCode()


def auto_configure(environ: Mapping[str, str] | None = None) -> TelemetryHandle | None:
    """What the configurator does, once a process: `configure()` from the `OTEL_*` variables
    as the global providers, its bounded shutdown and the account's line at exit. Any failure
    to configure (a setting's named error, or whatever the SDK raised) is one line on stderr
    and no telemetry: the program still runs."""
    from cafe_otel._config import resolve_launcher
    from cafe_otel._config.settings import TelemetryConfigError
    from cafe_otel._configure import configure

    state = _ZERO_CODE
    with state.lock:
        if state.handle is not None or state.off:
            return state.handle
        state.hold_logs(debug=resolve_launcher(environ).debug)
        try:
            handle = configure(environ=environ)
        except TelemetryConfigError as error:
            state.telemetry_off(str(error))
            return None
        except Exception as error:  # the SDK's own, whatever it is: its text may quote a value
            state.telemetry_off(f"the OpenTelemetry SDK could not be configured ({type(error).__name__})")
            return None
        state.handle = handle
        atexit.register(_at_exit, handle)
        return handle


def _at_exit(handle: TelemetryHandle) -> None:
    from cafe_otel._privacy.logs import redact_records, report_line

    try:
        handle.shutdown()
    except Exception as error:  # the report is still printed: shutting down is bounded, not guaranteed
        handle.account.note_error(f"shutdown raised {type(error).__name__}")
    if handle.enabled:
        print(report_line(f"{_PREFIX}: telemetry: {handle.account.summary()}", _ZERO_CODE.logs,
                          dropped=bool(handle.account.dropped), redact=redact_records()), file=sys.stderr)


def _installed_configurators() -> list[str]:
    from importlib.metadata import entry_points

    return sorted({entry.name for entry in entry_points(group="opentelemetry_configurator")})


class CafeConfigurator:
    """The `opentelemetry_configurator` entry point `cafe_otel`: see `auto_configure`."""

    def configure(self, **kwargs: Any) -> None:
        auto_configure()


class CafeDistro(BaseDistro):  # type: ignore[misc]
    """The `opentelemetry_distro` entry point `cafe_otel`: it holds the loggers' records from
    the start, says when OTEL_PYTHON_CONFIGURATOR keeps every configurator (ours included)
    from loading, and hands our instrumentor the handle the configurator built (our pipeline,
    not only the global provider)."""

    def _configure(self, **kwargs: Any) -> None:
        from cafe_otel._config import resolve_launcher
        from cafe_otel._config.variables import OTEL_PYTHON_CONFIGURATOR

        launcher = resolve_launcher()
        chosen = launcher.configurator
        if chosen is not None and chosen != CONFIGURATOR_NAME:
            installed = _installed_configurators()
            if chosen in installed:
                return None  # another configurator, chosen on purpose: its pipeline, its output
            _ZERO_CODE.hold_logs(debug=launcher.debug)  # the loader's own warning, quoting the value
            with _ZERO_CODE.lock:
                what = ("is empty, and opentelemetry-instrument then loads no configurator" if not chosen.strip()
                        else f"names no installed configurator (the value is not shown; installed: "
                             f"{', '.join(installed) or 'none'})")
                _ZERO_CODE.telemetry_off(f"{OTEL_PYTHON_CONFIGURATOR} {what}; unset it, or set it to "
                                         f"{CONFIGURATOR_NAME}")
            return None
        _ZERO_CODE.hold_logs(debug=launcher.debug)
        return None

    def load_instrumentor(self, entry_point: Any, **kwargs: Any) -> None:
        instrumentor = entry_point.load()
        if isinstance(instrumentor, type) and issubclass(instrumentor, OpenAIWireInstrumentor):
            if _ZERO_CODE.off:
                return None  # telemetry is off: nothing to report through
            handle = _ZERO_CODE.handle
            if handle is not None:
                kwargs["telemetry"] = handle
        instrumentor().instrument(**kwargs)
