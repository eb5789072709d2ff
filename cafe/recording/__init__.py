"""The recording: a private, versioned JSONL contract, its writer and reader.

The café's recording and replay of shifts (`record_shift`, `replay_shift`, `RecordingClient`,
`ReplayClient`) are the example's: `cafe.counter`."""

from cafe._moved import forwarding
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
from cafe.recording.replayers import replay_into
from cafe.recording.windows import RecordedTimeline, call_windows
from cafe.recording.writer import RecordingWriter
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
    "RecordingDisabled",
    "RecordingError",
    "RecordingExhausted",
    "RecordingExists",
    "RecordingNotClean",
    "RecordingNotFound",
    "RecordingUnwritable",
    "RecordingWriter",
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
    "load_recording",
    "load_records",
    "normalise",
    "replay_into",
]

__getattr__ = forwarding("cafe.recording", {
    "RecordingClient": "cafe.counter", "ReplayClient": "cafe.counter", "decisions_shown": "cafe.counter",
    "record_shift": "cafe.counter", "replay_shift": "cafe.counter", "responder_of": "cafe.counter",
    "script_of": "cafe.counter",
})
