"""Live-mode settings from the environment: CAFE_* first, then the OPENAI_* fallbacks.

The API key is held in a `Secret` so that no repr, f-string or error can show it.
How long a call may wait and how often the SDK retries it are `CAFE_TIMEOUT` and
`CAFE_MAX_RETRIES` (no OPENAI_* fallback: the SDK reads none); a bad value is an error
that names the variable and what it accepts, never the value (a key pasted into the wrong
variable must not end up on a terminal).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from cafe.errors import ConfigurationError, MissingSettings
from cafe.urls import http_url_problem, shown_url

# A recording scrubs the key wherever it occurs in text: a very short key would match
# ordinary words and tool names. Kept equal to cafe.privacy.MIN_SECRET_CHARS.
MIN_API_KEY_CHARS = 8


class ApiKeyTooShort(ConfigurationError):
    """An API key too short to be scrubbed from recordings without mangling them."""

    def __init__(self, source: str, length: int) -> None:
        self.source, self.length = source, length
        super().__init__(
            f"{source} is {length} character(s) long; a key shorter than {MIN_API_KEY_CHARS} "
            "characters cannot be scrubbed from recordings safely (set the real key)"
        )

class ApiKeyUnsendable(ConfigurationError):
    """An API key with a character an HTTP header cannot carry (the key goes in
    `Authorization: Bearer ...`): the request could never be sent. Says where, never what."""

    def __init__(self, source: str, position: int, kind: str) -> None:
        self.source, self.position = source, position
        super().__init__(f"{source} holds {kind} at character {position}: a key is sent in an HTTP header, "
                         "as visible ASCII without spaces (check what was pasted)")


def _unsendable(key: str) -> tuple[int, str] | None:
    for position, character in enumerate(key, start=1):
        if not "!" <= character <= "~":
            kind = ("a space" if character == " " else "a control character" if character.isascii()
                    else "a non-ASCII character")
            return position, kind
    return None


def check_api_key(key: str, source: str) -> None:
    """Long enough to scrub, and sendable in a header."""
    if len(key) < MIN_API_KEY_CHARS:
        raise ApiKeyTooShort(source, len(key))
    found = _unsendable(key)
    if found is not None:
        raise ApiKeyUnsendable(source, *found)


DEFAULT_TIMEOUT = 60.0  # seconds, for one attempt of one call
MAX_TIMEOUT = 3600.0
DEFAULT_MAX_RETRIES = 2
MAX_RETRIES = 10  # the SDK backs off between attempts: ten already outlast any shift
TIMEOUT_VARIABLE, RETRIES_VARIABLE = "CAFE_TIMEOUT", "CAFE_MAX_RETRIES"
_TIMEOUT_ACCEPTS = f"a number of seconds above 0 and at most {MAX_TIMEOUT:g}, e.g. 30 or 2.5"
_RETRIES_ACCEPTS = f"a whole number of retries from 0 to {MAX_RETRIES}"
_DECIMAL = re.compile(r"[0-9]{1,12}(?:\.[0-9]{0,12})?|\.[0-9]{1,12}")  # no sign, exponent, inf or nan
_WHOLE = re.compile(r"[0-9]{1,6}")  # int() of a few thousand digits would raise, not refuse


class InvalidLiveSetting(ConfigurationError):
    """A live setting (`CAFE_TIMEOUT`, `CAFE_MAX_RETRIES` or their arguments) that cannot be
    used. Says which and what it accepts; the value is never shown."""

    def __init__(self, source: str, accepts: str) -> None:
        self.source = source
        super().__init__(f"{source}: expected {accepts} (the value given is not shown)")


def check_timeout(value: object, source: str) -> float:
    """Seconds in (0, MAX_TIMEOUT], finite: an int or float, not a bool."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidLiveSetting(source, _TIMEOUT_ACCEPTS)
    if isinstance(value, int) and not 0 < value <= MAX_TIMEOUT:  # float() of a huge int overflows
        raise InvalidLiveSetting(source, _TIMEOUT_ACCEPTS)
    seconds = float(value)
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT):
        raise InvalidLiveSetting(source, _TIMEOUT_ACCEPTS)
    return seconds


def check_max_retries(value: object, source: str) -> int:
    """A whole number in [0, MAX_RETRIES]: an int, not a bool."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RETRIES:
        raise InvalidLiveSetting(source, _RETRIES_ACCEPTS)
    return value


def parse_timeout(text: str, source: str = TIMEOUT_VARIABLE) -> float:
    """`CAFE_TIMEOUT` as written: plain decimal seconds (surrounding spaces allowed)."""
    if not _DECIMAL.fullmatch(text.strip()):
        raise InvalidLiveSetting(source, _TIMEOUT_ACCEPTS)
    return check_timeout(float(text.strip()), source)


def parse_max_retries(text: str, source: str = RETRIES_VARIABLE) -> int:
    """`CAFE_MAX_RETRIES` as written: plain decimal digits (surrounding spaces allowed)."""
    if not _WHOLE.fullmatch(text.strip()):
        raise InvalidLiveSetting(source, _RETRIES_ACCEPTS)
    return check_max_retries(int(text.strip()), source)


# Each live setting's variables, ours first: every reader of them (the live client, the wire
# replay) takes the names from here.
BASE_URL_VARIABLES = ("CAFE_BASE_URL", "OPENAI_BASE_URL")
API_KEY_VARIABLES = ("CAFE_API_KEY", "OPENAI_API_KEY")
MODEL_VARIABLES = ("CAFE_MODEL", "OPENAI_MODEL")
_SOURCES = {"base_url": BASE_URL_VARIABLES, "api_key": API_KEY_VARIABLES, "model": MODEL_VARIABLES}


class Secret:
    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def check_base_url(url: str, source: str) -> None:
    """An http(s) URL with a host and, if any, a port in 1-65535 (`cafe.urls`)."""
    problem = http_url_problem(url)
    if problem is not None:
        raise ConfigurationError(f"{source}: {problem}; use an http(s) URL with a host, e.g. http://127.0.0.1:8000/v1")


@dataclass(frozen=True)
class LiveSettings:
    base_url: str
    api_key: Secret
    model: str
    timeout: float = DEFAULT_TIMEOUT  # seconds an attempt may wait for the endpoint
    max_retries: int = DEFAULT_MAX_RETRIES  # further attempts the SDK makes after a failed one

    def __repr__(self) -> str:
        # The base URL may carry a user:password or a key in its query, like the key itself.
        return (f"LiveSettings(base_url={shown_url(self.base_url)!r}, api_key={self.api_key!r}, "
                f"model={self.model!r}, timeout={self.timeout!r}, max_retries={self.max_retries!r})")

    def __post_init__(self) -> None:
        check_api_key(self.api_key.reveal(), "the API key")
        check_base_url(self.base_url, "the model base URL")
        object.__setattr__(self, "timeout", check_timeout(self.timeout, "the live timeout"))
        check_max_retries(self.max_retries, "the live max_retries")

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> LiveSettings:
        found: dict[str, str] = {}
        missing: list[str] = []
        sources: dict[str, str] = {}
        for field_name, names in _SOURCES.items():
            name = next((n for n in names if environ.get(n, "").strip()), None)
            if name is None:
                missing.append(" or ".join(names))
            else:
                found[field_name], sources[field_name] = environ[name].strip(), name
        if missing:
            raise MissingSettings(missing)
        check_api_key(found["api_key"], sources["api_key"])
        check_base_url(found["base_url"], sources["base_url"])
        timeout, retries = environ.get(TIMEOUT_VARIABLE, ""), environ.get(RETRIES_VARIABLE, "")
        return cls(found["base_url"], Secret(found["api_key"]), found["model"],
                   timeout=parse_timeout(timeout) if timeout.strip() else DEFAULT_TIMEOUT,
                   max_retries=parse_max_retries(retries) if retries.strip() else DEFAULT_MAX_RETRIES)

    @property
    def server_address(self) -> str | None:
        return urlsplit(self.base_url).hostname

    @property
    def server_port(self) -> int | None:
        parts = urlsplit(self.base_url)
        return parts.port or {"http": 80, "https": 443}.get(parts.scheme)
