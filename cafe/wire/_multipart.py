"""A `multipart/form-data` body as its parts: read, each part changed, and written back byte for
byte around them, so that a recording scrubs an upload's form fields and files, and a replay
compares two uploads by their parts (their boundaries are random)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace

_BOUNDARY = re.compile(r"""(?i)(?:^|;)\s*boundary\s*=\s*(?:"([^"]+)"|([^\s;]+))""")
_HEAD_END = re.compile(rb"\r\n\r\n|\n\n")
_DISPOSITION_PARAMETER = re.compile(r"""(?i);\s*(name|filename)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;]+))""")


def boundary_of(content_type: str | None) -> str | None:
    """The boundary a `multipart/*` content type names, or None for any other body."""
    if not content_type or not content_type.strip().lower().startswith("multipart/"):
        return None
    found = _BOUNDARY.search(content_type)
    if found is None:
        return None
    return found.group(1) or found.group(2)


@dataclass(frozen=True)
class Part:
    """One part: `lead` is what comes after its delimiter up to its head (the line end), `head`
    its header lines and the blank line after them, `content` its bytes up to the line end
    before the next delimiter."""

    lead: bytes
    head: bytes
    content: bytes

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        for line in self.head.decode("latin-1").splitlines():
            key, colon, value = line.partition(":")
            if colon and key.strip().lower() == wanted:
                return value.strip()
        return None

    def disposition(self, parameter: str) -> str | None:
        """A `Content-Disposition` parameter (`name`, `filename`), or None."""
        found = self.header("content-disposition")
        if found is None:
            return None
        for match in _DISPOSITION_PARAMETER.finditer(found):
            if match.group(1).lower() == parameter:
                quoted = match.group(2)
                return re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else match.group(3)
        return None

    @property
    def name(self) -> str | None:
        return self.disposition("name")

    @property
    def filename(self) -> str | None:
        return self.disposition("filename")

    @property
    def content_type(self) -> str | None:
        return self.header("content-type")


@dataclass(frozen=True)
class Multipart:
    """A body split at its delimiters: what precedes the first (`preamble`), the parts, and
    the closing delimiter's tail with what follows it (`tail`, from its `--` on)."""

    delimiter: bytes
    preamble: bytes
    parts: tuple[Part, ...]
    tail: bytes | None

    def to_bytes(self) -> bytes:
        pieces = [self.preamble, *(part.lead + part.head + part.content + b"\r\n" for part in self.parts)]
        if self.tail is not None:
            pieces.append(self.tail)
        return self.delimiter.join(pieces)

    def with_parts(self, parts: tuple[Part, ...]) -> Multipart:
        return replace(self, parts=parts)


def read_multipart(body: bytes, boundary: str) -> Multipart | None:
    """`body` as its parts, or None when it is not a multipart body with this boundary (then
    it is kept and compared as bytes)."""
    delimiter = b"--" + boundary.encode("latin-1", "replace")
    pieces = body.split(delimiter)
    if len(pieces) < 2:
        return None
    preamble, rest = pieces[0], pieces[1:]
    tail = rest.pop() if rest[-1].startswith(b"--") else None
    parts = []
    for piece in rest:
        # Each part ends with the line end that belongs to the next delimiter.
        if not piece.endswith(b"\r\n"):
            return None
        piece = piece[:-2]
        lead_end = piece.find(b"\n") + 1
        if lead_end == 0:
            return None
        if piece.startswith(b"\r\n", lead_end):
            head_end = lead_end + 2  # a part without headers
        elif piece.startswith(b"\n", lead_end):
            head_end = lead_end + 1
        else:
            found = _HEAD_END.search(piece, lead_end)
            if found is None:
                return None
            head_end = found.end()
        parts.append(Part(piece[:lead_end], piece[lead_end:head_end], piece[head_end:]))
    return Multipart(delimiter, preamble, tuple(parts), tail)


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\[\]-]{0,63}")


def described_bytes(data: bytes) -> str:
    """Bytes as a mismatch names them: their size and digest, never their content."""
    return f"{len(data)} bytes (sha256 {hashlib.sha256(data).hexdigest()[:8]})"


def _described_text(value: str | None) -> str:
    if value is None:
        return "absent"
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"text({len(value)} chars, sha256 {digest})"


def _shown_name(name: str | None) -> str | None:
    """A form field's name as a mismatch shows it: a plain protocol word (`file`, `model`),
    holding no secret, as it is; anything else not at all."""
    from cafe.privacy import structure_scrubber

    if name is None or not _PLAIN_NAME.fullmatch(name) or structure_scrubber().scrub(name) != name:
        return None
    return name


def _shown_type(value: str | None) -> str:
    from cafe.privacy import structure_scrubber

    if value is None:
        return "absent"
    return repr(structure_scrubber().scrub(value[:60] + ("…" if len(value) > 60 else "")))


def parts_difference(recorded: Multipart, incoming: Multipart) -> tuple[str, str, str] | None:
    """Where two multipart bodies first differ, part by part (their count, then each part's
    name, filename, content type and content), both sides described without their content;
    None when they hold the same parts (their boundaries may differ)."""
    if len(recorded.parts) != len(incoming.parts):
        return "the multipart body's parts", f"{len(recorded.parts)} parts", f"{len(incoming.parts)} parts"
    for position, (was, now) in enumerate(zip(recorded.parts, incoming.parts, strict=True), start=1):
        shown = _shown_name(was.name)
        label = f"the multipart part {shown!r}" if shown is not None else f"the multipart part {position}"
        if was.name != now.name:
            label = f"the multipart part {position}"
            recorded_name, incoming_name = _shown_name(was.name), _shown_name(now.name)
            return (f"{label} (its name)",
                    repr(recorded_name) if recorded_name is not None else _described_text(was.name),
                    repr(incoming_name) if incoming_name is not None else _described_text(now.name))
        if was.filename != now.filename:
            return f"{label} (its filename)", _described_text(was.filename), _described_text(now.filename)
        if was.content_type != now.content_type:
            return f"{label} (its content type)", _shown_type(was.content_type), _shown_type(now.content_type)
        if was.content != now.content:
            return f"{label} (its content)", described_bytes(was.content), described_bytes(now.content)
    return None
