"""OTEL_TRACES_SAMPLER and its argument: the specification's samplers built from the
environment configure() is handed, a shift kept or left out whole, metrics unsampled."""

from __future__ import annotations

import io
from collections import Counter

import pytest
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, TraceIdRatioBased

from cafe.cli import main
from cafe_otel import AdvancedOptions, BatchOptions, MetricsOptions, TelemetryConfigError, configure
from cafe_otel._cli.plugin import plugin
from cafe_otel._config.sampling import SAMPLERS, sampler_from

from .conftest import closed_port, seed_shift


@pytest.mark.parametrize(("environ", "description"), [
    ({}, "ParentBased{root:AlwaysOnSampler,"),
    ({"OTEL_TRACES_SAMPLER": " Always_On "}, "AlwaysOnSampler"),
    ({"OTEL_TRACES_SAMPLER": "always_off"}, "AlwaysOffSampler"),
    ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}, "TraceIdRatioBased{0.25}"),
    ({"OTEL_TRACES_SAMPLER": "traceidratio"}, "TraceIdRatioBased{1.0}"),
    ({"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"},
     "ParentBased{root:TraceIdRatioBased{0.0},"),
    ({"OTEL_TRACES_SAMPLER": "parentbased_always_off"}, "ParentBased{root:AlwaysOffSampler,"),
])
def test_each_sampler_the_specification_names_is_built(environ: dict[str, str], description: str) -> None:
    assert sampler_from(environ).get_description().startswith(description)


@pytest.mark.parametrize(("environ", "message"), [
    ({"OTEL_TRACES_SAMPLER": "jaeger_remote"}, "OTEL_TRACES_SAMPLER: 'jaeger_remote' is not one cafe builds ("),
    ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "half"},
     "OTEL_TRACES_SAMPLER_ARG: expected a ratio from 0 to 1 in ASCII digits (the value given is not shown)"),
    ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"}, "expected a ratio"),
    ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "nan"}, "expected a ratio"),
])
def test_a_sampler_not_built_or_a_bad_ratio_is_a_named_error(environ: dict[str, str], message: str) -> None:
    with pytest.raises(TelemetryConfigError) as caught:
        configure(exporter=InMemorySpanExporter(), environ=environ)
    assert message in str(caught.value)


def test_the_error_lists_only_samplers_that_are_built() -> None:
    with pytest.raises(TelemetryConfigError) as caught:
        sampler_from({"OTEL_TRACES_SAMPLER": "xray"})
    for name in SAMPLERS:
        sampler_from({"OTEL_TRACES_SAMPLER": name})  # each one named works
        assert name in str(caught.value)


def _shifts(environ: dict[str, str], count: int, **options: object) -> tuple[InMemorySpanExporter, object]:
    sink = InMemorySpanExporter()
    handle = configure(exporter=sink, environ=environ, **options, batch=BatchOptions(schedule_delay=0.05))  # type: ignore[arg-type]
    for _ in range(count):
        seed_shift(handle.tracer())
    assert handle.force_flush(5.0)
    account = handle.account.snapshot()
    handle.shutdown(2.0)
    return sink, account


def test_always_off_exports_nothing_and_the_shift_runs_as_ever() -> None:
    sink, account = _shifts({"OTEL_TRACES_SAMPLER": "always_off"}, 2)
    assert sink.get_finished_spans() == ()
    assert account.exported == 0 and account.dropped == 0  # nothing sampled is nothing lost


def test_a_ratio_keeps_or_leaves_out_each_shift_whole() -> None:
    everything, _ = _shifts({}, 1)
    per_shift = len(everything.get_finished_spans())
    sink, account = _shifts({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5"}, 40)
    spans_per_trace = Counter(span.context.trace_id for span in sink.get_finished_spans())
    assert set(spans_per_trace.values()) == {per_shift}  # no shift cut in part
    assert 5 <= len(spans_per_trace) <= 35  # about half of 40 kept (a bound a fair coin meets)
    assert account.exported == sum(spans_per_trace.values())


def test_an_explicit_sampler_wins_over_the_environment() -> None:
    sink, _ = _shifts({"OTEL_TRACES_SAMPLER": "always_on"}, 1, advanced=AdvancedOptions(sampler=ALWAYS_OFF))
    assert sink.get_finished_spans() == ()
    sink, _ = _shifts({"OTEL_TRACES_SAMPLER": "always_off"}, 1,
                      advanced=AdvancedOptions(sampler=TraceIdRatioBased(1.0)))
    assert sink.get_finished_spans()


def test_metrics_count_every_call_whatever_the_sampler() -> None:
    kept: list[MetricsData] = []

    class Keeping(MetricExporter):
        def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
                   **kwargs: object) -> MetricExportResult:
            kept.append(metrics_data)
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: object) -> None:
            return None

    sink = InMemorySpanExporter()
    handle = configure(exporter=sink, environ={"OTEL_TRACES_SAMPLER": "always_off"},
                       metrics=MetricsOptions(exporter=Keeping()))
    run = seed_shift(handle.tracer())
    handle.shutdown(2.0)
    assert sink.get_finished_spans() == ()
    durations = [point.count for data in kept for resource in data.resource_metrics
                 for scope in resource.scope_metrics for metric in scope.metrics
                 if metric.name == "gen_ai.client.operation.duration" for point in metric.data.data_points]
    assert sum(durations) == run.model_calls > 0


def test_the_cli_names_only_traces_it_sent() -> None:
    from tests.otel.test_cli_plugin import Receiver

    receiver = Receiver()
    receiver.thread.start()

    def notes(sampler: str) -> list[str]:
        out, err = io.StringIO(), io.StringIO()
        # A receiver that stores them: a trace note names only spans delivered.
        code = main(["shift", "--seed", "1", "--otlp-protocol", "http/protobuf", f"--otlp={receiver.url}"],
                    environ={"OTEL_TRACES_SAMPLER": sampler, "OTEL_METRICS_EXPORTER": "none"},
                    out=out, err=err, load_plugins=lambda warn: [plugin])
        assert code == 0, err.getvalue()
        return [line for line in (out.getvalue() + err.getvalue()).splitlines() if line.startswith("trace: ")]

    try:
        assert len(notes("always_on")) == 1
        assert notes("always_off") == []  # a trace left out is on no backend: no id to look up
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


def test_a_sampler_cafe_does_not_build_stops_the_cli_with_its_exit_code() -> None:
    err = io.StringIO()
    code = main(["shift", "--seed", "1", f"--otlp=http://127.0.0.1:{closed_port()}"],
                environ={"OTEL_TRACES_SAMPLER": "xray"}, out=io.StringIO(), err=err,
                load_plugins=lambda warn: [plugin])
    assert code == 20 and err.getvalue().startswith("cafe: error: OTEL_TRACES_SAMPLER: 'xray' is not one cafe builds")
