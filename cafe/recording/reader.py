"""Reading a recording strictly, line by line, without ever writing to it.

Each problem is raised as the named error that says which file, line and field, and what
was expected. Values are described by type, never quoted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cafe.recording.errors import (
    MalformedLine,
    NotARecording,
    RecordingNotFound,
    TruncatedRecording,
    UnsupportedVersion,
)
from cafe.recording.format import (
    FORMAT_NAME,
    LEGACY_VERSION,
    MAX_LINE_BYTES,
    SUPPORTED_VERSIONS,
    Ending,
    Header,
    RecordedCall,
    Recording,
    Timing,
)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if isinstance(value, list):
        return f"an array of {len(value)}"
    return "an object with keys " + ",".join(sorted(value)) if value else "an empty object"


def _found(obj: dict[str, Any], key: str) -> str:
    return _kind(obj[key]) if key in obj else "no such key"


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise RecordingNotFound(path) from None
    except IsADirectoryError:
        raise NotARecording(path, "it is a directory") from None
    except PermissionError:
        raise NotARecording(path, "it cannot be read (permission denied)") from None


class _LineReader:
    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, line: int, expected: str, found: str, field: str | None = None) -> MalformedLine:
        return MalformedLine(self.path, line, expected, found, field)

    def parse(self, raw: bytes, number: int) -> dict[str, Any]:
        if len(raw) > MAX_LINE_BYTES:
            raise self.fail(number, f"a line of at most {MAX_LINE_BYTES} bytes", f"{len(raw)} bytes")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            if number == 1:
                raise NotARecording(self.path, "line 1 is binary, not UTF-8 text") from None
            raise self.fail(number, "UTF-8 text", f"a byte that is not UTF-8 at offset {error.start}") from None
        if not text.strip():
            raise self.fail(number, "a JSON object", "an empty line")
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            if number == 1:
                raise NotARecording(self.path, f"line 1 is not JSON ({error.msg})") from None
            raise self.fail(number, "a JSON object", f"invalid JSON ({error.msg} at column {error.colno})") from None
        if not isinstance(value, dict):
            raise self.fail(number, "a JSON object", _kind(value))
        return value

    def header(self, obj: dict[str, Any]) -> Header:
        if obj.get("format") != FORMAT_NAME:
            raise NotARecording(self.path, f"line 1 has no \"format\": \"{FORMAT_NAME}\" header")
        version = obj.get("version")
        if type(version) is not int or version not in SUPPORTED_VERSIONS or version == LEGACY_VERSION:
            raise UnsupportedVersion(self.path, 1, version, SUPPORTED_VERSIONS)
        types = {
            "harness": str, "model": str, "provider": str, "recorded_at": str,
            "seed": int, "clock_origin_unix_nano": int, "script": list, "decisions": list,
        }
        for key, expected in types.items():
            value = obj.get(key)
            if value is not None and (type(value) is not expected):
                raise self.fail(1, f"{expected.__name__} or null", _kind(value), field=key)
        script = obj.get("script")
        if script is not None and not all(isinstance(line, str) for line in script):
            raise self.fail(1, "an array of strings", "an array with a non-string", field="script")
        return Header(version=version, **{key: obj.get(key) for key in types})

    def call(self, obj: dict[str, Any], number: int, index: int, legacy: bool) -> RecordedCall:
        if "format" in obj:
            raise self.fail(number, "a call line", "a second header line")
        if not legacy:
            if type(obj.get("call")) is not int:
                raise self.fail(number, "an integer", _kind(obj.get("call")), field="call")
            if obj["call"] != index:
                expected = f"call {index} (calls are numbered in order)"
                raise self.fail(number, expected, f"call {obj['call']}", field="call")
        request, response = obj.get("request"), obj.get("response")
        if not isinstance(request, dict):
            raise self.fail(number, "an object", _found(obj, "request"), field="request")
        if not isinstance(request.get("messages"), list):
            raise self.fail(number, "an array of messages", _kind(request.get("messages")), field="request.messages")
        if not isinstance(response, dict):
            raise self.fail(number, "an object", _found(obj, "response"), field="response")
        choices = response.get("choices")
        if not isinstance(choices, list) or not choices:
            raise self.fail(number, "a non-empty array", _kind(choices), field="response.choices")
        first = choices[0] if isinstance(choices[0], dict) else {"message": choices[0]}
        if not isinstance(first.get("message"), dict):
            raise self.fail(number, "an object", _found(first, "message"), field="response.choices[0].message")
        return RecordedCall(index, number, request, response, self.timing(obj, number))

    def timing(self, obj: dict[str, Any], number: int) -> Timing | None:
        if obj.get("timing") is None:
            return None
        timing = obj["timing"]
        if not isinstance(timing, dict):
            raise self.fail(number, "an object", _kind(timing), field="timing")
        for key in ("start_unix_nano", "duration_ns"):
            value = timing.get(key)
            if type(value) is not int or value < 0:
                raise self.fail(number, "a non-negative integer", _kind(value), field=f"timing.{key}")
        return Timing(timing["start_unix_nano"], timing["duration_ns"])

    def ending(self, obj: dict[str, Any], number: int) -> Ending:
        end = obj["end"]
        if not isinstance(end, dict):
            raise self.fail(number, "an object", _kind(end), field="end")
        expected = {"stop_reason": str, "model_calls": int, "transcript_sha256": str}
        for key, kind in expected.items():
            if type(end.get(key)) is not kind:
                raise self.fail(number, kind.__name__, _found(end, key), field=f"end.{key}")
        return Ending(end["stop_reason"], end["model_calls"], end["transcript_sha256"])


def load_recording(path: Path | str, *, allow_truncated: bool = False) -> Recording:
    """Read and check a whole recording. With `allow_truncated`, a last line cut short by a
    crash is dropped (and `truncated` is set) instead of raising `TruncatedRecording`."""
    path = Path(path)
    data = _read_bytes(path)
    if not data:
        raise NotARecording(path, "the file is empty")
    reader = _LineReader(path)
    raw_lines = data.split(b"\n")
    unterminated = raw_lines.pop()  # b"" when the file ends with a newline
    lines = [*raw_lines, unterminated] if unterminated else raw_lines

    header: Header | None = None
    calls: list[RecordedCall] = []
    ending: Ending | None = None
    truncated = False
    for number, raw in enumerate(lines, start=1):
        is_cut = bool(unterminated) and number == len(lines)
        try:
            obj = reader.parse(raw, number)
        except (MalformedLine, NotARecording):
            if not is_cut or number == 1:
                raise
            if not allow_truncated:
                raise TruncatedRecording(path, number, len(calls)) from None
            truncated = True
            break
        if number == 1:
            if "format" in obj:
                header = reader.header(obj)
                continue
            if "request" in obj or "response" in obj:
                header = Header(version=LEGACY_VERSION)
            else:
                raise NotARecording(path, "line 1 is neither a header nor a {request, response} line")
        if ending is not None:
            raise reader.fail(number, "nothing after the end line", "another line")
        if "end" in obj and header.version != LEGACY_VERSION:  # type: ignore[union-attr]
            ending = reader.ending(obj, number)
            continue
        legacy = header.version == LEGACY_VERSION  # type: ignore[union-attr]
        calls.append(reader.call(obj, number, len(calls) + 1, legacy))
    assert header is not None
    return Recording(path, header, calls, ending, truncated)


def load_records(path: Path | str, *, allow_truncated: bool = False) -> list[dict[str, Any]]:
    """The recorded calls as plain `{"request", "response"}` dicts, in order."""
    recording = load_recording(path, allow_truncated=allow_truncated)
    return [{"request": c.request, "response": c.response} for c in recording.calls]
