"""`opentelemetry-instrument python agent.py`: a plain `openai` program, unchanged, gets our
pipeline (spans and metrics, metadata only, the account at exit) with no code change."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from cafe_otel import semconv as sc
from cafe_otel._metrics.listener import DURATION_BUCKETS
from tests.wire.openai_server import OpenAIServer

from .test_cli_plugin import Receiver

KEY = "sk-zero-code-9d8c7b6a5f4e3d2c1b0a"
CUSTOMER = "Zq9CANARY my address is 12 Rue de la Paix"

AGENT = f"""
import gc
import openai

client = openai.OpenAI(max_retries=0)
messages = [{{"role": "system", "content": "You are a barista."}}, {{"role": "user", "content": {CUSTOMER!r}}}]
client.chat.completions.create(model="plain", messages=messages, max_tokens=4)
for _chunk in client.chat.completions.create(model="streamed", messages=messages, stream=True,
                                             stream_options={{"include_usage": True}}):
    pass
abandoned = client.chat.completions.create(model="abandoned", messages=messages, stream=True)
next(iter(abandoned))
del abandoned
gc.collect()
try:
    client.chat.completions.create(model="failing", messages=messages)
except openai.RateLimitError:
    print("rate limited")
"""


class FailingModelServer(OpenAIServer):
    """Answers 429 to the model named `failing`, as a provider's rate limit would."""

    def _take_failure(self) -> int | None:
        with self._lock:
            body = self.received[-1].body if self.received else None
        return 429 if isinstance(body, dict) and body.get("model") == "failing" else None


def _instrument_command() -> Path:
    command = Path(sys.executable).parent / "opentelemetry-instrument"
    found = command if command.exists() else shutil.which("opentelemetry-instrument")
    names = {entry.name for entry in entry_points(group="opentelemetry_instrumentor")}
    if found is None or "cafe_openai" not in names:
        pytest.skip("opentelemetry-instrument or cafe-otel's entry points are not installed "
                    "(pip install -e . in this environment)")
    return Path(found)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    found.thread.start()
    yield found
    found.server.shutdown()
    found.server.server_close()


def test_a_plain_openai_program_is_instrumented_with_no_code_change(tmp_path: Path, receiver: Receiver) -> None:
    command = _instrument_command()
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT, encoding="utf-8")
    with FailingModelServer.running() as server:
        environ = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "OPENAI_"))}
        environ.update({
            "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": KEY,
            "OTEL_SERVICE_NAME": "plain-agent", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_METRIC_EXPORT_INTERVAL": "600000",
        })
        done = subprocess.run([str(command), sys.executable, str(agent)], env=environ, capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rate limited" in done.stdout
    assert "cafe-otel: telemetry: 4 spans exported, 0 dropped" in done.stderr
    scopes = [scope for request in receiver.requests for rs in request.resource_spans for scope in rs.scope_spans]
    assert {scope.schema_url for scope in scopes} == {sc.SCHEMA_URL}
    spans = {span.name: span for scope in scopes for span in scope.spans}
    assert set(spans) == {"chat plain", "chat streamed", "chat abandoned", "chat failing"}
    assert all(span.kind == span.SPAN_KIND_CLIENT for span in spans.values())

    def attributes(name: str) -> dict[str, object]:
        found = {}
        for item in spans[name].attributes:
            value = item.value
            found[item.key] = getattr(value, value.WhichOneof("value"))
        return found

    plain, streamed, abandoned, failing = (attributes(name) for name in
                                           ("chat plain", "chat streamed", "chat abandoned", "chat failing"))
    assert plain[sc.GEN_AI_REQUEST_MAX_TOKENS] == 4 and plain[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11
    assert sc.GEN_AI_REQUEST_STREAM not in plain
    assert streamed[sc.GEN_AI_REQUEST_STREAM] is True and streamed[sc.GEN_AI_USAGE_OUTPUT_TOKENS] > 0
    for stream in (streamed, abandoned):
        assert stream[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] >= 0  # type: ignore[operator]
    assert spans["chat abandoned"].end_time_unix_nano >= spans["chat abandoned"].start_time_unix_nano > 0
    assert failing[sc.ERROR_TYPE] == "429"

    points = receiver.metric_points()
    durations = [point for name, point in points if name == sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION]
    assert all(tuple(point.explicit_bounds) == DURATION_BUCKETS for point in durations)
    errors = [{item.key: item.value.string_value for item in point.attributes}.get(sc.ERROR_TYPE)
              for point in durations]
    assert sorted(error or "" for error in errors) == ["", "", "", "429"]  # one point a model
    first_chunks = [point for name, point in points if name == sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK]
    assert sum(point.count for point in first_chunks) == 2  # both streams, the abandoned one too
    assert any(name == sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK for name, _ in points)

    exported = receiver.raw()
    for text in (KEY, CUSTOMER, "Zq9CANARY", "barista"):
        assert text.encode() not in exported


@pytest.mark.parametrize(("extra", "expected"), [
    ({"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "cafe_openai"}, "cafe-otel: telemetry: 0 spans exported"),
    ({"OTEL_TRACES_EXPORTER": "zipkin"}, "cafe-otel: telemetry is off: OTEL_TRACES_EXPORTER"),
])
def test_the_instrumentor_can_be_left_out_and_a_bad_setting_leaves_the_program_running(
        tmp_path: Path, receiver: Receiver, extra: dict[str, str], expected: str) -> None:
    command = _instrument_command()
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT, encoding="utf-8")
    with FailingModelServer.running() as server:
        environ = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "OPENAI_"))}
        environ.update({"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": KEY,
                        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
                        "OTEL_METRICS_EXPORTER": "none", **extra})
        done = subprocess.run([str(command), sys.executable, str(agent)], env=environ, capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)
        assert server.count == 4  # the program ran all its calls
    assert done.returncode == 0, done.stderr[-2000:]
    assert expected in done.stderr
    assert receiver.spans() == []
    assert "Traceback" not in done.stderr


# --- the exporters' own lines: held, redacted -----------------------------------------------------

PATH_KEY = "sk-proj-PATHKEYabcdefghijklmn"  # some receivers take their key in the path
QUERY_TOKEN = "qtok3nSECRET"
# An application that makes one span and lives on a moment: its batch (50 ms) is exported,
# and the exporter has failed and logged, before the process exits.
PROBE = """
import time
from opentelemetry import metrics, trace
with trace.get_tracer("probe").start_as_current_span("probe"):
    metrics.get_meter("probe").create_counter("probe.runs").add(1)
time.sleep(1.0)
print("ran")
"""


def _instrumented(tmp_path: Path, environ: dict[str, str], program: str = PROBE) -> subprocess.CompletedProcess[str]:
    command = _instrument_command()
    script = tmp_path / "probe.py"
    script.write_text(program, encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "OPENAI_", "CAFE_"))}
    env.update({"OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_METRIC_EXPORT_INTERVAL": "600000", **environ})
    return subprocess.run([str(command), sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)


def test_the_exporters_lines_are_held_and_redacted_under_opentelemetry_instrument(tmp_path: Path) -> None:
    from .conftest import closed_port

    endpoint = f"http://127.0.0.1:{closed_port()}/{PATH_KEY}/v1/traces?token={QUERY_TOKEN}"
    environ = {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
               "OTEL_METRICS_EXPORTER": "none"}
    quiet, debug = _instrumented(tmp_path, environ), _instrumented(tmp_path, {**environ, "CAFE_DEBUG": "1"})
    for done in (quiet, debug):
        assert done.returncode == 0 and done.stdout == "ran\n", done.stderr
        assert PATH_KEY[8:] not in done.stderr and QUERY_TOKEN not in done.stderr, done.stderr
    (line,) = quiet.stderr.splitlines()
    assert line.startswith("cafe-otel: telemetry: 0 spans exported, 1 dropped") and "(exporter: " in line
    assert "cafe-otel: debug: opentelemetry.exporter" in debug.stderr and "Transient error" in debug.stderr
    assert "/[REDACTED]/v1/traces" in debug.stderr


def test_a_grpc_receivers_error_details_never_reach_stderr_under_opentelemetry_instrument(tmp_path: Path) -> None:
    from .test_cli_stderr import DETAILS_KEY, refusing_grpc_receiver

    with refusing_grpc_receiver("UNKNOWN") as endpoint:
        environ = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
                   "OTEL_METRICS_EXPORTER": "none"}
        quiet, debug = _instrumented(tmp_path, environ), _instrumented(tmp_path, {**environ, "CAFE_DEBUG": "1"})
    for done in (quiet, debug):
        assert done.returncode == 0 and done.stdout == "ran\n", done.stderr
        assert DETAILS_KEY not in done.stderr, done.stderr
    assert len(quiet.stderr.splitlines()) == 1 and quiet.stderr.startswith("cafe-otel: telemetry: ")
    # Shown with CAFE_DEBUG, its traceback (the SDK logs one for UNKNOWN) redacted too.
    assert "error details: bad credentials: [REDACTED]" in debug.stderr and "Traceback" not in debug.stderr


# --- every hostile OTEL_* value: one line on stderr, and the program runs -------------------------

HOSTILE = {"negative": "-1", "huge": "9" * 40, "non-numeric": "abc", "empty": "", "unicode": "ünïcødé☕",
           "control": "\x1b[31mred\x07\r\nnext"}
# Read by `opentelemetry-instrument` itself before any code of ours is loaded (in the launcher,
# or in the program's sitecustomize before the distro): what it does with a bad one is its own
# (docs/instrumentation.md). OTEL_PROPAGATORS there fails the launcher before the program runs.
READ_BEFORE_US = frozenset({"OTEL_PROPAGATORS", "OTEL_PYTHON_CONTEXT",
                            "OTEL_PYTHON_AUTO_INSTRUMENTATION_EXPERIMENTAL_GEVENT_PATCH"})
# Each decides which distro, configurator or instrumentors load: tried one at a time.
CHOOSING = ("OTEL_PYTHON_DISTRO", "OTEL_PYTHON_CONFIGURATOR", "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS")


def _sdk_variables() -> frozenset[str]:
    """Every `OTEL_*` name the installed OpenTelemetry packages (API, SDK, exporters,
    instrumentation) spell in their code."""
    import re

    import opentelemetry

    found: set[str] = set()
    for root in opentelemetry.__path__:
        for path in Path(root).rglob("*.py"):
            found.update(re.findall(r"""["'](OTEL_[A-Z0-9_]+)["']""", path.read_text(encoding="utf-8")))
    return frozenset(found)


def _ours() -> frozenset[str]:
    from cafe_otel._config.variables import KNOWN_VARIABLES

    return frozenset(name for name in KNOWN_VARIABLES if name.startswith("OTEL_"))


def _one_line_and_ran(done: subprocess.CompletedProcess[str]) -> str | None:
    """None when the run is as promised, else what is wrong with it."""
    lines = done.stderr.splitlines()
    if done.returncode != 0 or done.stdout != "ran\n":
        return f"exit {done.returncode}, stdout {done.stdout!r}: {done.stderr[-600:]!r}"
    if len(lines) != 1 or not lines[0].startswith("cafe-otel: telemetry"):
        return f"stderr is not our one line: {done.stderr[-600:]!r}"
    if "\x1b" in done.stderr or "\x07" in done.stderr:
        return f"a control character reached stderr: {done.stderr!r}"
    return None


def _runs(tmp_path: Path, receiver: Receiver, cases: dict[str, dict[str, str]]) -> dict[str, str]:
    """Each case (its own variables over a pipeline that works) under the real
    `opentelemetry-instrument`, two at a time; what went wrong, by case."""
    from concurrent.futures import ThreadPoolExecutor

    base = {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}

    def run(item: tuple[int, tuple[str, dict[str, str]]]) -> tuple[str, str | None]:
        index, (name, variables) = item
        directory = tmp_path / str(index)
        directory.mkdir()
        return name, _one_line_and_ran(_instrumented(directory, {**base, **variables}))

    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(run, enumerate(cases.items())))
    return {name: wrong for name, wrong in outcomes if wrong is not None}


def test_the_sdks_variables_all_hostile_at_once_leave_one_line(tmp_path: Path, receiver: Receiver) -> None:
    # Ours stay as they are (they are tried below): the pipeline is configured, so every place
    # the SDK, its exporters and the instrumentation read theirs is reached.
    variables = sorted(_sdk_variables() - _ours() - READ_BEFORE_US - frozenset(CHOOSING))
    assert {"OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER",
            "OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED"} <= set(variables)
    cases = {kind: dict.fromkeys(variables, value) for kind, value in HOSTILE.items()}
    assert _runs(tmp_path, receiver, cases) == {}


def test_a_variable_that_chooses_what_loads_gets_the_one_line_whatever_its_value(
        tmp_path: Path, receiver: Receiver) -> None:
    cases = {f"{name}={kind}": {name: value} for name in CHOOSING for kind, value in HOSTILE.items()}
    assert _runs(tmp_path, receiver, cases) == {}


def test_our_variables_hostile_are_the_one_line_telemetry_is_off(tmp_path: Path, receiver: Receiver) -> None:
    # All at once the first is named, and each one alone is refused by `resolve` (below); the
    # span limit the SDK reads as it is imported is tried alone, for the import's own sake.
    ours = sorted(_ours())
    cases = {f"all={kind}": dict.fromkeys(ours, value) for kind, value in HOSTILE.items()}
    cases.update({f"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT={kind}": {"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": value}
                  for kind, value in HOSTILE.items()})
    assert _runs(tmp_path, receiver, cases) == {}


def test_each_of_our_variables_hostile_is_refused_by_name_or_taken() -> None:
    from cafe_otel._config import resolve
    from cafe_otel._config.settings import TelemetryConfigError

    for name in sorted(_ours()):
        for kind, value in HOSTILE.items():
            try:
                resolve({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", name: value})
            except TelemetryConfigError as error:  # anything else is a traceback under opentelemetry-instrument
                text = str(error)
                assert "OTEL_" in text, (name, kind, text)  # it names what to fix
                assert "\n" not in text and "\x1b" not in text and "\x07" not in text, (name, kind, text)


@pytest.mark.parametrize("value", ["", "cafe-otel", "\x1b[31mred"])
def test_a_configurator_variable_that_loads_none_says_so_and_how_to_load_ours(
        tmp_path: Path, receiver: Receiver, value: str) -> None:
    base = {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
    refused = _instrumented(tmp_path, {**base, "OTEL_PYTHON_CONFIGURATOR": value})
    assert refused.returncode == 0 and refused.stdout == "ran\n"
    (line,) = refused.stderr.splitlines()
    assert line.startswith("cafe-otel: telemetry is off: OTEL_PYTHON_CONFIGURATOR ")
    assert line.endswith("; unset it, or set it to cafe_otel") and "\x1b" not in line
    # The remedy works: named, our configurator loads, and the span leaves.
    taken = _instrumented(tmp_path, {**base, "OTEL_PYTHON_CONFIGURATOR": "cafe_otel"})
    assert taken.stderr.startswith("cafe-otel: telemetry: 1 spans exported, 0 dropped"), taken.stderr
