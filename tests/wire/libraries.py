"""The HTTP client libraries of the wire tests: the one the installed `openai` SDK sends through
(httpx2 for openai 3.x, in the project's venv; httpx for 1.x, in the second test environment of
scripts/httpx-venv.sh), and every covered library installed here, with cafe's transports for it."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

import openai

from cafe.errors import CafeError
from cafe.wire._libraries import LIBRARIES, library_of

SDK_LIBRARY = library_of(openai.DefaultHttpxClient) or "httpx2"
"""The library the installed openai sends through."""

SDK_HTTP = importlib.import_module(SDK_LIBRARY)

INSTALLED = [name for name in sorted(LIBRARIES) if importlib.util.find_spec(name) is not None]
"""The covered libraries installed here."""


def transports(http: ModuleType) -> ModuleType:
    """cafe's transports for a library's clients (`cafe.wire.httpx`, `cafe.wire.httpx2`)."""
    return importlib.import_module(f"cafe.wire.{http.__name__}")


SDK_TRANSPORTS = transports(SDK_HTTP)


def cafe_error_in(error: BaseException) -> CafeError | None:
    """The cafe error a call raised, or the one its SDK raised its own error from: openai 3.x lets
    a transport's error through, openai 1.x and Groq's SDK raise APIConnectionError from it."""
    seen: BaseException | None = error
    while seen is not None and not isinstance(seen, CafeError):
        seen = seen.__cause__ or seen.__context__
    return seen
