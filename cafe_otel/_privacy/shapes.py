"""What a value may look like under each key that may leave the process: one table.

Allowlisting keys is not enough: a third-party span can put a customer's sentence under
`error.type`, and a model or server controls what comes back as a response id, a model
name, a finish reason or a tool call id. So every allowlisted key has a declared shape
(a bounded length and a pattern, an enumeration, or an integer range), and
`MetadataOnlySpanProcessor` lets a value out only when it fits. A value that does not fit
is withheld and counted (an identifier is replaced by a keyed hash instead, so that the
spans it joins still join). The names of spans and events and the trace state have shapes
too. `markdown_table()` is the table the READMEs carry (a test checks that they do).

Free text (spaces, punctuation, more than a short word or two) fits none of these shapes.
A value that is itself one short identifier-like word can fit an identifier shape: that is
the price of keeping ids, models and tool names readable.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cafe.trace import ConsentOutcome
from cafe_otel import semconv as sc

INT, FLOAT, BOOL, TEXT, CONTENT = "int", "float", "bool", "text", "content"
DROP, HASH = "drop", "hash"
MAX_ITEMS = 32  # longest array a sequence-valued key may carry

ID_PATTERN = r"[A-Za-z0-9._:-]{1,64}"
TOKEN_PATTERN = r"[A-Za-z][A-Za-z0-9_.-]{0,31}"
IDENTIFIER_PATTERN = r"[A-Za-z_][A-Za-z0-9_.-]{0,63}"
MODEL_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}"
ERROR_TYPE_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}"
# A DNS name (labels of at most 63) or an IP address, v6 bracketed or not.
HOST_PATTERN = r"(?:(?:[A-Za-z0-9-]{1,63}\.){0,8}[A-Za-z0-9-]{1,63}|\[?[0-9A-Fa-f:.]{2,45}\]?)"
RPC_NAME_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9_.$/-]{0,127}"
# A span name is an operation and at most one target: `chat gpt-4o-mini`, `POST /v1/chat`.
# A URL's path without its query or fragment, in segments of plain characters: an address's
# user part (`@`), a query (`?`) or a space does not fit, so a path holding text is withheld.
URL_PATH_PATTERN = r"(?:/[A-Za-z0-9._~-]{0,64}){1,16}"
SPAN_NAME_PATTERN = r"[A-Za-z0-9_.:-]{1,64}(?: [A-Za-z0-9_.:/@+{}-]{1,128})?"
SCOPE_NAME_PATTERN = r"[A-Za-z0-9_.:/@-]{1,128}"
SCOPE_VERSION_PATTERN = r"[A-Za-z0-9_.+-]{1,64}"
SCHEMA_URL_PATTERN = r"https://opentelemetry\.io/schemas/[0-9.]{1,16}"
# OpenTelemetry's own entry: a sampling threshold and/or a random value, both hex.
_OT_PART = r"(?:th:[0-9a-f]{1,14}|rv:[0-9a-f]{14})"
TRACESTATE_OT_PATTERN = rf"{_OT_PART}(?:;{_OT_PART})?"
REDACTED_NAME = "redacted"  # what a span or event is called when its own name does not fit


@dataclass(frozen=True)
class Shape:
    """One key's shape. `kind` is int, float, text (a pattern and/or an enumeration) or
    content (free text, allowed only when content capture is on, scrubbed of secrets)."""

    kind: str
    pattern: str | None = None
    values: frozenset[str] = frozenset()
    minimum: float | None = None
    maximum: float | None = None
    many: bool = False  # an array of such values (at most MAX_ITEMS)
    on_mismatch: str = DROP
    fits: Callable[[Any], bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fits", self._checker())

    def _checker(self) -> Callable[[Any], bool]:
        """One compiled check per shape (the processor calls it for every attribute of every
        span, so it is a plain closure: `type(v) is int` also keeps bools out)."""
        if self.kind == TEXT:
            values, regex = self.values, re.compile(self.pattern) if self.pattern else None
            match = regex.fullmatch if regex is not None else (lambda text: None)

            def one(v: Any) -> bool:
                return type(v) is str and (v in values or match(v) is not None)
        elif self.kind == INT:
            low, high = self.minimum, self.maximum

            def one(v: Any) -> bool:
                return type(v) is int and low <= v <= high  # type: ignore[operator]
        elif self.kind == BOOL:

            def one(v: Any) -> bool:
                return type(v) is bool
        elif self.kind == FLOAT:
            low, high = self.minimum, self.maximum

            def one(v: Any) -> bool:
                return (type(v) is float or type(v) is int) and math.isfinite(v) and low <= v <= high  # type: ignore[operator]
        else:  # CONTENT: any text; secrets are scrubbed separately

            def one(v: Any) -> bool:
                return type(v) is str

        if not self.many:
            return one

        def many(v: Any) -> bool:
            return type(v) in (tuple, list) and 0 < len(v) <= MAX_ITEMS and all(one(item) for item in v)

        return many

    def describe(self) -> str:
        """The shape in words, for the README table."""
        if self.kind == INT:
            found = f"integer {int(self.minimum):,} to {int(self.maximum):,}"  # type: ignore[arg-type]
        elif self.kind == FLOAT:
            found = f"number {self.minimum:g} to {self.maximum:g}"
        elif self.kind == BOOL:
            found = "`true` or `false`"
        elif self.kind == CONTENT:
            found = "free text (JSON), only with content capture on; secrets scrubbed"
        else:
            parts = []
            if self.values:
                parts.append(" ".join(f"`{v}`" for v in sorted(self.values)))
            if self.pattern:
                parts.append(f"`^{self.pattern}$`")
            found = " or ".join(parts)
        if self.many:
            found = f"array (at most {MAX_ITEMS}) of: {found}"
        if self.on_mismatch == HASH:
            found += "; else a keyed hash `hmac:` + 16 hex"
        return found


def text_shape(pattern: str | None = None, values: frozenset[str] | set[str] | tuple[str, ...] = (), *,
               many: bool = False) -> Shape:
    """Text that fully matches `pattern` (a Python regular expression) or is one of `values`;
    `many`: an array of such (`configure(shapes={"myapp.tier": text_shape(values={"gold"})})`)."""
    if pattern is None and not values:
        raise ValueError("a text shape needs a pattern or values")
    return Shape(TEXT, pattern, frozenset(values), many=many)


def int_shape(low: int, high: int) -> Shape:
    """An integer from `low` to `high`, both included."""
    return Shape(INT, minimum=low, maximum=high)


def float_shape(low: float, high: float) -> Shape:
    """A finite number from `low` to `high`, both included."""
    return Shape(FLOAT, minimum=low, maximum=high)


def bool_shape() -> Shape:
    return Shape(BOOL)


def _text(pattern: str | None = None, values: frozenset[str] | set[str] = frozenset(), **options: Any) -> Shape:
    return Shape(TEXT, pattern, frozenset(values), **options)


def _int(low: int, high: int) -> Shape:
    return Shape(INT, minimum=low, maximum=high)


def _float(low: float, high: float) -> Shape:
    return Shape(FLOAT, minimum=low, maximum=high)


_ID = _text(ID_PATTERN, on_mismatch=HASH)
# Any agent's tool names: what its request defines, if it looks like a name.
_TOOL = _text(IDENTIFIER_PATTERN, {"unknown_tool"})
# A stop sequence is the caller's text: a short run of printable characters without a space
# (`###`, `</s>`, `END`) may leave; anything longer or with a space is withheld.
STOP_SEQUENCE_PATTERN = r"[!-~]{1,16}"
_SECONDS = _float(0, 86_400)
_TOKEN = _text(TOKEN_PATTERN)
_COUNT = _int(0, 2**31 - 1)
# The spec's enumeration (output messages) and the chat-completions values; other
# providers' raw values (end_turn, MAX_TOKENS) fit the short token pattern.
FINISH_REASONS = frozenset({"stop", "length", "content_filter", "tool_call", "tool_calls", "function_call",
                            "error"})
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
                          "QUERY", "_OTHER"})
OPERATION_NAMES = frozenset({sc.OP_CHAT, sc.OP_INVOKE_AGENT, sc.OP_EXECUTE_TOOL, "create_agent", "embeddings",
                             "generate_content", "text_completion"})

SHAPES: Mapping[str, Shape] = {
    sc.GEN_AI_OPERATION_NAME: _text(r"[a-z][a-z0-9_]{0,31}", OPERATION_NAMES),
    sc.GEN_AI_PROVIDER_NAME: _text(r"[a-z][a-z0-9_.-]{0,31}"),
    sc.GEN_AI_AGENT_NAME: _text(IDENTIFIER_PATTERN),
    sc.GEN_AI_CONVERSATION_ID: _ID,
    sc.GEN_AI_REQUEST_MODEL: _text(MODEL_PATTERN),
    sc.GEN_AI_REQUEST_TEMPERATURE: Shape(FLOAT, minimum=0, maximum=10),
    sc.GEN_AI_RESPONSE_MODEL: _text(MODEL_PATTERN),
    sc.GEN_AI_RESPONSE_ID: _ID,
    sc.GEN_AI_RESPONSE_FINISH_REASONS: _text(TOKEN_PATTERN, FINISH_REASONS, many=True),
    sc.GEN_AI_USAGE_INPUT_TOKENS: _COUNT,
    sc.GEN_AI_USAGE_OUTPUT_TOKENS: _COUNT,
    sc.GEN_AI_TOOL_NAME: _TOOL,
    sc.GEN_AI_TOOL_CALL_ID: _ID,
    sc.GEN_AI_TOOL_TYPE: _text(None, {sc.TOOL_TYPE_FUNCTION, "extension", "datastore"}),
    sc.GEN_AI_REQUEST_MAX_TOKENS: _COUNT,
    sc.GEN_AI_REQUEST_TOP_P: _float(0, 1),
    sc.GEN_AI_REQUEST_TOP_K: _float(0, 1_000_000),
    sc.GEN_AI_REQUEST_FREQUENCY_PENALTY: _float(-2, 2),
    sc.GEN_AI_REQUEST_PRESENCE_PENALTY: _float(-2, 2),
    sc.GEN_AI_REQUEST_STOP_SEQUENCES: _text(STOP_SEQUENCE_PATTERN, many=True),
    sc.GEN_AI_REQUEST_SEED: _int(-(2**63), 2**63 - 1),
    sc.GEN_AI_REQUEST_CHOICE_COUNT: _int(1, 128),
    sc.GEN_AI_REQUEST_STREAM: Shape(BOOL),
    sc.GEN_AI_OUTPUT_TYPE: _text(None, sc.OUTPUT_TYPES),
    sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: _SECONDS,
    sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: _COUNT,
    sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: _COUNT,
    sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: _COUNT,
    sc.GEN_AI_AGENT_ID: _ID,
    sc.GEN_AI_AGENT_VERSION: _text(SCOPE_VERSION_PATTERN),
    sc.OPENAI_API_TYPE: _text(r"[a-z][a-z0-9_]{0,31}"),
    sc.GEN_AI_REQUEST_ENCODING_FORMATS: _text(r"[a-z][a-z0-9_]{0,15}", many=True),
    sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT: _int(1, 1_000_000),
    sc.OPENAI_REQUEST_SERVICE_TIER: _TOKEN,
    sc.OPENAI_RESPONSE_SERVICE_TIER: _TOKEN,
    sc.OPENAI_RESPONSE_SYSTEM_FINGERPRINT: _ID,
    sc.ERROR_TYPE: _text(ERROR_TYPE_PATTERN),
    sc.SERVER_ADDRESS: _text(HOST_PATTERN),
    sc.SERVER_PORT: _int(0, 65535),
    sc.EXCEPTION_TYPE: _text(ERROR_TYPE_PATTERN),
    sc.CAFE_PHASE: _TOKEN,
    sc.CAFE_TURN: _int(0, 1_000_000),
    sc.CAFE_STOP_REASON: _TOKEN,
    sc.CAFE_SHIFT_TURNS: _int(0, 1_000_000),
    sc.CAFE_SHIFT_TICKETS: _int(0, 1_000_000),
    sc.CAFE_TOOL_STATUS: _TOKEN,
    sc.CAFE_CONSENT_OUTCOME: _text(None, {outcome.value for outcome in ConsentOutcome}),
    sc.GEN_AI_TOKEN_TYPE: _text(None, {sc.TOKEN_TYPE_INPUT, sc.TOKEN_TYPE_OUTPUT}),
    sc.CAFE_TICKET_NUMBER: _COUNT,
    sc.CAFE_GEN_AI_TOOL_CALLS: _text(IDENTIFIER_PATTERN, {"unknown_tool"}, many=True),
    sc.CAFE_RECORDING_VERSION: _int(0, 1_000),
    sc.CAFE_RECORDING_CALL: _COUNT,
    sc.HTTP_REQUEST_METHOD: _text(None, HTTP_METHODS),
    sc.HTTP_RESPONSE_STATUS_CODE: _int(100, 599),
    sc.HTTP_REQUEST_RESEND_COUNT: _int(1, 1_000),
    sc.URL_SCHEME: _text(r"[a-z][a-z0-9+.-]{0,15}"),
    sc.URL_PATH: _text(URL_PATH_PATTERN),
    sc.NETWORK_PROTOCOL_NAME: _text(r"[a-z][a-z0-9.-]{0,15}"),
    sc.NETWORK_PROTOCOL_VERSION: _text(r"[0-9][0-9.]{0,7}"),
    sc.RPC_SYSTEM: _text(r"[a-z][a-z0-9_.-]{0,31}"),
    sc.RPC_SERVICE: _text(RPC_NAME_PATTERN),
    sc.RPC_METHOD: _text(RPC_NAME_PATTERN),
    sc.RPC_GRPC_STATUS_CODE: _int(0, 16),
    **{key: Shape(CONTENT) for key in sorted(sc.CONTENT_ATTRIBUTES)},
}

# Not attributes, but they leave the process too.
SPAN_NAME = _text(SPAN_NAME_PATTERN)
EVENT_NAME = _text(None, sc.KNOWN_EVENT_NAMES)
SCOPE_NAME = _text(SCOPE_NAME_PATTERN)
SCOPE_VERSION = _text(SCOPE_VERSION_PATTERN)
SCHEMA_URL = _text(SCHEMA_URL_PATTERN)
TRACESTATE_OT = _text(TRACESTATE_OT_PATTERN)

FIELDS: tuple[tuple[str, str], ...] = (
    ("span name", f"`^{SPAN_NAME_PATTERN}$` (an operation and at most one target), else `{REDACTED_NAME}`"),
    ("event name", " ".join(f"`{name}`" for name in sorted(sc.KNOWN_EVENT_NAMES))
     + f", else `{REDACTED_NAME}` (its attributes shaped as below)"),
    ("span status", "the code only; the description is always removed"),
    ("trace state", f"only an `ot` entry matching `^{TRACESTATE_OT_PATTERN}$`; every other entry is removed"),
    ("link", "trace and span id; attributes shaped as below; its trace state reduced as above"),
    ("instrumentation scope", f"name `^{SCOPE_NAME_PATTERN}$` (else `{REDACTED_NAME}`), version "
     f"`^{SCOPE_VERSION_PATTERN}$` and schema URL `^{SCHEMA_URL_PATTERN}$` (else removed), a name or version "
     "holding a secret the same; attributes shaped as below"),
    ("resource", "what you configured (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`), `telemetry.sdk.*` "
     "and, outside replays, a random `service.instance.id`; an attribute whose key or value holds a secret, "
     "or whose `key=value` assigns one (`db.password=...`), is left out and counted"),
    ("ids, times, kind", "trace and span ids, timestamps, span kind, status code, dropped counts"),
    ("metric attributes", "our metrics': only the keys they declare, no ids, no free text; anyone else's "
     "instruments on our MeterProvider: a span's keys (never content). Each value shaped as below (a value that "
     "does not fit, or holds a secret, is left off the point and counted once; points then alike are merged)"),
    ("metric", "name, description and unit as the instrument gives them; a metric whose name holds a secret is "
     "left out, a description or unit holding one removed; exemplars never"),
)


def markdown_table() -> str:
    """The table docs/privacy.md carries: every field and key that may leave, with its shape."""
    rows = [*FIELDS, *((f"`{key}`", shape.describe()) for key, shape in SHAPES.items())]
    lines = ["| field or attribute | what may leave |", "|---|---|"]
    # A pattern's `|` would end the table cell.
    lines += [f"| {name} | {text.replace('|', chr(92) + '|')} |" for name, text in rows]
    return "\n".join(lines)
