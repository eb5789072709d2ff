"""The tests find this checkout's build, not whichever checkout built last.

No binaries needed: this computes keys only.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from otelstack.binaries import KEY_FILES, binary_path, build_key
from otelstack.layout import REPO

needs_go = pytest.mark.skipif(shutil.which("go") is None, reason="the key includes `go version`")


@needs_go
def test_the_key_is_the_build_scripts_key() -> None:
    files = " ".join(str(REPO / name) for name in KEY_FILES)
    script = f"{{ cat {files}; go version; }} | sha256sum | cut -c1-16"
    assert build_key() == subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                                         check=True).stdout.strip()


@needs_go
def test_a_changed_manifest_changes_the_key_and_the_path(tmp_path: Path) -> None:
    for name in KEY_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    assert build_key(tmp_path) == build_key()
    with (tmp_path / KEY_FILES[0]).open("a") as manifest:
        manifest.write("# one more component\n")
    assert build_key(tmp_path) != build_key()


@needs_go
def test_the_path_is_under_the_key_not_current(tmp_path: Path) -> None:
    path, explicit = binary_path("CAFE_OTELCOL_BIN", "otelcol-cafe", {"CAFE_OTEL_BIN_CACHE": str(tmp_path)})
    assert (path, explicit) == (tmp_path / str(build_key()) / "otelcol-cafe", False)


def test_an_explicit_path_wins(tmp_path: Path) -> None:
    given = tmp_path / "my-otelcol"
    assert binary_path("CAFE_OTELCOL_BIN", "otelcol-cafe", {"CAFE_OTELCOL_BIN": str(given)}) == (given, True)
