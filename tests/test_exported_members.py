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
        'AGENT_NAME', 'STORY_DECISIONS', 'STORY_SCRIPT', 'StoryClient', 'TOOL_NAMES',
        'CafeError', 'CannedClient', 'ChatClient', 'ConfigurationError', 'ConsentDecision', 'ConsentGate',
        'ConsentOutcome', 'DEFAULT_DECISIONS', 'DEFAULT_SCRIPT', 'EIGHTY_SIXED', 'LiveClient',
        'LiveSettings', 'MENU', 'MissingSettings', 'ModelCallError', 'NullTracer', 'ProtectedExecutor',
        'RecordMode', 'RecordingClient', 'RecordingError', 'RecordingExhausted', 'ReplayClient',
        'ReplayMismatch', 'STOP_REASONS', 'SYSTEM_PROMPT', 'ScriptedClient', 'ShiftRun', 'SpanNode',
        'StopReason', 'TOOL_SCHEMAS', 'TickClock', 'ToolStatus', 'Tracer', 'TracingClient',
        'UnknownToolCallId', 'UnusedCalls', 'Usage', 'export_fail_soft', 'get_client', 'handover_note',
        'load_recording', 'load_records', 'make_responder', 'record_shift', 'replay_shift', 'run_shift',
        'transcript', 'usage_of'
    },
    "cafe.cli": {'main'},
    "cafe.recording": {
        'DEFAULT_SECRET_PATTERNS', 'Ending', 'FORMAT_VERSION', 'Header', 'MalformedLine', 'NetworkRefused',
        'NotARecording', 'RecordMode', 'RecordedCall', 'RecordedTimeline', 'Recording',
        'RecordingClient', 'RecordingDisabled',
        'RecordingError', 'RecordingExhausted', 'RecordingExists', 'RecordingNotClean', 'RecordingNotFound',
        'RecordingUnwritable', 'RecordingWriter', 'ReplayClient', 'ReplayError', 'ReplayMismatch',
        'Scrubber', 'Timeline', 'Timing', 'TranscriptMismatch', 'TruncatedRecording', 'UnsupportedVersion',
        'UnusedCalls', 'call_windows', 'decisions_shown', 'load_recording', 'load_records', 'normalise',
        'record_shift', 'replay_shift', 'responder_of', 'script_of'
    },
    "cafe.wire": {
        'AsyncObservedTransport', 'AsyncRecordingTransport', 'CallObserver', 'CallOutcome', 'Clock',
        'FailureKind', 'Headers', 'ObservedTransport', 'OutcomeKind', 'RecordingTransport',
        'ReplayTransport', 'WireLayer', 'WireObserver', 'WireRecorder', 'WireRequest', 'WireResponse',
        'WireSource', 'failure_kind', 'header_value', 'install', 'installed', 'intercept', 'record',
        'recorded_request_headers', 'recorded_response_headers', 'replay', 'uninstall'
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


def test_cafe_types_the_names_it_loads_on_first_use() -> None:
    """`cafe` loads its names lazily (`_EXPORTS`) and names them for type checkers in its
    TYPE_CHECKING block: the two say the same names, from the same modules."""
    tree = ast.parse(Path(cafe.__file__).read_text(encoding="utf-8"))
    (block,) = (node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    typed = {alias.asname or alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom)
             for alias in node.names}
    assert typed == cafe._EXPORTS
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
    `_privacy`, `_export`, `_metrics`, `_offline`, `_cli`) or `_configure.py`."""
    import cafe_otel

    package = Path(cafe_otel.__file__).parent
    public = {path.name for path in package.iterdir()
              if not path.name.startswith(("_", ".")) or path.name == "__init__.py"}
    public = {name for name in public if name.endswith(".py") or (package / name).is_dir()}
    assert public == PUBLIC_OTEL_MODULES
    groups = sorted(path.name for path in package.iterdir() if path.is_dir() and path.name.startswith("_")
                    and path.name != "__pycache__")
    assert groups == ["_cli", "_config", "_export", "_metrics", "_offline", "_privacy", "_spans"]
