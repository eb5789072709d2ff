"""Where cafe finds secrets: the one source of the secret patterns, used by the recorder,
the replay, `cafe check-recording`, the pages, `cafe export` and `cafe_otel` alike.

`Scrubber` is applied to every string value of every line before it is written. Secrets live
in text, so only JSON string values are scrubbed: object keys, numbers, booleans and nulls are
structure and are never rewritten. Since the line is re-serialised from the scrubbed value, no
replacement can break its JSON. `structure_scrubber` is the default patterns alone, for what is
structure where it is shown; `scrubbed` is a recording as a page or an export shows it;
`holds_secret` says whether a value holds one of a client's known secrets.

A keyed secret is caught in three forms: as the string value of a key such as
`"Authorization"` or `"api_key"`, as an escaped key inside a string (tool-call arguments are
JSON inside a string: `{"api_key": "..."}` there), and as `Authorization: Basic ...` or
`export OPENAI_API_KEY=...` in free text. All the patterns run as one alternation, in one pass
over each string. A line whose serialised text holds none of the patterns' keywords (and no
piece of a known secret) cannot hold anything to scrub and is written as it is, without
walking it. Extra patterns come from the caller or from `CAFE_SCRUB_PATTERNS` (one regular
expression per line); a pattern whose keywords are not known makes every line walk.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cafe.recording.errors import RecordingError
    from cafe.recording.format import Header, RecordedCall, Recording

REDACTED = "[REDACTED]"
ENV_PATTERNS = "CAFE_SCRUB_PATTERNS"
# A known secret (a live client's API key) is scrubbed wherever it occurs in text; a very
# short one would match ordinary words and tool names and leave a recording that cannot be
# replayed. Live settings refuse a key shorter than this.
MIN_SECRET_CHARS = 8

_STRING_VALUE = r'"([^"\\]*(?:\\.[^"\\]*)*)"'  # a JSON string's body
_ESCAPED_VALUE = r'\\+"((?:[^"\\]|\\(?!\\*"))*)\\+"'  # a string's body inside a JSON string
_TEXT_VALUE = r"((?:[A-Za-z][\w-]*[ \t]+)?[^\s\"'\\,;&}]{4,})"  # `Scheme token` or `token`
# An assigned value (`NAME=value`, `NAME: "value"`, `export NAME='value'`): one run of
# characters, its quote (escaped too, inside JSON text) left out.
_ASSIGNED_VALUE = r"""(?:\\*["'])?([^\s"'\\,;&}<>]{4,})"""

# Where a key may start: anywhere but inside a longer word. `_`, `-`, `.`, `/`, `=`, a quote,
# JSON's `\n`-style escapes and a URL's `%XX` escapes glue it to what comes before
# (`deploy_sk-proj-...`, `token_ghp_...`, `"line\nsk-..."` in a tool call's arguments,
# `?q=%22sk-...%22`), and do not hide it.
_START = r"(?:(?<![A-Za-z0-9])|(?<=\\[nrtbf])|(?<=%[0-9A-Fa-f]{2}))"

_AUTHORIZATION = r"(?:proxy-)?authorization"
_API_KEY = r"(?:x-)?api[_-]?key"
_CREDENTIAL = (r"(?:password|passwd|client[_-]secret|secret[_-]key|access[_-]token"
               r"|refresh[_-]token)")
# A name that holds a secret when something is assigned to it: standing alone or ending a
# longer name (`OPENAI_API_KEY`, `aws_secret_access_key`, `DB_PASSWORD`)...
_SECRET_NAME = (r"(?:api[_-]?key|apikey|(?:secret|access|private|auth|master|signing|encryption)[_-]key"
                r"|account[_-]?key|subscription[_-]?key"
                r"|client[_-]secret|password|passwd|(?:access|refresh|auth|api|session|bot|id)[_-]token)")
# ... and the words that do so only as the last part of a longer name (`GITHUB_TOKEN`,
# `deploy.secret`, `db-pass`): alone, "secret" and "token" are words of a café's
# conversation ("our secret: cinnamon").
_SECRET_SUFFIX = r"(?:token|secret|pass|pwd|credentials?)"
_ASSIGNED_NAME = rf"(?:{_START}{_SECRET_NAME}|(?<=[A-Za-z0-9][_.-]){_SECRET_SUFFIX})"
# An object key whose string value is a secret, whatever the value looks like.
_SECRET_KEY = re.compile(rf"(?i){_AUTHORIZATION}|{_API_KEY}|(?:[\w.-]*[_.-])?{_SECRET_NAME}"
                         rf"|[\w.-]*[A-Za-z0-9][_.-]{_SECRET_SUFFIX}")


def _keyed(kind: str, key: str, text_value: str = _ASSIGNED_VALUE) -> list[tuple[str, str]]:
    return [
        (kind, rf'(?i)"{key}"\s*:\s*{_STRING_VALUE}'),
        (kind, rf'(?i)\\+"{key}\\+"\s*:\s*{_ESCAPED_VALUE}'),
        (kind, rf"(?i)(?<![\w-]){key}\s*[:=]\s*{text_value}"),
    ]


# The names of a URL's query parameters that carry a credential: any named like a key, a token,
# a secret, a password, a credential, a session or a signature (`key`, `access_token`,
# `X-Amz-Security-Token`, `X-Amz-Credential`, `X-Amz-Signature`, `X-Goog-Signature`, CloudFront's
# `Signature` and `Key-Pair-Id`, Azure SAS's `sig`), and the credentials whose names hold no such
# word: Azure Functions' and OAuth's `code`, CloudFront's `Policy`, `hmac`, OAuth's
# `client_assertion` and `code_verifier`, SAML's messages, CAS's `ticket`, `otp`, `jwt`, `auth`.
URL_CREDENTIAL_NAMES = (r"(?:[\w.-]*[_.-])?(?:sig|signature|key|token|secret|password|passwd|pwd|credentials?"
                        r"|session)|key-pair-id|code|policy|hmac|(?:client[_-])?assertion|code[_-]verifier"
                        r"|saml(?:request|response)|ticket|otp|jwt|auth")

# (provider, key) of the `provider key` pattern: each key starts with its provider's prefix.
_PREFIXED_KEYS: tuple[tuple[str, str], ...] = (
    ("model provider key", r"(?:gsk_|xai-|pplx-|r8_|api_org_)[A-Za-z0-9]{20,}"),
    ("google oauth secret", r"(?:GOCSPX-[A-Za-z0-9_\-]{20,}|ya29\.[A-Za-z0-9_\-]{20,})"),
    ("azure client secret", r"[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.\-]{31,34}"),
    ("alibaba access key", r"LTAI[A-Za-z0-9]{20}(?![A-Za-z0-9])"),
    ("digitalocean token", r"do[opr]_v1_[a-f0-9]{64}"),
    ("vault token", r"(?:hv[sb]\.[A-Za-z0-9_\-]{24,}|[a-z0-9]{14}\.atlasv1\.[a-z0-9_=\-]{60,})"),
    ("twilio key", r"SK[0-9a-fA-F]{32}(?![0-9a-fA-F])"),
    ("sendgrid key", r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
    ("mail service key", r"(?:key-[a-f0-9]{32}(?![a-f0-9])|xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16})"),
    ("shopify token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    ("stripe webhook secret", r"whsec_[A-Za-z0-9]{24,}"),
    ("databricks token", r"dapi[a-f0-9]{32}(?:-[0-9])?"),
    ("doppler token", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}"),
    ("grafana token", r"(?:glc_[A-Za-z0-9+/]{32,}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})"),
    ("linear key", r"lin_api_[A-Za-z0-9]{40}"),
    ("postman key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
    ("sentry token", r"sntry[su]_[A-Za-z0-9+/=_\-]{30,}"),
    ("new relic key", r"NR(?:AK|JS|II)-[A-Za-z0-9]{20,}"),
    ("planetscale token", r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9=._\-]{32,}"),
    ("pulumi token", r"pul-[a-f0-9]{40}"),
    ("1password token", r"ops_eyJ[A-Za-z0-9+/]{100,}={0,3}"),
    ("square token", r"sq0(?:atp|csp)-[A-Za-z0-9_\-]{22,}"),
    ("age secret key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    ("dynatrace token", r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}"),
    ("atlassian token", r"ATATT3[A-Za-z0-9_\-=]{100,}"),
    ("notion token", r"(?:secret_[A-Za-z0-9]{43}|ntn_[0-9]{11}[A-Za-z0-9]{35})(?![A-Za-z0-9])"),
)


# (name, pattern). A pattern with a group replaces only the group, keeping JSON keys.
# The provider families are those a secret scanner looks for by default (docs/privacy.md).
DEFAULT_SECRET_PATTERNS: tuple[tuple[str, str], ...] = (
    # Only an authorization header's value has a scheme (`Basic ...`). Any other value is one run
    # of characters, so that in `password: hunter2 api_key: ...` it ends before the next name.
    *_keyed("authorization header", _AUTHORIZATION, _TEXT_VALUE),
    *_keyed("api-key field", _API_KEY),
    *_keyed("credential field", _CREDENTIAL),
    # `NAME=value`, `NAME: value`, `export NAME="value"`, and a JSON key's value (`"DB_PASSWORD":
    # "..."`, escaped too), for every name that says it holds a secret.
    ("secret assignment", rf'(?i){_ASSIGNED_NAME}"\s*:\s*{_STRING_VALUE}'),
    ("secret assignment", rf'(?i){_ASSIGNED_NAME}\\+"\s*:\s*{_ESCAPED_VALUE}'),
    # `:=`, `=>`, `<NAME>value`, `%3D` (a query string) and a name closing a subscript
    # (`os.environ['OPENAI_API_KEY'] = "..."`) assign too.
    ("secret assignment", rf"(?i){_ASSIGNED_NAME}(?:\\*[\"']\])?\s*(?::=|=>|[:=>]|%3d)\s*{_ASSIGNED_VALUE}"),
    # A command line's option: `--api-key VALUE`, `--github-token VALUE`, `--password VALUE`.
    ("secret option", rf"(?i)(?<![\w-])--(?:[a-z0-9]+-)*(?:{_SECRET_NAME}|{_SECRET_SUFFIX})[ \t]+{_ASSIGNED_VALUE}"),
    # OpenAI (sk-, sk-proj-, sk-svcacct-, sk-admin-) and Anthropic (sk-ant-) keys.
    ("openai-style key", rf"{_START}sk-[A-Za-z0-9_\-]{{12,}}"),
    ("bearer token", rf"(?i){_START}bearer\s+([A-Za-z0-9._~+/=\-]{{8,}})"),
    # Base64 of `user:password`: a digit, `+`, `/` or padding sets it apart from a word.
    ("basic auth", rf"(?i){_START}basic\s+((?=[A-Za-z]*[0-9+/=])[A-Za-z0-9+/]{{12,}}={{0,2}})"),
    ("url credentials", r"://[^\s/:@\"'\\]+:([^\s/@\"'\\]{3,})@"),  # https://user:password@host
    ("aws access key", rf"{_START}(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{{16}}(?![A-Z0-9])"),
    ("github token", rf"{_START}(?:gh[pousr]_[A-Za-z0-9]{{20,}}|github_pat_[A-Za-z0-9_]{{22,}})"),
    ("gitlab token", rf"{_START}gl(?:pat|ptt|dt|rt|soat|cbt|imt|ft|agent)-[A-Za-z0-9_\-]{{20,}}"),
    ("slack token", rf"{_START}(?:xox[abeoprs]-[A-Za-z0-9\-]{{10,}}|xapp-[0-9]-[A-Za-z0-9\-]{{10,}})"),
    ("slack webhook", r"(?i)hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_\-]{20,}"),
    ("google api key", rf"{_START}AIza[A-Za-z0-9_\-]{{35}}"),
    ("stripe key", rf"{_START}[sr]k_(?:live|test|prod)_[A-Za-z0-9]{{10,}}"),
    ("hugging face token", rf"{_START}hf_[A-Za-z0-9]{{30,}}"),
    ("npm token", rf"{_START}npm_[A-Za-z0-9]{{36,}}"),
    ("pypi token", rf"{_START}pypi-AgE[A-Za-z0-9_\-]{{40,}}"),
    ("json web token", rf"{_START}eyJ[A-Za-z0-9_\-]{{10,}}\.eyJ[A-Za-z0-9_\-]{{10,}}\.[A-Za-z0-9_\-]*"),
    # Further providers' keys with a prefix of their own, as a secret scanner's default rules
    # name them (model providers, clouds, the services an agent's tools call): one alternative
    # for all of them, so that each place in a text is tried once, not once a provider.
    ("provider key", rf"{_START}(?:{'|'.join(body for _, body in _PREFIXED_KEYS)})"),
    ("azure sas signature", r"(?i)[?&]sig=([A-Za-z0-9%+/=_\-]{20,})"),
    # A URL's query parameter that carries a credential (`URL_CREDENTIAL_NAMES`), also in text.
    ("url credential", rf"(?i)[?&;](?:{URL_CREDENTIAL_NAMES})(?:=|%3d)([^\s&#\"'<>\\]{{8,}})"),
    ("discord webhook", r"(?i)discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_\-]{20,}"),
    ("private key", r"-----BEGIN[A-Z ]* PRIVATE KEY(?: BLOCK)?-----(?:(?!-----END).)*"
                    r"(?:-----END[A-Z ]* PRIVATE KEY(?: BLOCK)?-----)?"),
)

# Characters the patterns' case-insensitive matching takes for ASCII letters (as `re` does):
# ı for i, ſ for s, the Kelvin sign for k. Lower-cased bytes keep them as they are.
_CASE_ALIASES = {"\u0131": "i", "\u017f": "s", "\u212a": "k"}
# Each with the byte before its last, looked for first: a one-byte `in` is memchr, a longer one a
# slower search, and most lines past ASCII hold none of these bytes (ı's and ſ's first, the
# Kelvin sign's second: its first, E2, is also that of `€` and typographic quotes).
_CASE_ALIAS_BYTES = tuple((alias.encode("utf-8")[-2:-1], alias.encode("utf-8")) for alias in _CASE_ALIASES)
# Characters JSON serialisation never escapes (in either ensure_ascii mode, at any depth).
_JSON_SAFE = re.compile(r'[ !#-\[\]-~]+')
_LEADING_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")
_DEFAULT_PATTERN_TEXTS = frozenset(pattern for _, pattern in DEFAULT_SECRET_PATTERNS)


# --- the keywords ----------------------------------------------------------------------------
# Every text a pattern matches holds one of its keywords, read off the pattern itself
# (`cafe._scan_keywords`): a serialised line that holds none of them holds nothing to scrub in
# any of its strings, and is written without walking it. The default patterns' keywords are
# read once, into `cafe._scan_table` (regenerated by `python -m cafe._scan_keywords`, checked
# by the tests); a configured pattern's are read when a scrubber is made with it.


class _KeywordSearch:
    """Whether a line holds a keyword. Each (stop, expression) pair is a character most of its
    keywords' share, found with `bytes.find` (memchr's speed: a line without it costs almost
    nothing), then the expression from there on: `re` scans for its literal stop in a tight
    loop and tries the trie of what follows (each alternative starts with a literal or a class
    it rejects at once), what precedes the stop a look-behind tried last."""

    __slots__ = ("_searches",)

    def __init__(self, pairs: Iterable[tuple[bytes, bytes]]) -> None:
        self._searches = tuple((stop, re.compile(expression).search) for stop, expression in pairs)

    def holds(self, data: bytes) -> bool:
        for stop, search in self._searches:
            at = data.find(stop)
            if at >= 0 and search(data, at) is not None:
                return True
        return False


@dataclass(frozen=True)
class _KeywordScan:
    """The searches a line takes: `folded` in the line lower-cased (the keywords of patterns
    that ignore case, and lower-case ones), `cased` in the line as it is."""

    folded: tuple[_KeywordSearch, ...]
    cased: tuple[_KeywordSearch, ...]


@functools.cache
def _default_scan() -> _KeywordScan:
    from cafe import _scan_table

    return _KeywordScan((_KeywordSearch(_scan_table.FOLDED),), (_KeywordSearch(_scan_table.CASED),))


@functools.cache
def _keyword_scan(patterns: tuple[str, ...]) -> _KeywordScan | None:
    """The search for `patterns`' keywords and the secret-named keys' (the default patterns'
    from the table, which holds them all), or None when a pattern has none (then every line
    is walked)."""
    scan = _default_scan()
    others = [pattern for pattern in patterns if pattern not in _DEFAULT_PATTERN_TEXTS]
    if not others:
        return scan
    from cafe._scan_keywords import searches

    found = searches(others, keys=False)
    if found is None:
        return None
    return _KeywordScan((*scan.folded, _KeywordSearch(found.folded)), (*scan.cased, _KeywordSearch(found.cased)))


# `\u0073k-...`: a character a JSON text need not escape, escaped anyway (at any depth: JSON in
# a string in a string doubles the backslash). A model's tool-call arguments are JSON text kept
# as a string, so such an escape spells a secret no pattern sees; the text is also read with
# these escapes undone, and when that reading holds a secret, it is the one kept, scrubbed (it is
# the same JSON). `"` and `\` stay escaped: undone, they would end the string they are in.
_NEEDLESS_ESCAPE = re.compile(r"\\+u00([2-7][0-9a-fA-F])")


def _unescape_needless(match: re.Match[str]) -> str:
    character = chr(int(match.group(1), 16))
    return match.group(0) if character in '"\\\x7f' else character  # kept: they would end a string


def _escapes_undone(text: str) -> str | None:
    """`text` with needless `\\u00XX` escapes undone, or None if it holds none."""
    if "\\u00" not in text:
        return None
    undone = _NEEDLESS_ESCAPE.sub(_unescape_needless, text)
    return undone if undone != text else None


def _escapes_undone_at(text: str) -> tuple[str, list[int]] | None:
    """`text` with needless `\\u00XX` escapes undone, and where each of its characters starts
    in `text` (one more entry: the end), or None if it holds none."""
    if "\\u00" not in text:
        return None
    pieces: list[str] = []
    starts: list[int] = []
    last = 0
    for match in _NEEDLESS_ESCAPE.finditer(text):
        character = _unescape_needless(match)
        if character == match.group(0):
            continue
        pieces += (text[last:match.start()], character)
        starts += (*range(last, match.start()), match.start())
        last = match.end()
    if not pieces:
        return None
    pieces.append(text[last:])
    starts += (*range(last, len(text)), len(text))
    return "".join(pieces), starts


@dataclass(frozen=True)
class Finding:
    line: int
    kind: str
    column: int


# Texts a pattern is tried on before it is used: one that matches an empty span of any of
# them (`a|`, `x*`, `\b`, `.*`) would write [REDACTED] between characters, all through the
# recording, and could not be undone.
_PROBES = ("", "a", "latte, please", "A-1_z 2.5")


def _pattern_error(message: str) -> RecordingError:
    """A bad scrub pattern is a `RecordingError` (exit 30). Imported here, when one is found:
    `cafe.recording` imports this module, so importing its errors at the top would be a cycle."""
    from cafe.recording.errors import RecordingError

    return RecordingError(message)


def _compile(name: str, pattern: str) -> re.Pattern[str]:
    try:
        compiled = re.compile(pattern, re.DOTALL) if name == "private key" else re.compile(pattern)
    except re.error as error:
        raise _pattern_error(f"scrub pattern ({name}) is not a valid regular expression: {error.msg}") from None
    if any(match.end() == match.start() for probe in _PROBES for match in compiled.finditer(probe)):
        raise _pattern_error(f"scrub pattern ({name}) matches an empty text, which would write [REDACTED] "
                             "between characters: make it match the secret itself")
    return compiled


def _scoped(name: str, pattern: str) -> str:
    """`pattern` as one alternative of a larger expression: leading global flags become
    scoped ones (Python refuses global flags anywhere but at the start)."""
    flags = "s" if name == "private key" else ""
    leading = _LEADING_FLAGS.match(pattern)
    if leading:
        flags += leading.group(1)
        pattern = pattern[leading.end():]
    return f"(?{flags}:{pattern})" if flags else f"(?:{pattern})"


def _alternative(match: re.Match[str]) -> int:
    """Which alternative of the combined pattern matched: its group is named `p<N>`."""
    assert match.lastgroup is not None  # every alternative is a named group
    return int(match.lastgroup[1:])


# A group referred to by number (`\1`, `(?(1)...)`) is another group once the pattern is one
# alternative among others: the reference would silently match something else, or nothing.
_NUMBERED_REFERENCE = re.compile(r"(?<!\\)(?:\\\\)*\\[1-9]|\(\?\([0-9]")
_ALTERNATIVE_NAME = re.compile(r"p(?:[0-9]+|k)")  # the alternation's own group names
# A [REDACTED] already there is matched first, and kept: scrubbing is idempotent, so a
# configured pattern that matches inside the marker (`[A-Z]{8}`, `\w{8}`) leaves it whole and a
# replayed reply that holds one still equals its recording.
_KEPT = f"(?P<pk>{re.escape(REDACTED)})"


def _check_groups(name: str, pattern: str, compiled: re.Pattern[str], taken: set[str]) -> None:
    """Refuse what would break the alternation: a group referred to by number, or a group name
    it already holds (its own or another pattern's), which made compiling it raise."""
    if _NUMBERED_REFERENCE.search(pattern):
        raise _pattern_error(f"scrub pattern ({name}) refers to a group by its number, which changes once it "
                             "is combined with the other patterns: name the group, (?P<name>...) and (?P=name)")
    for group in compiled.groupindex:
        if group in taken or _ALTERNATIVE_NAME.fullmatch(group):
            raise _pattern_error(f"scrub pattern ({name}) names a group {group!r} that another pattern or cafe "
                                 "itself uses: choose another group name")
        taken.add(group)


class _Alternation:
    """Named patterns as one regular expression: one pass over a text finds the leftmost
    match of any of them. A pattern with a group of its own replaces only that group."""

    def __init__(self, named: list[tuple[str, str]]) -> None:
        self.names: list[str] = []
        self._value_group: list[int | None] = []
        parts = []
        index = 1  # the kept [REDACTED]'s group
        taken: set[str] = set()
        for position, (name, pattern) in enumerate(named):
            compiled = _compile(name, pattern)
            _check_groups(name, pattern, compiled, taken)
            groups = compiled.groups
            index += 1  # the alternative's own group
            self.names.append(name)
            self._value_group.append(index + 1 if groups else None)
            parts.append(f"(?P<p{position}>{_scoped(name, pattern)})")
            index += groups
        self._regex = re.compile("|".join([_KEPT, *parts])) if parts else None

    def sub(self, text: str) -> str:
        return text if self._regex is None else self._regex.sub(self._replace, text)

    def finditer(self, text: str) -> Iterable[tuple[str, re.Match[str]]]:
        if self._regex is None:
            return
        for match in self._regex.finditer(text):
            if match.lastgroup != "pk" and self._replace(match) != match.group(0):
                yield self.names[_alternative(match)], match

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, name) of each piece `sub` replaces."""
        if self._regex is None:
            return []
        found = []
        for match in self._regex.finditer(text):
            if match.lastgroup == "pk":
                continue
            position = _alternative(match)
            group = self._value_group[position]
            if group is None:
                found.append((match.start(), match.end(), self.names[position]))
                continue
            value = match.group(group)
            if value is not None and value not in ("", REDACTED):
                found.append((*match.span(group), self.names[position]))
        return found

    def _replace(self, match: re.Match[str]) -> str:
        if match.lastgroup == "pk":
            return match.group(0)
        group = self._value_group[_alternative(match)]
        if group is None:
            return REDACTED
        value = match.group(group)
        if value is None or value in ("", REDACTED):
            return match.group(0)
        start, end = match.span(group)
        offset = match.start()
        whole = match.group(0)
        return whole[: start - offset] + REDACTED + whole[end - offset :]


def _literal_forms(literals: Iterable[str]) -> list[str]:
    """A literal as it appears inside a string: raw, JSON-escaped, ASCII-escaped, and
    escaped twice (JSON inside a string inside a string, such as nested arguments)."""
    forms: list[str] = []
    for secret in literals:
        if not secret:
            continue
        once = json.dumps(secret, ensure_ascii=False)[1:-1]
        for form in (secret, once, json.dumps(secret)[1:-1], json.dumps(once, ensure_ascii=False)[1:-1]):
            if form not in forms:
                forms.append(form)
    forms.sort(key=len, reverse=True)
    return forms


class Scrubber:
    def __init__(
        self,
        patterns: Iterable[tuple[str, str]] = DEFAULT_SECRET_PATTERNS,
        *,
        extra_patterns: Iterable[str] = (),
        literals: Iterable[str] = (),
    ) -> None:
        self._named = [*patterns, *(("configured pattern", p) for p in extra_patterns)]
        self._patterns = _Alternation(self._named)
        # Every text a pattern matches holds one of its pieces (None: a pattern has none).
        self._scan = _keyword_scan(tuple(pattern for _, pattern in self._named)) if self._named else None
        self._set_literals([secret for secret in literals if secret])

    def _set_literals(self, literals: list[str]) -> None:
        self._literals = literals
        forms = _literal_forms(literals)
        # Exact secret values are replaced first and in any text; an existing [REDACTED]
        # is matched (and kept) first, so scrubbing a scrubbed text changes nothing.
        alternatives = [re.escape(REDACTED), *(re.escape(form) for form in forms)]
        self._literal_regex = re.compile("|".join(alternatives)) if forms else None
        # Each form of a secret, at any escaping depth, keeps the secret's JSON-safe runs:
        # a text without the longest run of each holds no form of any.
        runs = [max(_JSON_SAFE.findall(secret), key=len, default="") for secret in literals]
        self._literal_runs = tuple(runs) if all(runs) else None
        self._literal_run_bytes = None if self._literal_runs is None else tuple(
            run.encode("ascii") for run in self._literal_runs)

    def _may_hold_literal(self, text: str) -> bool:
        if self._literal_regex is None:
            return False
        return self._literal_runs is None or any(run in text for run in self._literal_runs)

    def _may_hold_literal_bytes(self, data: bytes) -> bool:
        if self._literal_regex is None:
            return False
        return self._literal_run_bytes is None or any(run in data for run in self._literal_run_bytes)

    def _may_match_pattern(self, text: str) -> bool:
        return self._may_match_pattern_bytes(text.encode("utf-8", "surrogatepass"))

    def _may_match_pattern_bytes(self, encoded: bytes) -> bool:
        if not self._named:
            return False
        scan = self._scan
        if scan is None:
            return True
        if any(search.holds(encoded) for search in scan.cased):
            return True
        if not encoded.isascii() and any(lead in encoded and alias in encoded for lead, alias in _CASE_ALIAS_BYTES):
            text = encoded.decode("utf-8", "surrogatepass")
            for alias, letter in _CASE_ALIASES.items():
                text = text.replace(alias, letter)
            encoded = text.encode("utf-8", "surrogatepass")
        lowered = encoded.lower()
        return any(search.holds(lowered) for search in scan.folded)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, **options: Any) -> Scrubber:
        """The default patterns plus any in `CAFE_SCRUB_PATTERNS` (one per line)."""
        environ = os.environ if environ is None else environ
        extra = [line for line in environ.get(ENV_PATTERNS, "").splitlines() if line.strip()]
        return cls(extra_patterns=[*extra, *options.pop("extra_patterns", ())], **options)

    def with_literals(self, literals: Iterable[str]) -> Scrubber:
        clone = Scrubber(patterns=())
        clone._named, clone._patterns, clone._scan = self._named, self._patterns, self._scan
        clone._set_literals([*self._literals, *(secret for secret in literals if secret)])
        return clone

    def scrub(self, text: str) -> str:
        """One piece of text (a string value) with every secret in it replaced, also one
        spelled with needless `\\u00XX` escapes (then the text is kept with them undone)."""
        undone = _escapes_undone(text)
        if undone is not None:
            scrubbed = self._scrub(undone)
            if scrubbed != undone:
                return scrubbed
        return self._scrub(text)

    def _scrub(self, text: str) -> str:
        if self._literal_regex is not None and self._may_hold_literal(text):
            text = self._literal_regex.sub(REDACTED, text)
        if self._may_match_pattern(text):
            text = self._patterns.sub(text)
        return text

    def secret_spans(self, text: str) -> list[tuple[int, int, str]]:
        """Where `scrub` would replace a secret in `text`: (start, end, kind) of each piece, in
        `text`'s own positions (one spelled with needless escapes spans them), so that a text
        cut into pieces (a stream's chunks) can have each piece of a secret replaced where it
        lies. Spans may overlap."""
        found = self._spans(text)
        undone = _escapes_undone_at(text)
        if undone is not None:
            undone_text, starts = undone
            found += [(starts[start], starts[end], kind) for start, end, kind in self._spans(undone_text)]
        return found

    def _spans(self, text: str) -> list[tuple[int, int, str]]:
        found = []
        if self._literal_regex is not None and self._may_hold_literal(text):
            found += [(match.start(), match.end(), "known secret") for match in self._literal_regex.finditer(text)
                      if match.group(0) != REDACTED]
        if self._may_match_pattern(text):
            found += self._patterns.spans(text)
        return found

    def may_need_scrubbing(self, serialised: str | bytes) -> bool:
        """False only when no string in the JSON text `serialised` (text, or its UTF-8 bytes)
        can hold anything to scrub: then `scrub_json` of its value would return it unchanged.
        (Keywords and JSON-safe runs are spelled the same in a string and in its serialised
        form.)"""
        data = serialised if isinstance(serialised, bytes) else serialised.encode("utf-8", "surrogatepass")
        if b"\\u" in data:
            return True  # characters escaped as \uXXXX (in an ASCII-only line) could spell anything
        return self._may_hold_literal_bytes(data) or self._may_match_pattern_bytes(data)

    def scrub_json(self, value: Any) -> Any:
        """A copy of a JSON value with its string values scrubbed (keys are kept as they
        are; the string value of a secret-named key such as `api_key` becomes [REDACTED])."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {
                key: (REDACTED if isinstance(item, str) and item and _secret_key(key)
                      else self.scrub_json(item))
                for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.scrub_json(item) for item in value]
        return value

    def findings(self, text: str, line: int = 1) -> list[Finding]:
        """Secrets anywhere in `text` (any text file, JSON or not), by kind and column."""
        found = []
        if self._literal_regex is not None:
            found += [Finding(line, "known secret", m.start() + 1)
                      for m in self._literal_regex.finditer(text) if m.group(0) != REDACTED]
        found += [Finding(line, name, m.start() + 1) for name, m in self._patterns.finditer(text)]
        undone = _escapes_undone(text)
        if not found and undone is not None and self._scrub(undone) != undone:
            # Columns of the text with its escapes undone: the kinds, found again there.
            return self.findings(undone, line)
        return found


@functools.cache
def structure_scrubber() -> Scrubber:
    """The default patterns alone, for what is structure where it is shown (keys, JSON paths,
    one-line summaries): they match no ordinary word, where a configured pattern broad enough
    to match one (`\\w{8}`, `[0-9a-f]{8}`) would rename `messages` or a digest."""
    return Scrubber()


_SECRET_KEYS: dict[str, bool] = {}


def secret_key(key: str) -> bool:
    """Whether an object key (or a form field's name) says its value is a secret (`api_key`,
    `password`, `GITHUB_TOKEN`): then the value is one, whatever it looks like."""
    return _secret_key(key)


def _secret_key(key: str) -> bool:
    # Objects repeat the same few keys on every line: remember the answer per key.
    known = _SECRET_KEYS.get(key)
    if known is None:
        known = _SECRET_KEY.fullmatch(key) is not None
        if len(_SECRET_KEYS) < 4096:
            _SECRET_KEYS[key] = known
    return known


def holds_secret(value: Any, secrets: Sequence[str]) -> bool:
    """Whether `value` (a string, or a tuple or list of them) holds one of `secrets` (a client's
    known secrets, each at least MIN_SECRET_CHARS long) anywhere in it."""
    items = value if isinstance(value, (tuple, list)) else (value,)
    return any(isinstance(item, str) and secret in item for item in items for secret in secrets)


# --- a recording as it is shown ------------------------------------------------------------
# cafe's own recordings were scrubbed when they were written, so for them this changes nothing
# (scrubbing a scrubbed text is a no-op). A plain file another harness wrote, or one written
# before a pattern was added, may hold a key: a page or an export must not show it. A call whose
# serialised request or response holds nothing any pattern could match is passed on as it is.
#
# Unlike a recording's, a shown recording's object keys are scrubbed too, of the secrets the
# default patterns find: a recording keeps its keys as they are (they are its structure), but a
# page only shows them, and a key another harness wrote can be anything, a key included.
# (`cafe.recording` imports this module, so its format is imported where it is used.)


def shown_json(value: Any, scrubber: Scrubber) -> Any:
    """A JSON value as a page shows it: its string values scrubbed, and its object keys of
    any secret the default patterns find (`structure_scrubber`: a configured pattern broad
    enough to match `messages` would rename the keys the page is laid out by)."""
    return _keys_scrubbed(scrubber.scrub_json(value), structure_scrubber())


def _keys_scrubbed(value: Any, keys: Scrubber) -> Any:
    if isinstance(value, dict):
        return {keys.scrub(key) if isinstance(key, str) else key: _keys_scrubbed(item, keys)
                for key, item in value.items()}
    if isinstance(value, list):
        return [_keys_scrubbed(item, keys) for item in value]
    return value


def _document(call: RecordedCall, name: str, scrubber: Scrubber) -> tuple[Any, bool]:
    """The call's `request` or `response`, scrubbed, and whether that changed it."""
    from cafe.recording.format import encoded

    held = encoded(call, name)
    if held is not None and not scrubber.may_need_scrubbing(held):
        return held, False
    value = getattr(call, name)
    scrubbed = shown_json(value, scrubber)
    return scrubbed, scrubbed != value


def _text(value: str | None, scrubber: Scrubber) -> str | None:
    return None if value is None else scrubber.scrub(value)


def _call(call: RecordedCall, scrubber: Scrubber) -> RecordedCall:
    request, request_changed = _document(call, "request", scrubber)
    response, response_changed = _document(call, "response", scrubber)
    line_model, header_model = _text(call.line_model, scrubber), _text(call.header_model, scrubber)
    exchange = None if call.exchange is None else shown_json(call.exchange, scrubber)
    if not (request_changed or response_changed) and (line_model, header_model, exchange) == (
            call.line_model, call.header_model, call.exchange):
        return call
    return type(call).loaded(call.index, call.line, request, response, call.timing, line_model, header_model,
                             exchange)


def _header(header: Header, scrubber: Scrubber) -> Header:
    return replace(
        header,
        harness=_text(header.harness, scrubber),
        model=_text(header.model, scrubber),
        provider=_text(header.provider, scrubber),
        recorded_at=_text(header.recorded_at, scrubber),
        conversation_id=_text(header.conversation_id, scrubber),
        script=shown_json(header.script, scrubber) if header.script is not None else None,
        decisions=shown_json(header.decisions, scrubber) if header.decisions is not None else None,
    )


def scrubbed(recording: Recording, scrubber: Scrubber) -> Recording:
    """`recording` with every string value and key of its header, calls and end line scrubbed,
    and its file name (which a page names)."""
    from cafe.recording.format import Ending

    ending = recording.ending
    if ending is not None:
        ending = Ending(scrubber.scrub(ending.stop_reason), ending.model_calls, ending.transcript_sha256)
    return replace(recording, path=Path(scrubber.scrub(str(recording.path))),
                   header=_header(recording.header, scrubber),
                   calls=[_call(call, scrubber) for call in recording.calls], ending=ending)
