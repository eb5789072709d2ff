"""What importing cafe costs: no `openai` SDK until a live client is made, and a pytest
plugin (imported into every pytest session on the machine) that loads nothing heavy.

Each check runs in a fresh interpreter: this session has long since imported everything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("openai", "jsonschema", "cafe_otel", "opentelemetry", "httpx", "pydantic")


def _modules_after(code: str) -> dict[str, list[str]]:
    """Run `code` in a fresh interpreter; it must leave its findings in `found`."""
    script = f"import json, sys\n{code}\nprint(json.dumps(found))"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _heavy(modules: list[str]) -> list[str]:
    return sorted(name for name in modules if name.split(".")[0] in HEAVY)


@pytest.mark.parametrize("statement", [
    "import cafe",
    "import cafe.counter.clients",
    "from cafe.counter import LiveClient, ScriptedClient, get_client",
    "from cafe.counter.clients.choose import get_client; get_client({})",
])
def test_importing_cafe_loads_no_sdk(statement: str) -> None:
    found = _modules_after(f"{statement}\nfound = {{'modules': sorted(sys.modules)}}")
    assert _heavy(found["modules"]) == []


def test_a_live_client_still_loads_the_sdk_when_made() -> None:
    found = _modules_after(
        "from cafe.counter.clients import LiveClient, LiveSettings\n"
        "before = 'openai' in sys.modules\n"
        "LiveClient(LiveSettings.from_env({'CAFE_BASE_URL': 'http://127.0.0.1:9/v1',"
        " 'CAFE_API_KEY': 'sk-test-key-0001', 'CAFE_MODEL': 'm'}))\n"
        "found = {'before': [str(before)], 'after': [str('openai' in sys.modules)]}"
    )
    assert found == {"before": ["False"], "after": ["True"]}


def test_the_pytest_plugin_module_imports_almost_nothing() -> None:
    found = _modules_after(
        "import pytest\n"
        "before = set(sys.modules)\n"
        "import cafe.pytest_plugin\n"
        "found = {'new': sorted(set(sys.modules) - before)}"
    )
    ours = [name for name in found["new"] if name.split(".")[0] == "cafe"]
    assert sorted(ours) == ["cafe", "cafe._pytest", "cafe._pytest.failures", "cafe._pytest.options",
                            "cafe.pytest_plugin"]
    assert _heavy(found["new"]) == []


@pytest.mark.parametrize("face", ["cafe", "cafe.counter"])
def test_every_public_name_resolves_to_its_object_not_a_module(face: str) -> None:
    # The café's CLI imports the submodule cafe.counter.transcript, whose name is also a public function.
    found = _modules_after(
        f"import types, importlib, cafe.cli, cafe.counter.cli\nface = importlib.import_module({face!r})\n"
        "found = {'modules': [n for n in face.__all__ if isinstance(getattr(face, n), types.ModuleType)]}"
    )
    assert found == {"modules": []}
    import cafe.counter
    from cafe.counter.loop import run_shift
    from cafe.counter.transcript import transcript

    assert cafe.counter.run_shift is run_shift
    assert cafe.counter.transcript is transcript
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = cafe.no_such_name  # type: ignore[attr-defined]


def test_the_plugins_record_modes_are_the_recording_modes() -> None:
    from cafe.pytest_plugin import RECORD_MODES
    from cafe.recording.modes import RecordMode

    assert list(RECORD_MODES) == [mode.value for mode in RecordMode]
