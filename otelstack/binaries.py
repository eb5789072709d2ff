"""Where the built binaries are: an explicit path from the environment, else the build of
this checkout in the build script's cache (`$CAFE_OTEL_BIN_CACHE`, default
~/.cache/cafe-otel/bin): `<cache>/<key>/`, the key computed as the script computes it.

`<cache>/current` is only the fallback when the key cannot be computed (no Go on PATH):
it points at whichever checkout ran the script last, which on a machine shared by several
checkouts may be a build of other inputs (a manifest without a component this one uses).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from otelstack.layout import REPO

BUILD_HINT = "build them with `bash scripts/build-otel-binaries.sh` (needs Go and the Go module proxy)"
# The script's key inputs, in its order: `cat` of these files, then `go version`.
KEY_FILES = ("collector-config/manifest.yaml", "tools/jaeger/go.mod", "tools/jaeger/go.sum")


def build_key(repo: Path = REPO) -> str | None:
    """The cache key scripts/build-otel-binaries.sh gives this checkout; None without Go."""
    try:
        go = subprocess.run(["go", "version"], capture_output=True, timeout=30, check=True).stdout
        digest = hashlib.sha256()
        for name in KEY_FILES:
            digest.update((repo / name).read_bytes())
    except (OSError, subprocess.SubprocessError):
        return None
    digest.update(go)
    return digest.hexdigest()[:16]


def binary_path(env_var: str, name: str, environ: Mapping[str, str] | None = None) -> tuple[Path, bool]:
    """(path, explicit): the path `env_var` names, else this checkout's `<cache>/<key>/<name>`
    (`<cache>/current/<name>` when the key cannot be computed)."""
    env = os.environ if environ is None else environ
    explicit = env.get(env_var)
    if explicit:
        return Path(explicit), True
    cache = Path(env.get("CAFE_OTEL_BIN_CACHE") or Path.home() / ".cache" / "cafe-otel" / "bin")
    key = build_key()
    return cache / (key or "current") / name, False


def usable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)
