"""The hook of `cafe record` / `cafe replay-run` in a program's Python processes: its startup
file is installed with cafe and costs a Python that is not under those commands nothing but a
look-up; a process that does not own the run has its requests refused (never sent) from its
first import of httpx2, and pays nothing for the hook until then."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest

from cafe.wire._hook import HOOK_VARIABLE, OWNER_FILE, REFUSED_PREFIX, STARTUP_FILE, read_outcome
from tests.wire.openai_server import OpenAIServer

REPO = Path(__file__).resolve().parents[2]


def _bare_environ(**extra: str) -> dict[str, str]:
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("CAFE_", "PYTHONPATH"))}
    environ.update(extra)
    return environ


def test_the_startup_file_is_installed_beside_cafe_as_the_repository_holds_it() -> None:
    try:
        metadata.distribution("cafe-otel")
    except metadata.PackageNotFoundError:
        pytest.skip("cafe-otel is not installed in this Python (pip install -e .)")
    installed = [Path(directory) / STARTUP_FILE for directory in site.getsitepackages()
                 if (Path(directory) / STARTUP_FILE).exists()]
    assert installed, f"{STARTUP_FILE} is not in this Python's site-packages"
    assert installed[0].read_text(encoding="utf-8") == (REPO / STARTUP_FILE).read_text(encoding="utf-8")
    assert f'"{HOOK_VARIABLE}" in os.environ' in installed[0].read_text(encoding="utf-8")


def test_a_python_not_under_cafe_imports_nothing_of_cafe_at_its_start(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], env=_bare_environ(),
                          capture_output=True, text=True, timeout=60, check=True, cwd=tmp_path)
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()]
    assert "site" in imported
    assert not [name for name in imported if name.split(".")[0] in ("cafe", "httpx", "httpx2")]


def test_a_process_that_does_not_own_the_run_has_its_requests_refused_from_its_import_of_its_library(
        tmp_path: Path, http: ModuleType) -> None:
    (tmp_path / OWNER_FILE).write_text("1", encoding="ascii")  # another process owns the run
    plan = {"action": "replay", "directory": str(tmp_path), "recording": str(tmp_path / "agent.jsonl"),
            "shown": "agent.jsonl"}
    program = (
        "import sys\n"
        f"print('before:', {http.__name__!r} in sys.modules)\n"
        f"import {http.__name__} as http\n"
        "try:\n"
        "    http.post(sys.argv[1], json={})\n"
        "except Exception as error:\n"
        "    print('refused:', type(error).__name__)\n"
    )
    with OpenAIServer.running() as server:
        done = subprocess.run([sys.executable, "-I", "-c", program, f"{server.base_url}/chat/completions"],
                              env=_bare_environ(**{HOOK_VARIABLE: json.dumps(plan)}), capture_output=True, text=True,
                              timeout=120, check=False, cwd=tmp_path)
        assert server.count == 0
    assert done.stdout.splitlines() == ["before: False", "refused: OtherProcessCall"], done.stderr
    outcome = read_outcome(tmp_path)
    assert [note["exit_code"] for note in outcome.refusals] == [51]
    assert outcome.refusals[0]["error"].startswith("agent.jsonl: a model call from process ")
    assert [path.name.startswith(REFUSED_PREFIX) for path in tmp_path.glob("*.json")] == [True]
