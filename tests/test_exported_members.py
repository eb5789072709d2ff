"""The public faces, pinned: a name joins or leaves one on purpose, in a commit that says so,
as httpx's tests/test_exported_members.py pins httpx's."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import cafe

PINNED = {
    "cafe": {
        'CafeError', 'ConfigurationError', 'ConsentDecision', 'ConsentOutcome', 'MissingSettings',
        'ModelCallError', 'NullTracer', 'RecordMode', 'RecordingError', 'RecordingExhausted', 'ReplayMismatch',
        'SpanNode', 'StopReason', 'TickClock', 'ToolStatus', 'Tracer', 'UnknownToolCallId', 'UnusedCalls',
        'Usage', 'export_fail_soft', 'load_recording', 'load_records', 'usage_of'
    },
    "cafe.apis": {
        'APIS', 'Api', 'CallRequest', 'CallResponse', 'EventSplitter', 'Message', 'ModelCall', 'NO_RESPONSE',
        'NO_USAGE', 'Operation', 'Part', 'RequestContent', 'StreamReading', 'ToolCall', 'Usage', 'api_for',
        'assembled', 'read_exchange', 'request_head', 'request_summary', 'text_of'
    },
    "cafe.counter": {
        'AGENT_NAME', 'CannedClient', 'ChatClient', 'ConsentGate', 'DEFAULT_DECISIONS', 'DEFAULT_SCRIPT',
        'EIGHTY_SIXED', 'LiveClient', 'LiveSettings', 'MENU', 'ProtectedExecutor', 'RecordingClient',
        'ReplayClient', 'SHIFT_WORDS', 'STOP_REASONS', 'STORY_DECISIONS', 'STORY_SCRIPT', 'SYSTEM_PROMPT',
        'ScriptedClient', 'ShiftRun', 'StoryClient', 'TOOL_NAMES', 'TOOL_SCHEMAS', 'TracingClient',
        'decisions_shown', 'get_client', 'handover_note', 'make_responder', 'record_shift', 'replay_shift',
        'responder_of', 'run_shift', 'script_of', 'transcript'
    },
    "cafe.cli": {'main'},
    "cafe.recording": {
        'DEFAULT_SECRET_PATTERNS', 'Ending', 'FORMAT_VERSION', 'Header', 'MalformedLine', 'NetworkRefused',
        'NotARecording', 'RecordMode', 'RecordedCall', 'RecordedTimeline', 'Recording', 'RecordingDisabled',
        'RecordingError', 'RecordingExhausted', 'RecordingExists', 'RecordingNotClean', 'RecordingNotFound',
        'RecordingUnwritable', 'RecordingWriter', 'ReplayError', 'ReplayMismatch',
        'Scrubber', 'Timeline', 'Timing', 'TranscriptMismatch', 'TruncatedRecording', 'UnsupportedVersion',
        'UnusedCalls', 'call_windows', 'load_recording', 'load_records', 'normalise', 'replay_into'
    },
    "cafe.wire": {
        'AsyncObservedTransport', 'AsyncRecordingTransport', 'CallObserver', 'CallOutcome', 'Clock',
        'FailureKind', 'Headers', 'ObservedTransport', 'OutcomeKind', 'RecordingTransport',
        'ReplayTransport', 'WireAnswer', 'WireLayer', 'WireObserver', 'WireRecorder', 'WireReplay', 'WireRequest',
        'WireResponse', 'WireSource', 'failure_kind', 'header_value', 'install', 'installed', 'intercept', 'record',
        'recorded_request_headers', 'recorded_response_headers', 'replay', 'uninstall'
    },
    # One face per client library (the same names), each importing only its library.
    "cafe.wire.httpx": {
        'AsyncObservedTransport', 'AsyncRecordingTransport', 'ObservedTransport', 'RecordingTransport',
        'ReplayTransport', 'SourceTransport'
    },
    "cafe.wire.httpx2": {
        'AsyncObservedTransport', 'AsyncRecordingTransport', 'ObservedTransport', 'RecordingTransport',
        'ReplayTransport', 'SourceTransport'
    },
    "cafe_otel": {
        'AdvancedOptions', 'BatchOptions', 'BoundedBatchSpanProcessor', 'CaptureMode', 'FailSoftSpanExporter',
        'GENAI_SEMCONV_VERSION', 'MetadataOnlySpanProcessor', 'MetricsListener', 'MetricsOptions', 'OTelTracer',
        'SCHEMA_URL', 'SequentialIdGenerator', 'Shape', 'SpanListener', 'TelemetryAccount', 'TelemetryConfigError',
        'TelemetryHandle', 'bool_shape', 'capture_mode', 'configure', 'describe', 'diff', 'encode', 'execute_tool',
        'export_recording', 'float_shape', 'int_shape', 'invoke_agent', 'resolve_settings', 'sanitise_span',
        'text_shape'
    },
}


@pytest.mark.parametrize("module", sorted(PINNED))
def test_the_face_is_what_is_pinned(module: str) -> None:
    face = importlib.import_module(module)
    assert sorted(face.__all__) == sorted(PINNED[module])
    assert len(face.__all__) == len(set(face.__all__)), "a name listed twice"
    missing = [name for name in face.__all__ if not hasattr(face, name)]
    assert missing == []


@pytest.mark.parametrize("module", ["cafe", "cafe.counter"])
def test_a_lazy_face_types_the_names_it_loads_on_first_use(module: str) -> None:
    """`cafe` and `cafe.counter` load their names lazily (`_EXPORTS`) and name them for type
    checkers in their TYPE_CHECKING block: the two say the same names, from the same modules."""
    face = importlib.import_module(module)
    tree = ast.parse(Path(str(face.__file__)).read_text(encoding="utf-8"))
    (block,) = (node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    typed = {alias.asname or alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom)
             for alias in node.names}
    assert typed == face._EXPORTS
    assert all(alias.asname == alias.name for node in block.body if isinstance(node, ast.ImportFrom)
               for alias in node.names), "a name typed but not re-exported"


def test_cafe_otel_types_the_names_it_loads_on_first_use() -> None:
    import cafe_otel

    tree = ast.parse(Path(cafe_otel.__file__).read_text(encoding="utf-8"))
    (block,) = (node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    typed = {alias.asname or alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom)
             for alias in node.names}
    assert typed == cafe_otel._EXPORTS


PUBLIC_OTEL_MODULES = {"__init__.py", "agent.py", "instrumentation.py", "semconv.py"}


def test_cafe_otel_keeps_its_inside_private_behind_three_public_modules() -> None:
    """Everything else lives in a private package grouped by job (`_config`, `_spans`,
    `_privacy`, `_export`, `_metrics`, `_offline`, `_cli`, `_wire`; the café example's
    side, `_counter`) or `_configure.py`."""
    import cafe_otel

    package = Path(cafe_otel.__file__).parent
    public = {path.name for path in package.iterdir()
              if not path.name.startswith(("_", ".")) or path.name == "__init__.py"}
    public = {name for name in public if name.endswith(".py") or (package / name).is_dir()}
    assert public == PUBLIC_OTEL_MODULES
    groups = sorted(path.name for path in package.iterdir() if path.is_dir() and path.name.startswith("_")
                    and path.name != "__pycache__")
    assert groups == ["_cli", "_config", "_counter", "_export", "_metrics", "_offline", "_privacy", "_spans", "_wire"]


@pytest.mark.parametrize(("face", "name"), [("cafe", "record_shift"), ("cafe", "ScriptedClient"),
                                            ("cafe", "transcript"), ("cafe.recording", "ReplayClient"),
                                            ("cafe.trace", "TracingClient")])
def test_a_name_that_moved_to_the_example_is_found_where_it_was_with_a_warning_naming_where(
        face: str, name: str) -> None:
    import cafe.counter

    with pytest.warns(DeprecationWarning, match=rf"{face}\.{name} moved to cafe\.counter\.{name}"):
        value = getattr(importlib.import_module(face), name)
    assert value is getattr(cafe.counter, name)


def test_a_name_no_face_ever_held_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        cafe.no_such_name  # noqa: B018
