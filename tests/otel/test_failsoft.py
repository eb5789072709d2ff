"""Acceptance: a broken exporter or a dead collector costs the shift nothing, shutdown
returns within its bound, and the account says what was lost and why."""

from __future__ import annotations

import os
import threading
import time

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cafe_otel import BatchOptions, BoundedBatchSpanProcessor, FailSoftSpanExporter, TelemetryAccount, configure
from cafe_otel._export.failsoft import GRACE_SECONDS, ExportRunner
from tests.timing import SCHEDULING_SLACK

from .conftest import closed_port
from .shift import seed_shift

SHIFT_SPANS = 17  # the seed shift: invoke_agent, setup, 5 turns, 5 chats, 4 tools, wrapup
SECRET = "CANARY-in-the-error-message"


class RaisingExporter(SpanExporter):
    def export(self, spans):
        raise RuntimeError(SECRET)

    def shutdown(self):
        raise RuntimeError(SECRET)


class HangingExporter(SpanExporter):
    """Blocks in export (and shutdown) until released; counts the calls it got."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def export(self, spans):
        self.calls += 1
        self.release.wait(30)
        return SpanExportResult.SUCCESS

    def shutdown(self):
        self.release.wait(30)


def _shift_then_shutdown(handle, bound: float) -> tuple[str, float, float]:
    started = time.monotonic()
    run = seed_shift(handle.tracer())
    shift_seconds = time.monotonic() - started
    started = time.monotonic()
    handle.shutdown(bound)
    return run.stop_reason, shift_seconds, time.monotonic() - started


def test_an_exporter_that_raises():
    handle = configure(exporter=RaisingExporter(), environ={}, batch=BatchOptions(export_timeout=1.0))
    stop_reason, _shift_seconds, shutdown_seconds = _shift_then_shutdown(handle, 2.0)
    assert stop_reason == "answered"
    assert shutdown_seconds < 2.0 + SCHEDULING_SLACK
    account = handle.account
    assert (account.exported, account.dropped, account.dropped_export_failed) == (0, SHIFT_SPANS, SHIFT_SPANS)
    assert "exporter raised RuntimeError" in account.last_error
    assert SECRET not in account.last_error and SECRET not in account.summary()
    assert f"0 spans exported, {SHIFT_SPANS} dropped" in account.summary()


def test_an_exporter_that_hangs():
    hanging = HangingExporter()
    try:
        handle = configure(exporter=hanging, environ={}, batch=BatchOptions(export_timeout=0.5, schedule_delay=0.05))
        stop_reason, shift_seconds, shutdown_seconds = _shift_then_shutdown(handle, 1.5)
        assert stop_reason == "answered"
        assert shift_seconds < SCHEDULING_SLACK  # the shift never waits on the exporter (it hangs 30 s)
        assert shutdown_seconds < 1.5 + SCHEDULING_SLACK
        account = handle.account
        assert account.exported == 0
        assert account.dropped == SHIFT_SPANS
        assert "no answer within 0.5s" in account.last_error or "in flight" in account.last_error
        assert hanging.calls == 1  # hung once: later batches were dropped, not piled up
    finally:
        hanging.release.set()


def test_a_hung_export_does_not_pile_up_threads():
    hanging = HangingExporter()
    exporter = FailSoftSpanExporter(hanging, export_timeout=0.2, grace=0.0)
    try:
        results = [exporter.export([object()] * 3) for _ in range(5)]  # type: ignore[list-item]
        assert results == [SpanExportResult.FAILURE] * 5
        assert hanging.calls == 1
        assert exporter.last_outcome.error_type == "busy"
        started = time.monotonic()
        exporter.shutdown(timeout=0.3)
        assert time.monotonic() - started < 0.3 + SCHEDULING_SLACK
    finally:
        hanging.release.set()


class SlowExporter(SpanExporter):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def export(self, spans):
        time.sleep(self.seconds)
        return SpanExportResult.SUCCESS


def _spans_through(processor, count: int) -> None:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    for number in range(count):
        tracer.start_span(f"span {number}").end()


def test_a_late_answer_is_not_counted_twice():
    account = TelemetryAccount()
    batch = BoundedBatchSpanProcessor(SlowExporter(0.1 + GRACE_SECONDS + 0.3), account=account,
                                      export_timeout=0.1, schedule_delay=0.01)
    _spans_through(batch, 2)
    assert batch.force_flush(2000) is True  # the worker gave up on the export and moved on
    assert (account.exported, account.dropped) == (0, 2)
    time.sleep(0.5)  # the slow export answers SUCCESS now, after it was counted as lost
    assert (account.exported, account.dropped) == (0, 2)
    batch.shutdown(1.0)


def test_an_answer_at_the_inner_exporters_own_deadline_counts_as_exported():
    """The inner exporter gets the same timeout and starts its clock a little later: an
    export it completes right at that deadline was accepted and must not count as lost."""
    account = TelemetryAccount()
    batch = BoundedBatchSpanProcessor(SlowExporter(0.1 + GRACE_SECONDS / 2), account=account,
                                      export_timeout=0.1, schedule_delay=0.01)
    _spans_through(batch, 2)
    batch.shutdown(2.0)
    assert (account.exported, account.dropped) == (2, 0)


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_an_otlp_endpoint_on_a_closed_port(protocol):
    port = closed_port()
    endpoint = f"http://127.0.0.1:{port}"
    handle = configure(endpoint=endpoint, protocol=protocol, environ={},
                       batch=BatchOptions(export_timeout=1.0, schedule_delay=0.05))
    stop_reason, shift_seconds, shutdown_seconds = _shift_then_shutdown(handle, 3.0)
    assert stop_reason == "answered"
    assert shift_seconds < 1.0  # one export's bound: the shift waits on none (a shift takes ~30 ms)
    assert shutdown_seconds < 3.0 + SCHEDULING_SLACK
    account = handle.account
    assert account.exported == 0
    assert account.dropped == SHIFT_SPANS
    assert f"127.0.0.1:{port}" in account.last_error
    assert protocol in account.last_error
    assert f"{SHIFT_SPANS} dropped" in account.summary()


def test_a_full_queue_drops_and_counts():
    sink = InMemorySpanExporter()
    account = TelemetryAccount()
    batch = BoundedBatchSpanProcessor(sink, account=account,
                                      max_queue_size=4, max_export_batch_size=100, schedule_delay=60)
    provider = TracerProvider()
    provider.add_span_processor(batch)
    run = seed_shift(__import__("cafe_otel").OTelTracer(provider, account=account))
    assert run.stop_reason == "answered"
    assert account.dropped_queue_full == SHIFT_SPANS - 4
    batch.shutdown(timeout=2.0)
    assert len(sink.get_finished_spans()) == 4
    assert account.exported == 4
    assert "queue full" in account.summary()


def test_force_flush_returns_within_its_bound_while_an_export_hangs():
    hanging = HangingExporter()
    try:
        handle = configure(exporter=hanging, environ={}, batch=BatchOptions(export_timeout=5.0, schedule_delay=0.01))
        seed_shift(handle.tracer())
        started = time.monotonic()
        assert handle.force_flush(0.3) is False
        assert time.monotonic() - started < 0.3 + SCHEDULING_SLACK
        started = time.monotonic()
        handle.shutdown(0.5)
        assert time.monotonic() - started < 0.5 + SCHEDULING_SLACK
        # The hung export never answered: neither delivered nor lost.
        assert (handle.account.unconfirmed, handle.account.dropped, handle.account.exported) == (SHIFT_SPANS, 0, 0)
    finally:
        hanging.release.set()


def test_shutdown_twice_and_spans_after_shutdown_are_counted():
    handle = configure(exporter=InMemorySpanExporter(), environ={})
    seed_shift(handle.tracer())
    handle.shutdown(2.0)
    assert handle.account.exported == SHIFT_SPANS
    assert handle.shutdown(2.0) == 0.0


@pytest.mark.parametrize("configured", [0.2, 1.2])
def test_shutdown_without_an_argument_keeps_the_configured_bound(configured):
    hanging = HangingExporter()
    try:
        # A long schedule delay: the shift's spans are all queued when shutdown exports them in
        # one batch, however late a busy machine schedules the worker.
        handle = configure(exporter=hanging, environ={},
                           batch=BatchOptions(export_timeout=5.0, schedule_delay=30.0, shutdown_timeout=configured))
        seed_shift(handle.tracer())
        took = handle.shutdown()
        assert configured - 0.05 <= took < configured + SCHEDULING_SLACK  # the export hangs 30 s
        assert handle.account.unconfirmed == SHIFT_SPANS  # the hung export never answered
    finally:
        hanging.release.set()


# One lasting runner thread takes the exports (`cafe_otel._export.failsoft.ExportRunner`).

class ThreadRecording(SpanExporter):
    """Notes the thread that runs each export; the first `hang_first` exports block until
    `release` is set."""

    def __init__(self, hang_first: int = 0) -> None:
        self.threads: list[threading.Thread] = []
        self.release = threading.Event()
        self.hang_first = hang_first
        self.spans = 0

    def export(self, spans):
        self.threads.append(threading.current_thread())
        if len(self.threads) <= self.hang_first:
            self.release.wait(30)
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


def _until(predicate, what: str, tries: int = 400) -> None:
    """Waits, in short steps and a bounded number of them, for what another thread does."""
    for _ in range(tries):
        if predicate():
            return
        time.sleep(0.025)
    raise AssertionError(f"never happened: {what}")


def test_exports_reuse_one_runner_thread_instead_of_a_thread_each():
    recording = ThreadRecording()
    exporter = FailSoftSpanExporter(recording, export_timeout=5.0)
    results = [exporter.export([object()]) for _ in range(6)]  # type: ignore[list-item]
    assert results == [SpanExportResult.SUCCESS] * 6
    (runner,) = set(recording.threads)  # the same Thread object ran all six (kept: no id reused)
    assert runner is not threading.current_thread() and runner.daemon and runner.is_alive()
    exporter.shutdown()
    runner.join(5.0)
    assert not runner.is_alive()


def test_the_batch_processors_exports_share_one_runner_thread():
    recording = ThreadRecording()
    processor = BoundedBatchSpanProcessor(recording, schedule_delay=60.0)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    for number in range(4):
        tracer.start_span(f"span {number}").end()
        assert processor.force_flush(5000)
    assert recording.spans == 4 and len(recording.threads) == 4
    (runner,) = set(recording.threads)
    assert runner.name == "cafe-otel-export"
    processor.shutdown(2.0)
    runner.join(5.0)
    assert not runner.is_alive()  # shutdown ends it: no thread left behind
    assert processor.account.exported == 4


def test_an_export_past_its_bound_is_a_timeout_and_the_runner_takes_the_next_once_it_returns():
    recording = ThreadRecording(hang_first=1)
    exporter = FailSoftSpanExporter(recording, export_timeout=0.2, grace=0.0)
    try:
        assert exporter.export([object()]) is SpanExportResult.FAILURE  # type: ignore[list-item]
        assert exporter.last_outcome.error_type == "timeout"
        assert exporter.export([object()]) is SpanExportResult.FAILURE  # type: ignore[list-item]
        assert exporter.last_outcome.error_type == "busy"  # not attempted while the first hangs
        assert len(recording.threads) == 1
    finally:
        recording.release.set()
    _until(lambda: exporter.export([object()]) is SpanExportResult.SUCCESS,  # type: ignore[list-item]
           "an export after the hung one returned")
    assert len(recording.threads) == 2  # busy answers attempted nothing
    assert recording.threads[0] is recording.threads[1]  # the same runner, not wedged
    exporter.shutdown()


def test_a_batch_past_its_bound_is_counted_once_and_later_batches_still_go_out():
    recording = ThreadRecording(hang_first=1)
    account = TelemetryAccount()
    processor = BoundedBatchSpanProcessor(recording, account=account, schedule_delay=60.0,
                                          export_timeout=0.2, export_grace=0.0)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    tracer.start_span("hangs").end()
    try:
        assert processor.force_flush(5000)  # the worker gave up on the hung export
        assert (account.exported, account.dropped_export_failed) == (0, 1)
        assert "no answer within 0.2s" in account.last_error
    finally:
        recording.release.set()
    ended = [1]

    def one_more_exported() -> bool:
        tracer.start_span("after").end()
        ended[0] += 1
        processor.force_flush(5000)
        return account.exported > 0
    _until(one_more_exported, "a batch exported after the hung one returned")
    processor.shutdown(2.0)
    # Every span settled once: the late SUCCESS of the hung export is not counted again.
    assert account.exported + account.dropped == ended[0]
    assert set(account.snapshot().export_failed_by_type) <= {"timeout", "busy"}
    assert account.exported == 1 and recording.spans == 2


def test_shutdown_while_an_export_hangs_returns_within_its_bound_and_the_runner_ends_after():
    recording = ThreadRecording(hang_first=1)
    handle = configure(exporter=recording, environ={}, metrics=False,
                       batch=BatchOptions(export_timeout=5.0, schedule_delay=30.0))
    try:
        seed_shift(handle.tracer())
        handle.force_flush(0.05)  # one batch of the whole shift, however late the worker wakes
        _until(lambda: recording.threads, "the export started")
        started = time.monotonic()
        handle.shutdown(0.3)
        assert time.monotonic() - started < 0.3 + SCHEDULING_SLACK
        assert handle.account.unconfirmed == SHIFT_SPANS  # the hung export never answered
        (runner,) = recording.threads
        assert runner.is_alive()  # still in the hung export: it ends on its own, never joined
    finally:
        recording.release.set()
    runner.join(5.0)
    assert not runner.is_alive()
    assert len(recording.threads) == 1  # no export after shutdown
    assert handle.account.unconfirmed == SHIFT_SPANS  # its late answer changes nothing


def test_a_stopped_runner_takes_no_call_and_starts_no_thread():
    runner = ExportRunner("test-runner")
    first = runner.call(threading.current_thread, timeout=5.0).value
    runner.stop()
    first.join(5.0)
    assert not first.is_alive()  # idle when stopped: it ends at once, not after `idle` seconds
    called: list[int] = []
    outcome = runner.call(called.append, 1, timeout=5.0)
    assert (outcome.error_type, outcome.value, called) == ("already_shutdown", None, [])


def test_an_idle_runner_ends_its_thread_and_the_next_call_starts_a_fresh_one():
    runner = ExportRunner("test-idle-runner", idle=0.05)
    first = runner.call(threading.current_thread, timeout=5.0).value
    first.join(5.0)
    assert not first.is_alive()  # no call for `idle` seconds: the thread ended
    second = runner.call(threading.current_thread, timeout=5.0).value
    assert second is not first and second.name == "test-idle-runner"
    assert [runner.call(lambda n=n: n * 2, timeout=5.0).value for n in range(3)] == [0, 2, 4]
    runner.stop()


def test_a_call_that_raises_or_exits_is_reported_and_the_runner_goes_on():
    runner = ExportRunner("test-raising-runner")

    def leaves() -> None:
        raise SystemExit(SECRET)
    outcome = runner.call(leaves, timeout=5.0)
    assert outcome.error_type == "SystemExit" and SECRET not in outcome.why
    assert runner.call(lambda: 42, timeout=5.0).value == 42
    runner.stop()


FORK_WHILE_AN_EXPORT_HANGS = """
import os, sys, threading, time
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from cafe_otel import FailSoftSpanExporter

class HangsFirst(SpanExporter):
    def __init__(self):
        self.threads, self.release = [], threading.Event()
    def export(self, spans):
        self.threads.append(threading.current_thread())
        if len(self.threads) == 1:
            self.release.wait(30)
        return SpanExportResult.SUCCESS

recording = HangsFirst()
exporter = FailSoftSpanExporter(recording, export_timeout=0.2, grace=0.0)
assert exporter.export([object()]) is SpanExportResult.FAILURE and exporter.last_outcome.error_type == "timeout"
parents_runner = recording.threads[0]
pid = os.fork()
if pid == 0:  # the child: the parent's runner thread, hung in its export, is not here
    answered = exporter.export([object()])
    fresh = recording.threads[-1] is not parents_runner and recording.threads[-1].is_alive()
    os._exit(0 if answered is SpanExportResult.SUCCESS and fresh and len(recording.threads) == 2 else 1)
for _ in range(400):  # bounded: the child exports once and exits
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    time.sleep(0.025)
else:
    os.kill(pid, 9)  # this program's own child, hung
    sys.exit("the forked child's export never answered")
print("child", os.waitstatus_to_exitcode(status))
assert exporter.export([object()]) is SpanExportResult.FAILURE
print("parent", exporter.last_outcome.error_type)  # its runner still holds the hung export
recording.release.set()
for _ in range(400):
    if exporter.export([object()]) is SpanExportResult.SUCCESS:
        break
    time.sleep(0.025)
print("parent again", exporter.last_outcome.error_type, recording.threads[-1] is parents_runner)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork here")
def test_a_child_forked_while_an_export_hangs_gets_a_runner_of_its_own():
    """In a fresh interpreter, so that no thread of the test session is forked along."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FORK_WHILE_AN_EXPORT_HANGS], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["child 0", "parent busy", "parent again None True"]


HANGING_AT_EXIT = """
import threading, time
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from cafe_otel import BatchOptions, configure

class Hangs(SpanExporter):
    def export(self, spans):
        threading.Event().wait()  # never answers
        return SpanExportResult.SUCCESS

class Answers(SpanExporter):
    def export(self, spans):
        return SpanExportResult.SUCCESS

hung = configure(exporter=Hangs(), environ={}, metrics=False,
                 batch=BatchOptions(export_timeout=30.0, schedule_delay=0.01, shutdown_timeout=0.3))
idle = configure(exporter=Answers(), environ={}, metrics=False,
                 batch=BatchOptions(schedule_delay=0.01, shutdown_timeout=0.3))
for handle in (hung, idle):
    handle.provider.get_tracer("exit").start_span("s").end()
assert idle.force_flush(5.0) and idle.account.exported == 1
assert not hung.force_flush(0.2)
print("exiting", flush=True)
"""


def test_a_process_exits_with_one_runner_hung_and_one_idle_and_no_shutdown_called():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", HANGING_AT_EXIT], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "exiting"), done.stderr
    assert "Traceback" not in done.stderr
