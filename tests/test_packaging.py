"""What `make demo` prints before the demo: pyproject.toml in the form setuptools reads
without a deprecation warning, and a Makefile whose install step is quiet."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_license_is_an_spdx_string_with_a_setuptools_that_reads_it() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["license"] == "Apache-2.0"  # a table warns on every install
    [setuptools] = [r for r in project["build-system"]["requires"] if r.startswith("setuptools")]
    found = re.fullmatch(r"setuptools>=(\d+)(?:\.\d+)*", setuptools)
    assert found is not None and int(found.group(1)) >= 77  # the first to read an SPDX expression


def test_every_pip_install_of_the_makefile_is_quiet() -> None:
    installs = [line for line in (REPO / "Makefile").read_text(encoding="utf-8").splitlines()
                if "pip install" in line]
    assert installs and all("--quiet" in line for line in installs)
