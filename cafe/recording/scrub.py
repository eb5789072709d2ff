"""The secret patterns and `Scrubber`, under the name the recorder has always imported them by.
They live in `cafe.privacy`, shared by every path that writes or shows recorded text."""

from cafe.privacy import (
    DEFAULT_SECRET_PATTERNS,
    ENV_PATTERNS,
    MIN_SECRET_CHARS,
    REDACTED,
    Finding,
    Scrubber,
    structure_scrubber,
)

__all__ = ["DEFAULT_SECRET_PATTERNS", "ENV_PATTERNS", "MIN_SECRET_CHARS", "REDACTED", "Finding", "Scrubber",
           "structure_scrubber"]
