"""The hook that brings `cafe.wire` into another Python program's interpreter, for
`cafe record` and `cafe replay-run` (cafe/cli/wire.py).

The program runs with a directory of cafe's first on its `PYTHONPATH`, holding a
`sitecustomize.py` that installs `cafe.wire`'s interception in its interpreter before its
own code runs (then runs the `sitecustomize` it shadows, if there is one). What to do comes
in the environment, which the hook removes at once, so a Python program the program starts
records and replays nothing. The hook writes what happened at the program's exit to a
status file the command reads: a replay's refusal, its unused calls, a recording that could
not be written.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cafe.errors import CafeError, Unwritable
from cafe.recording.errors import RecordingError, ReplayError
from cafe.recording.modes import RecordMode

HOOK_VARIABLE = "CAFE_WIRE_RUN"  # JSON: what the hook does in the program's interpreter
STATUS_FILE = "status.json"  # in the hook's directory: what happened, written at the program's exit

SITECUSTOMIZE = '''"""cafe's hook (cafe record / cafe replay-run): installs cafe.wire, then runs the
sitecustomize this one shadows."""


def _cafe_wire_hook():
    import os

    plan = os.environ.pop("CAFE_WIRE_RUN", None)  # HOOK_VARIABLE: a test holds them equal
    if plan is None:
        return
    import json

    plan = json.loads(plan)
    try:
        from cafe.wire._hook import run_hook
    except ImportError as error:
        with open(plan["status"], "w", encoding="utf-8") as status:
            json.dump({"error": "the program's Python cannot import cafe.wire (" + type(error).__name__
                       + "): run it with the Python cafe is installed in", "exit_code": 50}, status)
        return
    run_hook(plan)


def _shadowed_sitecustomize():
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    others = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_cafe_wire_hook()
_shadowed_sitecustomize()
'''


def _write_status(path: str, error: BaseException) -> None:
    code = error.exit_code if isinstance(error, CafeError) else 30
    with open(path, "w", encoding="utf-8") as status:
        json.dump({"error": str(error).replace("\n", " "), "exit_code": code}, status)


def run_hook(plan: Mapping[str, Any]) -> None:
    """In the program's interpreter: install the recorder or the replay, and check at exit."""
    import atexit

    from cafe.wire._intercept import WireLayer, install, uninstall

    status = str(plan["status"])
    try:
        if plan["action"] == "record":
            from cafe.wire._recorder import WireRecorder

            recorder = WireRecorder(plan["recording"], mode=RecordMode.ALL)
            layer = install(WireLayer((recorder,)))

            def finish_recording() -> None:
                uninstall(layer)
                try:
                    recorder.close()
                except (RecordingError, Unwritable) as error:
                    _write_status(status, error)
                    return
                with open(status, "w", encoding="utf-8") as out:
                    json.dump({"calls": recorder.calls}, out)

            atexit.register(finish_recording)
            return
        from cafe.wire._replay import ReplayTransport

        source = ReplayTransport(plan["recording"], ignore=plan.get("ignore", ()),
                                 allow_truncated=bool(plan.get("allow_truncated")))
        layer = install(WireLayer(source=source))

        def check_replay() -> None:
            uninstall(layer)
            try:
                if source.failure is not None:
                    raise source.failure
                source.assert_exhausted()
            except ReplayError as error:
                _write_status(status, error)
                return
            with open(status, "w", encoding="utf-8") as out:
                json.dump({"calls": source.served}, out)

        atexit.register(check_replay)
    except (RecordingError, Unwritable) as error:
        _write_status(status, error)


def hook_directory(parent: Path) -> Path:
    directory = Path(tempfile.mkdtemp(prefix=".cafe-run-", dir=parent))
    (directory / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    return directory


def program_environ(environ: Mapping[str, str], hook: Path, plan: dict[str, Any]) -> dict[str, str]:
    child = dict(environ)
    child["PYTHONPATH"] = os.pathsep.join([str(hook), *filter(None, [environ.get("PYTHONPATH")])])
    child[HOOK_VARIABLE] = json.dumps(plan)
    return child


def read_status(path: Path) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found
