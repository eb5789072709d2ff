"""Where the built binaries are: an explicit path from the environment, else the build
script's cache (`$CAFE_OTEL_BIN_CACHE`, default ~/.cache/cafe-otel/bin, `current/`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

BUILD_HINT = "build them with `bash scripts/build-otel-binaries.sh` (needs Go and the Go module proxy)"


def binary_path(env_var: str, name: str, environ: Mapping[str, str] | None = None) -> tuple[Path, bool]:
    """(path, explicit): the path `env_var` names, or the cache's `current/<name>`."""
    env = os.environ if environ is None else environ
    explicit = env.get(env_var)
    if explicit:
        return Path(explicit), True
    cache = Path(env.get("CAFE_OTEL_BIN_CACHE") or Path.home() / ".cache" / "cafe-otel" / "bin")
    return cache / "current" / name, False


def usable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)
