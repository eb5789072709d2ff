"""The checks every telemetry setting goes through: numbers in range (ASCII forms only,
`numbers`), `key=value` lists, protocols and endpoints. A value that fails is a
`TelemetryConfigError` (exit 20) naming the variable or argument and what it accepts; a
number's error does not repeat the value (a misplaced paste may be a credential)."""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from cafe.errors import ConfigurationError
from cafe.urls import http_url_problem, shown_url
from cafe_otel._config.numbers import ascii_decimal, ascii_whole

GRPC, HTTP = "grpc", "http/protobuf"
MAX_SECONDS = 3600.0  # an hour: longer than any sane export, shutdown or batch delay


class TelemetryConfigError(ConfigurationError):
    """A telemetry setting that cannot be used; the message names the variable."""


def shown(raw: str, limit: int = 40) -> str:
    """A bad choice as an error shows it: quoted, cut short (a value may be long or odd)."""
    return repr(raw[:limit] + ("…" if len(raw) > limit else ""))


def first(environ: Mapping[str, str], *names: str) -> tuple[str, str] | None:
    """The first of `names` set to something other than spaces, and its value, stripped."""
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return name, value
    return None


def boolean(env: Mapping[str, str], variable: str) -> bool:
    # The specification would read any other value as false with a warning; a typo such as
    # OTEL_SDK_DISABLED=1 then leaves export on while its writer thinks it is off.
    text = env.get(variable, "").strip().lower()
    if text in ("", "false"):
        return False
    if text == "true":
        return True
    raise TelemetryConfigError(f"{variable}: {shown(env.get(variable, ''))} is not true or false")


def seconds_in_range(value: object, source: str, *, low_inclusive: bool = False) -> float:
    """A finite number of seconds in (0, 3600] (or [0, 3600] with `low_inclusive`)."""
    low = "[0" if low_inclusive else "(0"
    accepted = f"a number of seconds in {low}, {MAX_SECONDS:g}]"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TelemetryConfigError(f"{source}: {type(value).__name__} is not {accepted}")
    number = float(value)
    above_low = number >= 0 if low_inclusive else number > 0
    if not (math.isfinite(number) and above_low and number <= MAX_SECONDS):
        raise TelemetryConfigError(f"{source}: {number!r} is not {accepted}")
    return number


def millis_in_range(raw: str, variable: str) -> float:
    """A variable in milliseconds (ASCII decimal), as seconds: in (0, 3600000]."""
    number = ascii_decimal(raw)
    if number is None or not 0 < number <= MAX_SECONDS * 1000:
        raise TelemetryConfigError(
            f"{variable}: expected a number of milliseconds in (0, {MAX_SECONDS * 1000:.0f}], "
            "in ASCII digits (the value given is not shown)")
    return number / 1000.0


def whole_in_range(value: object, source: str, high: int, what: str = "") -> int:
    """A whole number in [1, high]: an int, or (from a variable) ASCII digits."""
    accepted = f"a whole number from 1 to {high}{what}"
    if isinstance(value, str):
        number = ascii_whole(value)
        if number is None or not 1 <= number <= high:
            raise TelemetryConfigError(f"{source}: expected {accepted}, in ASCII digits (the value given is not shown)")
        return number
    if isinstance(value, bool) or not isinstance(value, int):
        raise TelemetryConfigError(f"{source}: {type(value).__name__} is not {accepted}")
    if not 1 <= value <= high:
        raise TelemetryConfigError(f"{source}: {value} is not {accepted}")
    return value


def parse_key_values(text: str | None, variable: str) -> dict[str, str]:
    """`k=v,k2=v2` with percent-encoded values (W3C baggage style, as the spec says)."""
    found: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise TelemetryConfigError(f"{variable}: an entry is not key=value (entry {len(found) + 1})")
        found[unquote(key.strip())] = unquote(value.strip())
    return found


def key_value_pairs(text: str, variable: str) -> list[tuple[str, str]]:
    """As `parse_key_values`, every entry kept in order: a repeated key is still seen."""
    pairs: list[tuple[str, str]] = []
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise TelemetryConfigError(f"{variable}: an entry is not key=value (entry {len(pairs) + 1})")
        pairs.append((unquote(key.strip()), unquote(value.strip())))
    return pairs


def normalise_protocol(value: str, source: str) -> str:
    text = value.strip().lower()
    if text in ("grpc",):
        return GRPC
    if text in ("http/protobuf", "http"):
        return HTTP
    raise TelemetryConfigError(f"{source}: protocol {value!r} is not supported (use grpc or http/protobuf)")


# A DNS label: letters, digits, `-` (not first or last) and `_` (container and service names).
_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


def host_problem(host: str) -> str | None:
    """None for an IP address or a DNS name (labels of at most 63, the last not all digits:
    `9999` and `1.2.3.999` are neither); else what is wrong. An exporter handed anything
    else fails every export, where a setting can say so once."""
    if not host.isascii():
        return "the host is not ASCII (write an internationalised name in its xn-- form)"
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    labels = host.removesuffix(".").split(".")
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels) or labels[-1].isdigit():
        return "the host is neither a DNS name nor an IP address"
    return None


def check_endpoint(url: str, source: str) -> str:
    """An http(s) URL with a host (a DNS name or an IP address) and, if any, a port in
    1-65535 (`cafe.urls`). The error names the problem, not the URL (it may carry a
    user:password part)."""
    problem = http_url_problem(url)
    if problem is None:
        problem = host_problem(urlsplit(url).hostname or "")
    if problem is not None:
        raise TelemetryConfigError(f"{source}: {problem}; use http(s)://HOST[:PORT] with a port from 1 to 65535")
    return url


def display_endpoint(url: str) -> str:
    """The endpoint as error texts show it: no user:password part, no query string."""
    return shown_url(url)
