"""What is wrong with a URL that should reach an HTTP server: one check for the model's base
URL (cafe) and the OTLP endpoints (cafe_otel), so both say the same thing the same way.

The answer names the problem, never the URL: it may carry a user:password part."""

from __future__ import annotations

from urllib.parse import urlsplit

from cafe.privacy import structure_scrubber


def http_url_problem(url: str) -> str | None:
    """None for an http(s) URL with a host and, if any, a port in 1-65535; else what is wrong."""
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        return "the URL has a space or control character"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        return ("unbalanced [ ] around an IPv6 address" if "IPv6" in str(error)
                else "the port is not a number from 1 to 65535")
    if parts.scheme.lower() not in ("http", "https"):
        shown = repr(parts.scheme[:20])
        return f"scheme {shown} is not http or https"
    if not parts.hostname:
        return "the URL has no host"
    if port == 0:
        return "port 0 is not a port to send to"
    return None


def shown_url(url: str) -> str:
    """The URL as a repr, an error or a note shows it: no user:password part, no query
    string, no fragment (a key may be in any of them), and a key in its host or path (as
    some receivers take one: `https://ingest.example/<key>/v1/traces`) scrubbed."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "<a malformed URL>"
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if port:
        netloc += f":{port}"
    return structure_scrubber().scrub(f"{parts.scheme}://{netloc}{parts.path}")
