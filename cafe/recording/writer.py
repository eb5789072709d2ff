"""Writing a recording: one line a call, flushed as it is written, scrubbed first.

The lines go to a new file beside the target, `PATH.partial`, created 0600 and never
opened if anything is already there (it holds customer conversations); the complete
recording is renamed to `PATH` in one step, so a reader, or a second recorder, never sees
half of one. Every line goes through `_encoded_line`, the one place that scrubs, so no
write path can skip it.

A call's line is written when the call ends, numbered by its start: while every line is the
next number, the file is the recording as it will be committed; the first line out of that
order turns the header's version to 3 (calls in the order they ended), and `commit` puts
the lines back in start order under the version 2 header before the rename. A wire
recording's first line that refers to the call before it (`extends`) turns 2 into 5 (and 3
into 6) the same way.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

import orjson

from cafe import _files
from cafe._files import check_owned, create_private, link_no_clobber, reason
from cafe.errors import Unwritable
from cafe.jsondata import json_document
from cafe.privacy import Scrubber
from cafe.recording import format as _format
from cafe.recording.errors import MalformedLine, RecordingDisabled, RecordingError, RecordingExists
from cafe.recording.format import (
    FORMAT_NAME,
    Ending,
    Header,
    Link,
    RecordedCall,
    Reference,
    SharedRequest,
    Timing,
    reference_digest,
    shares,
    sharing,
    unordered,
)
from cafe.recording.modes import RecordMode
from cafe.recording.reader import check_header

PARTIAL_SUFFIX = ".partial"
_WHAT = "the recording"
# Line fields the writer fills from constants, clocks, counters and digests: never text.
_FORMAT_VALUES = frozenset({"format", "version", "recorded_at", "clock_origin_unix_nano", "seed",
                            "call", "timing", "model_calls", "transcript_sha256", "extends"})
# How the writer's call line begins: its keys are sorted, and "call" sorts first.
_CALL_LINE_START = b'{"call":'


def partial_path(path: Path) -> Path:
    """Where a recording of `path` is written until it is complete."""
    return path.with_name(path.name + PARTIAL_SUFFIX)


# No whitespace between tokens: with sorted keys, nearly every line is then exactly what
# orjson writes for what it reads from it, which lets the reader prove a line strict by one
# comparison (see reader._decode_fast_held).
_COMPACT = (",", ":")
# The exact types of a line orjson writes byte for byte as `json.dumps(ensure_ascii=False,
# sort_keys=True, separators=_COMPACT)` does (an enum member, a UUID or a Fragment it writes
# where `json.dumps` refuses them; a subclass of these is not one of them).
_ORJSON_TYPES = frozenset((dict, list, str, int, float, bool, type(None)))
# orjson refuses to write a document nested deeper than this.
_ORJSON_DEPTH = 255


def _spelled_alike(value: Any) -> bool:
    """Whether orjson, with sorted keys, writes `value` exactly as the `json.dumps` call
    of `_serialise` does, or refuses it: plain JSON types only, and every float finite and
    one that `repr` writes without an exponent (0, or 1e-4 <= |x| < 1e16: there orjson
    writes the same shortest digits; outside, `1e-05` is orjson's `0.00001`, and `1e+16`
    its `1e16`). orjson itself refuses what it cannot write as `json.dumps` does: a lone
    surrogate, an integer beyond 64 bits, a key that is not a string, too deep a nesting.
    Walked a level at a time in C: `gc.get_referents` of a level's dicts and lists is their
    values and items (and a dict's keys when one is not a plain string)."""
    level = [value]
    for _ in range(_ORJSON_DEPTH + 1):
        if not level:
            return True
        kinds = set(map(type, level))
        if not kinds <= _ORJSON_TYPES:
            return False
        if float in kinds and not all(item == 0.0 or 1e-4 <= abs(item) < 1e16
                                      for item in level if type(item) is float):
            return False  # NaN and the infinities fail both comparisons too
        level = gc.get_referents(*level)
    return False


def _orjson_line(obj: dict[str, Any]) -> bytes | None:
    """`obj` serialised in C, the bytes `json.dumps` would write, or None where they may differ."""
    if not _spelled_alike(obj):
        return None
    try:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return None


def holds_recording(path: Path) -> bool:
    """Whether the file's first line is a cafe recording header or a plain call line. The line
    is read as far as the reader reads one: a header holds the whole script, and one cut
    shorter would not be JSON, its recording taken for a file any output may replace."""
    try:
        with open(path, "rb") as source:
            first = source.readline(_format.MAX_LINE_BYTES + 1)
    except OSError:
        return False
    try:
        value = json.loads(first)
    except ValueError:
        return False
    return isinstance(value, dict) and (
        value.get("format") == FORMAT_NAME or ("request" in value and "response" in value)
    )


def check_target(path: Path, mode: RecordMode) -> None:
    """Refuse, before anything is recorded, a path this recording may not end up at: only
    a new name, or (mode `all`) a regular file of our own, is ever replaced."""
    if mode is RecordMode.NONE:
        raise RecordingDisabled(path)
    found = _files.check_target(path, _WHAT)
    if found is None:
        return
    if mode is RecordMode.ONCE:
        raise RecordingExists(path)
    check_owned(path, found, _WHAT)
    if found.st_size and not holds_recording(path):
        # Re-recording replaces a recording; a mistyped path must not replace notes or code.
        raise Unwritable(path, "the file there is not a cafe recording, and re-recording replaces "
                               "only a recording (choose another path)", what=_WHAT)


def _check_readable(path: Path, header: Header) -> None:
    """Refuse, before anything is created, a header the reader would refuse (a seed beyond
    64 bits, a turn cap over 1,000,000): its recording could never be replayed."""
    line = header.to_json()
    try:
        json.dumps(line, allow_nan=False)
    except (TypeError, ValueError):
        return  # not JSON at all: writing the line refuses it, with its own message
    try:
        check_header(path, line)
    except MalformedLine as error:
        raise RecordingError(f"{path}: nothing recorded: {error.field}: a recording's header holds "
                             f"{error.expected}, not {error.found}") from None


def _wholes_scrubbed(obj: dict[str, Any], scrubber: Scrubber) -> dict[str, Any]:
    """A call line with its exchange's stream and bodies scrubbed as wholes: a secret cut
    across a stream's chunks, or held in bytes that are not text, is found by no string's
    scrub (`cafe.wire._scrub`). A line with neither is returned as it is."""
    exchange = obj.get("exchange")
    if not isinstance(exchange, dict) or all(exchange.get(key) is None for key in ("stream", "request_body", "body")):
        return obj
    from cafe.wire._scrub import scrubbed_exchange

    scrubbed = scrubbed_exchange(exchange, scrubber)
    return obj if scrubbed is exchange else {**obj, "exchange": scrubbed}


def _create_partial(path: Path) -> IO[bytes]:
    partial = partial_path(path)
    try:
        descriptor = create_private(partial, _WHAT, target=path)
    except FileExistsError:
        raise Unwritable(
            path, f"{partial} exists: another recording of it is in progress, or an earlier one "
                  f"was interrupted and left its calls there (look at them with `cafe view {partial} "
                  f"--allow-truncated -o calls.html`, replay them with `cafe replay-run {partial} "
                  f"--allow-truncated -- <program>`, or remove it)", what=_WHAT
        ) from None
    return os.fdopen(descriptor, "wb", buffering=0)  # written a whole line a call (`_append`)


class RecordingWriter:
    """Writes a recording to `PATH.partial` (created 0600, never an existing file), one
    flushed line at a time, and moves it to `PATH` in one rename when it is complete
    (`commit`, `close`). Until then `PATH` keeps whatever it held; a recorder that is
    killed leaves `PATH.partial` with its complete lines."""

    def __init__(
        self,
        path: Path | str,
        header: Header,
        *,
        mode: RecordMode | str = RecordMode.ONCE,
        scrubber: Scrubber | None = None,
        durable: bool = False,
        share: bool = False,
    ) -> None:
        self.path = Path(path)
        self.partial = partial_path(self.path)
        self._mode = RecordMode.parse(mode)
        self._scrubber = scrubber or Scrubber.from_environment()
        self._durable = durable
        _check_readable(self.path, header)
        check_target(self.path, self._mode)
        self._header = header
        self._file = _create_partial(self.path)
        self._size = 0  # bytes of whole lines written
        self.calls = 0
        self.lines = 0
        self.committed = False
        # The number the next call line must hold for the file to stay in start order.
        self._next_in_order = 1
        self.in_start_order = True
        # Versions 4 to 6, and `share`: the call line written last, which the next request
        # may extend. A recording written with `share` under a version that holds every
        # request whole (2) turns to its version with references (5) at its first reference,
        # so one in which no request extends another stays readable by every reader of 2.
        self._shares = share or shares(header.version)
        self._last: _Written | None = None
        try:
            self._header_line = self._encoded_line(header.to_json(), None, "line 1")
            self._append(self._header_line, "line 1")
        except BaseException:
            self.abort()
            raise

    def _serialise(self, obj: dict[str, Any], where: str) -> bytes:
        fast = _orjson_line(obj)
        if fast is not None:
            return fast
        try:
            text = json.dumps(obj, ensure_ascii=False, sort_keys=True, allow_nan=False, separators=_COMPACT)
        except ValueError:
            raise RecordingError(
                f"{self.path}: {where} cannot be recorded: it holds NaN or an "
                "infinite number, which JSON cannot represent"
            ) from None
        except TypeError as error:
            raise RecordingError(
                f"{self.path}: {where} cannot be recorded: {error}"
            ) from None
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate (from a `\ud800` escape) has no UTF-8 form: keep it escaped.
            text = json.dumps(obj, ensure_ascii=True, sort_keys=True, allow_nan=False, separators=_COMPACT)
            return text.encode("ascii")

    def _encoded_line(self, obj: dict[str, Any], scrubber: Scrubber | None, where: str,
                      written: list[dict[str, Any]] | None = None) -> bytes:
        """The one place a line is made: serialised, its strings scrubbed, checked against the
        reader's bound. `scrubber` (one made by `with_literals` from this writer's) also
        scrubs the secrets of this line's own request; `where` names the line in an error;
        `written`, when given, gets the line's object as written."""
        scrubber = scrubber or self._scrubber
        obj = _wholes_scrubbed(obj, scrubber)
        data = self._serialise(obj, where)
        if scrubber.may_need_scrubbing(data):
            obj = self._scrub_line(obj, scrubber)
            data = self._serialise(obj, where)
        if written is not None:
            written.append(obj)
        limit = _format.MAX_LINE_BYTES
        if len(data) > limit:
            # The reader refuses such a line: written, it would make a recording no replay reads.
            raise RecordingError(f"{self.path}: {where} cannot be recorded: its line would be {len(data)} bytes, "
                                 f"longer than a recording's line may be (at most {limit} bytes)")
        return data

    def _append(self, data: bytes, where: str) -> None:
        """Write one made line whole (and fsync it when durable). A line that cannot be
        written whole (the disk is full, a quota or file size limit is reached) is cut off
        again, so the file holds whole lines only and a later line may still be written."""
        line = memoryview(data + b"\n")
        descriptor = self._file.fileno()
        try:
            while line:
                line = line[os.write(descriptor, line):]
            if self._durable:
                os.fsync(descriptor)
        except OSError as error:
            with contextlib.suppress(OSError):
                os.ftruncate(descriptor, self._size)
                os.lseek(descriptor, self._size, os.SEEK_SET)
            raise RecordingError(f"{self.path}: {where} could not be written to {self.partial} "
                                 f"({reason(error)})") from None
        self._size += len(data) + 1
        self.lines += 1

    def _write_line(self, obj: dict[str, Any], scrubber: Scrubber | None = None) -> None:
        where = f"line {self.lines + 1}"
        self._append(self._encoded_line(obj, scrubber, where), where)

    def _rewrite_header(self, header: Header, change: str) -> None:
        """Write `header` over line 1 in place: only its version's digit differs from the
        line there. `change` says what it marks, in an error."""
        line = self._encoded_line(header.to_json(), None, "line 1")
        if len(line) != len(self._header_line):  # pragma: no cover - a version is one digit
            raise RecordingError(f"{self.path}: the header cannot be {change} in place")
        try:
            os.pwrite(self._file.fileno(), line, 0)
            if self._durable:
                os.fsync(self._file.fileno())
        except OSError as error:
            raise RecordingError(f"{self.path}: line 1 could not be written to {self.partial} "
                                 f"({reason(error)})") from None

    def _leave_start_order(self) -> None:
        """Turn the header's version to 3 (or 6) before the first line out of start order is
        written, so that no reader takes the file for a recording in start order."""
        self._rewrite_header(replace(self._header, version=unordered(self._header.version)), "marked unordered")
        self.in_start_order = False

    def _begin_sharing(self) -> None:
        """Turn the header's version to the one with references (2 to 5, 3 to 6) before the
        first line that holds one is written."""
        header = replace(self._header, version=sharing(self._header.version))
        shown = header if self.in_start_order else replace(header, version=unordered(header.version))
        self._rewrite_header(shown, "given references")
        self._header, self._header_line = header, self._encoded_line(header.to_json(), None, "line 1")

    def _scrub_line(self, obj: dict[str, Any], scrubber: Scrubber) -> dict[str, Any]:
        """Every string value scrubbed but the format's own: the values the writer makes
        from numbers and hashes, which a pattern or a short key could only damage."""
        scrubbed = {}
        for key, value in obj.items():
            if key in _FORMAT_VALUES:
                scrubbed[key] = value
            elif key == "decisions" and isinstance(value, list):
                # A decision's kind is protocol (approve, reject, edit); its payload is text.
                scrubbed[key] = [[d[0], *scrubber.scrub_json(d[1:])] if isinstance(d, list) and d
                                 else scrubber.scrub_json(d) for d in value]
            elif key == "end" and isinstance(value, dict):
                scrubbed[key] = {k: v if k in _FORMAT_VALUES else scrubber.scrub_json(v)
                                 for k, v in value.items()}
            else:
                scrubbed[key] = scrubber.scrub_json(value)
        return scrubbed

    def scrubbed(self, value: Any) -> Any:
        """`value` as it would read back from this recording: serialised and scrubbed."""
        return self._scrubber.scrub_json(json_document(value))

    def extendable(self, number: int, array: str, scrubber: Scrubber | None = None) -> int | None:
        """The number of the call whose `array` a request of call `number` may extend
        (`write_call`'s `extends`): the call line written last, when this recording may hold
        references (its version, or `share`), that call started earlier, its line was
        scrubbed as this one is (with the same credentials: then the items they share are
        stored alike), and it extended no other array. None: write it whole."""
        last = self._last
        if last is None or last.number >= number or last.scrubber is not (scrubber or self._scrubber):
            return None
        return last.number if last.extends_only(array) else None

    def write_call(self, request: dict[str, Any] | None, response: dict[str, Any] | None, timing: Timing | None,
                   exchange: dict[str, Any] | None = None, *, scrubber: Scrubber | None = None,
                   number: int | None = None, where: str | None = None,
                   extends: tuple[str, int] | None = None) -> None:
        """One call's line; `scrubber`, made by `with_literals` from this writer's, also
        scrubs secrets of this call alone (the API key its request carried). `number` is the
        call's number in start order (default: the next one); a line written out of that
        order makes the file version 3 (or 6) until `commit` orders it. `where` names the call
        in an error (default: its line).

        `extends` (array, count): the request repeats the request of the call `extendable`
        names, but for its array `array`, of which it keeps the first `count` items and
        adds those `request[array]` holds (`request` holds only those, and the members whose
        value differs from that call's): the line holds them and a `Reference` to that call,
        so nothing recorded is written or scanned again."""
        number = self._next_in_order if number is None else number
        where = where or f"line {self.lines + 1}"
        scrubber = scrubber or self._scrubber
        reference = None
        base = None
        if extends is not None and request is not None:
            if not self._shares:
                raise RecordingError(f"{self.path}: {where} cannot be recorded: it extends a call, and this "
                                     f"recording's version ({self._header.version}) holds every request whole")
            base_number = self.extendable(number, extends[0], scrubber)
            if base_number is None or self._last is None:
                raise RecordingError(f"{self.path}: {where} cannot be recorded: it extends a call this recording "
                                     "cannot refer to")
            base = self._last.shared(extends[0])
            array, count = extends
            count = min(count, base.length)
            reference = Reference(base_number, array, count, reference_digest(base.members, base.chain_at(count)))
        # Counted once written: a call whose line failed is not among those kept.
        # `loaded`: `request` is the line's own part when it refers to an earlier call's.
        call = RecordedCall.loaded(number, self.lines + 1, request, response, timing,  # type: ignore[arg-type]
                                   None, None, exchange=exchange, reference=reference)
        line = call.to_json()
        data, written = self._encoded_call(line, scrubber, where)
        if number != self._next_in_order and self.in_start_order:
            self._leave_start_order()
        if reference is not None and not shares(self._header.version):
            self._begin_sharing()
        self._append(data, where)
        if number == self._next_in_order:
            self._next_in_order += 1
        self.calls += 1
        if self._shares:
            stored = written.get("request")
            self._last = _Written(number, stored if isinstance(stored, dict) else None, scrubber,
                                  base if reference is not None else None, reference)

    def _encoded_call(self, line: dict[str, Any], scrubber: Scrubber, where: str) -> tuple[bytes, dict[str, Any]]:
        """A call line made (`_encoded_line`), and the line as written (scrubbed if it was)."""
        kept: list[dict[str, Any]] = []
        data = self._encoded_line(line, scrubber, where, kept)
        return data, kept[0] if kept else line

    def write_end(self, ending: Ending) -> None:
        self._write_line(ending.to_json())

    def commit(self) -> None:
        """The recording is complete: make it `PATH` in one rename (mode `all` replaces
        what is there; mode `once` never does)."""
        if self.committed or self._file.closed:
            return
        try:
            os.fsync(self._file.fileno())  # the rename must not outlive the lines it publishes
            self._file.close()
            if not self.in_start_order:
                self._put_in_start_order()
        except OSError as error:
            raise RecordingError(f"{self.path}: the recording could not be completed in {self.partial} "
                                 f"({reason(error)})") from None
        try:
            if self._mode is RecordMode.ALL:
                os.replace(self.partial, self.path)
            else:
                link_no_clobber(self.partial, self.path)
        except FileExistsError:
            raise RecordingExists(self.path, kept=self.partial) from None
        except IsADirectoryError:
            raise Unwritable(self.path, f"it is a directory (kept at {self.partial})", what=_WHAT) from None
        except OSError as error:
            raise Unwritable(self.path, f"{reason(error)} (kept at {self.partial})", what=_WHAT) from None
        self.committed = True

    def _put_in_start_order(self) -> None:
        """Replace `PATH.partial` by its lines in start order under the version 2 header:
        the recording every reader reads. Written beside it and renamed over it, so the
        partial is whole at every moment; an end line stays last."""
        placed: list[tuple[int, int, int]] = []  # (call number, offset, length) of each call line
        ends: list[tuple[int, int]] = []
        with open(self.partial, "rb") as source:
            offset = len(source.readline())
            for line in source:
                if line.startswith(_CALL_LINE_START):
                    number = int(line[len(_CALL_LINE_START):line.index(b",", len(_CALL_LINE_START))])
                    placed.append((number, offset, len(line)))
                else:
                    ends.append((offset, len(line)))
                offset += len(line)
            placed.sort()
            descriptor, temporary = tempfile.mkstemp(dir=self.partial.parent, prefix=f".{self.partial.name}.",
                                                     suffix=".ordering")
            try:
                with os.fdopen(descriptor, "wb") as ordered:
                    ordered.write(self._header_line + b"\n")
                    for start, length in [(start, length) for _, start, length in placed] + ends:
                        source.seek(start)
                        ordered.write(source.read(length))
                    ordered.flush()
                    os.fsync(ordered.fileno())
                os.replace(temporary, self.partial)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)
                raise
        self.in_start_order = True

    def abort(self) -> Path | None:
        """The recording did not finish: `PATH` is left as it was. The partial file is kept
        (and returned) when it holds at least one call, else removed."""
        if not self._file.closed:
            with contextlib.suppress(OSError):
                self._file.close()
        if self.committed:
            return None
        if self.calls:
            return self.partial
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.partial)
        return None

    def close(self) -> None:
        self.commit()


class _Written:
    """The call line a writer wrote last, as a later request that extends it needs it: its
    request as written (scrubbed), and, made when a request first extends it, its members and
    the links of its array (`SharedRequest`), from the request it extended where it did."""

    __slots__ = ("_base", "_reference", "_request", "_shared", "number", "scrubber")

    def __init__(self, number: int, request: dict[str, Any] | None, scrubber: Scrubber,
                 base: SharedRequest | None, reference: Reference | None) -> None:
        self.number, self.scrubber = number, scrubber
        self._request, self._base, self._reference = request or {}, base, reference
        self._shared: SharedRequest | None = None

    def extends_only(self, array: str) -> bool:
        """Whether its line extends no array but `array` (a chain of references keeps one)."""
        return self._reference is None or self._reference.array == array

    def shared(self, array: str) -> SharedRequest:
        """Its request's members and array links, for a request that extends its `array`."""
        if self._shared is not None and self._shared.array == array:
            return self._shared
        request, reference, base = self._request, self._reference, self._base
        items = request.get(array)
        added = items if isinstance(items, list) else []
        own = {key: value for key, value in request.items() if key != array}
        if reference is not None and base is not None and reference.array == array:
            shared = SharedRequest(array, {**base.members, **own}, base.link_at(reference.count).extended(added))
        else:
            shared = SharedRequest(array, own, Link.of(added))
        self._shared = shared
        return shared


def _iso(unix_nano: int) -> str:
    seconds, nanos = divmod(unix_nano, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{nanos // 1000:06d}Z"


def _harness_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"cafe {version('cafe-otel')}"
    except PackageNotFoundError:
        return "cafe (unpackaged)"
