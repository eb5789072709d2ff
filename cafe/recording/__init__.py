"""The recording: a private, versioned JSONL contract, its writer, reader and replay."""

from cafe.privacy import DEFAULT_SECRET_PATTERNS, Scrubber
from cafe.recording.errors import (
    MalformedLine,
    NetworkRefused,
    NotARecording,
    RecordingDisabled,
    RecordingError,
    RecordingExhausted,
    RecordingExists,
    RecordingNotClean,
    RecordingNotFound,
    RecordingUnwritable,
    ReplayError,
    ReplayMismatch,
    TranscriptMismatch,
    TruncatedRecording,
    UnsupportedVersion,
    UnusedCalls,
)
from cafe.recording.format import (
    FORMAT_VERSION,
    Ending,
    Header,
    RecordedCall,
    Recording,
    Timing,
)
from cafe.recording.modes import RecordMode
from cafe.recording.normalise import normalise
from cafe.recording.reader import load_recording, load_records
from cafe.recording.replay import ReplayClient
from cafe.recording.shift import decisions_shown, record_shift, replay_shift, responder_of, script_of
from cafe.recording.windows import RecordedTimeline, call_windows
from cafe.recording.writer import RecordingClient, RecordingWriter
from cafe.trace.clock import Timeline

__all__ = [
    "DEFAULT_SECRET_PATTERNS",
    "FORMAT_VERSION",
    "Ending",
    "Header",
    "MalformedLine",
    "NetworkRefused",
    "NotARecording",
    "RecordMode",
    "RecordedCall",
    "RecordedTimeline",
    "Recording",
    "RecordingClient",
    "RecordingDisabled",
    "RecordingError",
    "RecordingExhausted",
    "RecordingExists",
    "RecordingNotClean",
    "RecordingNotFound",
    "RecordingUnwritable",
    "RecordingWriter",
    "ReplayClient",
    "ReplayError",
    "ReplayMismatch",
    "Scrubber",
    "Timeline",
    "Timing",
    "TranscriptMismatch",
    "TruncatedRecording",
    "UnsupportedVersion",
    "UnusedCalls",
    "call_windows",
    "decisions_shown",
    "load_recording",
    "load_records",
    "normalise",
    "record_shift",
    "replay_shift",
    "responder_of",
    "script_of",
]
