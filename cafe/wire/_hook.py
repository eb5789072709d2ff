"""The hook that brings `cafe.wire` into every Python process of a program run by `cafe record`
or `cafe replay-run` (cafe/cli/wire.py).

What to do comes in the environment (`HOOK_VARIABLE`, a plan naming the hook's directory),
which every process the program starts inherits. Two startup files read it, so that it is
read wherever Python starts: `cafe-wire-hook.pth`, installed beside cafe (it runs under
`-I` and `-E` too, and before any `sitecustomize`, so one that shadows ours cannot skip it),
and the `sitecustomize.py` in the hook's directory, first on `PYTHONPATH`, for a Python
without that file: it stops a Python that cannot import cafe (exit 52) rather than letting it
reach the network unhooked, then runs the `sitecustomize` it shadows.

The first Python process to start claims the recording or the replay (`OWNER_FILE` holds its
pid; an `exec` keeps it). Every other process (a child it forks or starts, a multiprocessing
worker) has each model call refused before it is sent (`OtherProcessCall`), and notes the
refusal in the directory: its calls would carry another process's call numbers, or take
another's answers. At the owner's exit the hook writes what happened to `STATUS_FILE`.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from cafe._files import reason
from cafe.errors import CafeError, Unwritable

if TYPE_CHECKING:
    from cafe.wire._types import CallObserver, WireAnswer, WireObserver, WireRequest, WireSource

HOOK_VARIABLE = "CAFE_WIRE_RUN"  # JSON: the plan the hook follows in the program's processes
STATUS_FILE = "status.json"  # in the hook's directory: what happened, written at the owner's exit
OWNER_FILE = "owner"  # the pid of the process that records or replays
PROBE_FILE = "probe"  # written by a probe's interpreter: it loads the hook
REFUSED_PREFIX = "refused-"  # refused-PID.json: a process's first refused call, or why it stopped
STARTUP_FILE = "cafe-wire-hook.pth"  # installed beside cafe in site-packages (setup.py)
REFUSE = "refuse"  # the plan's action in Pythons started inside cafe.wire.record() / replay()


class HookNotLoaded(CafeError):
    """`cafe record` / `cafe replay-run`: the program's Python would not load cafe's hook (started
    with `-S`, or `-I`/`-E` where cafe's startup file is not installed, or unable to import cafe):
    stopped before it runs."""

    exit_code = 52


SITECUSTOMIZE = '''"""cafe's hook (cafe record / cafe replay-run): starts cafe.wire in this Python, or
stops it when it cannot import cafe; then runs the sitecustomize this one shadows."""


def _cafe_wire_hook():
    import os

    plan = os.environ.get("CAFE_WIRE_RUN")  # HOOK_VARIABLE: a test holds them equal
    if plan is None:
        return
    try:
        from cafe.wire._hook import start
    except ImportError as error:
        import json
        import sys
        import time

        why = ("the program's Python (" + sys.executable + ") cannot import cafe (" + type(error).__name__
               + "): run the program with the Python cafe is installed in")
        try:
            directory = json.loads(plan)["directory"]
            with open(os.path.join(directory, "refused-%d.json" % os.getpid()), "x", encoding="utf-8") as note:
                json.dump({"error": why, "exit_code": 52, "at": time.monotonic_ns()}, note)
        except (OSError, ValueError, KeyError, TypeError):
            sys.stderr.write("cafe: error: " + why + "\\n")
        os._exit(52)  # HookNotLoaded.exit_code
    start(os.environ)


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

_started = False


def start(environ: Mapping[str, str]) -> None:
    """In each Python the program starts (from a startup file, before the program's code):
    claim the recording or replay, or refuse this process's calls. Once a process."""
    global _started
    text = environ.get(HOOK_VARIABLE)
    if text is None or _started:
        return
    _started = True
    try:
        plan: dict[str, Any] = json.loads(text)
        directory = Path(plan["directory"])
    except (ValueError, KeyError, TypeError):  # not set by cafe: nowhere to say why but here
        sys.stderr.write(f"cafe: error: {HOOK_VARIABLE} is set, and is not what cafe record or cafe replay-run "
                         "sets: the program is not run\n")
        os._exit(HookNotLoaded.exit_code)
    if plan.get("action") == "probe":
        _write_json(directory / PROBE_FILE, {"pid": os.getpid()})
        return
    try:
        if plan.get("action") == REFUSE or not _claim(directory):
            _refuse_calls(plan, directory)
        elif _fresh_owner(plan):
            _own(plan, directory)
        else:
            _refuse_calls(plan, directory, reexecuted=True)
    except ImportError as error:  # cafe is here, what it needs is not: a Python it is not installed in
        _stop(directory, HookNotLoaded(
            f"the program's Python ({sys.executable}) cannot import {error.name or 'what cafe needs'}: run the "
            "program with the Python cafe is installed in"))
    except BaseException as error:  # before the program's code: stop it, never run it unhooked
        _stop(directory, error)


def _claim(directory: Path) -> bool:
    """Whether this process owns the run: the first to claim it, or that one after an `exec`."""
    path = directory / OWNER_FILE
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        try:
            return int(path.read_text(encoding="ascii")) == os.getpid()
        except (OSError, ValueError):
            return False
    with os.fdopen(descriptor, "w", encoding="ascii") as owner:
        owner.write(str(os.getpid()))
    return True


def _fresh_owner(plan: Mapping[str, Any]) -> bool:
    """False for an owner that `exec`ed after recording calls: their line numbers are in the
    file it can no longer append to, so its calls from here on are refused."""
    if plan["action"] != "record":
        return True
    from cafe.recording.writer import partial_path

    earlier = partial_path(Path(plan["recording"]))
    try:
        with open(earlier, "rb") as lines:
            if sum(1 for _ in lines) > 1:
                return False
    except FileNotFoundError:
        return True
    earlier.unlink()  # its header alone: the interpreter before the exec made no call
    return True


def _own(plan: Mapping[str, Any], directory: Path) -> None:
    import atexit

    from cafe.wire._intercept import WireLayer, install, patched, uninstall

    owner = os.getpid()
    if plan["action"] == "record":
        from cafe.recording.modes import RecordMode
        from cafe.wire._recorder import WireRecorder

        recorder = WireRecorder(plan["recording"], mode=RecordMode.ALL)
        layer = install(WireLayer((_NotingObserver(recorder, directory),)))

        def finish_recording() -> None:
            if os.getpid() != owner:  # a forked child's exit: the recording is its parent's
                return
            libraries = list(patched())  # the covered libraries the program imported
            uninstall(layer)
            try:
                recorder.close()
            except BaseException as error:
                _write_status(directory, error, libraries)
                return
            _write_json(directory / STATUS_FILE, {"calls": recorder.calls, "libraries": libraries})

        atexit.register(finish_recording)
        return
    from cafe.wire._replay import WireReplay

    source = WireReplay(plan["recording"], ignore=plan.get("ignore", ()),
                        allow_truncated=bool(plan.get("allow_truncated")))
    layer = install(WireLayer(source=_NotingSource(source, directory)))

    def check_replay() -> None:
        if os.getpid() != owner:
            return
        libraries = list(patched())
        uninstall(layer)
        try:
            if source.failure is not None:
                raise source.failure
            source.assert_exhausted()
        except BaseException as error:
            _write_status(directory, error, libraries)
            return
        _write_json(directory / STATUS_FILE, {"calls": source.served, "libraries": libraries})

    atexit.register(check_replay)


def _refuse_calls(plan: Mapping[str, Any], directory: Path, *, reexecuted: bool = False) -> None:
    """Refuse this process's every request through a covered library (httpx2, httpx), from
    when it first imports one (a process that never does, a tool the program runs, pays
    nothing for it). `reexecuted`: this is the owner, after an `exec` that came after
    recorded calls."""
    source = _RefusingSource(str(plan["shown"]), plan["action"] == "replay" or bool(plan.get("replaying")),
                             directory, reexecuted)

    def refuse() -> None:
        from cafe.wire._intercept import WireLayer, install

        install(WireLayer(source=source))

    from cafe.wire._libraries import LIBRARIES

    if any(name in sys.modules for name in LIBRARIES):
        refuse()
    else:
        sys.meta_path.insert(0, _AfterImport(tuple(LIBRARIES), refuse))


class _AfterImport:
    """A meta path finder that runs `then` right after the first of modules `names` is first
    imported (the registry it installs into then waits for the others itself)."""

    def __init__(self, names: tuple[str, ...], then: Callable[[], None]) -> None:
        self._names = names
        self._then = then

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self._names:
            return None
        import importlib.util

        sys.meta_path.remove(self)  # once, and not to find itself below
        spec = importlib.util.find_spec(name)
        loader = None if spec is None else spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            self._then()  # nothing to wait for: refuse from now on
            return spec
        run_module, then = loader.exec_module, self._then

        def exec_module(module: Any) -> None:
            run_module(module)
            then()

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


class _NotingObserver:
    """The owner's recorder, noting a forked child's refused call for the command."""

    def __init__(self, recorder: WireObserver, directory: Path) -> None:
        self._recorder = recorder
        self._directory = directory

    def start(self, request: WireRequest) -> CallObserver | None:
        from cafe.recording.errors import OtherProcessCall

        try:
            return self._recorder.start(request)
        except OtherProcessCall as refused:
            note_refusal(self._directory, refused)
            raise


class _NotingSource:
    """The owner's replay, noting a forked child's refused request for the command."""

    def __init__(self, source: WireSource, directory: Path) -> None:
        self._source = source
        self._directory = directory

    def answer(self, request: WireRequest) -> WireAnswer:
        from cafe.recording.errors import OtherProcessCall

        try:
            return self._source.answer(request)
        except OtherProcessCall as refused:
            note_refusal(self._directory, refused)
            raise


class _RefusingSource:
    """Answers nothing: in a process that does not own the run, every request is refused
    before it is sent, and the first refusal is noted for the command."""

    def __init__(self, shown: str, replaying: bool, directory: Path, reexecuted: bool = False) -> None:
        self._shown = shown
        self._replaying = replaying
        self._directory = directory
        self._reexecuted = reexecuted

    def _refuse(self) -> NoReturn:
        from cafe.recording.errors import OtherProcessCall, RecordingError

        refused: RecordingError = OtherProcessCall(self._shown, os.getpid(), self._replaying)
        if self._reexecuted:
            refused = RecordingError(
                f"{self._shown}: a model call was refused: the program's Python replaced itself (exec) after "
                "recording calls, which the interpreter before it wrote; cafe record records one interpreter's "
                "calls (make them before the exec, or after it only)")
        note_refusal(self._directory, refused)
        raise refused

    def answer(self, request: WireRequest) -> WireAnswer:
        self._refuse()


def _failure(error: BaseException) -> dict[str, Any]:
    noted = {"pid": os.getpid(), "at": time.monotonic_ns()}
    if isinstance(error, CafeError):
        return {"error": str(error).replace("\n", " "), "exit_code": error.exit_code, **noted}
    # Not one of ours: its text may hold anything, so only its type is told.
    return {"error": f"cafe's hook failed in the program ({type(error).__name__})", "exit_code": 70, **noted}


def _write_json(path: Path, value: Mapping[str, Any], *, exclusive: bool = False) -> bool:
    """Write `value` to `path`; False when it could not be (a full disk): the command then
    reports what it can tell without it."""
    try:
        with open(path, "x" if exclusive else "w", encoding="utf-8") as out:
            json.dump(value, out)
    except OSError:
        return False
    return True


def _write_status(directory: Path, error: BaseException, libraries: list[str]) -> None:
    _write_json(directory / STATUS_FILE, {**_failure(error), "libraries": libraries})


def note_refusal(directory: Path, error: BaseException) -> None:
    """Note this process's first refused call (or why it stopped) for the command."""
    _write_json(directory / f"{REFUSED_PREFIX}{os.getpid()}.json", _failure(error), exclusive=True)


def _stop(directory: Path, error: BaseException) -> NoReturn:
    note_refusal(directory, error)
    os._exit(error.exit_code if isinstance(error, CafeError) else 70)


@dataclass(frozen=True)
class HookOutcome:
    """What the program's processes left in the hook's directory."""

    owner: int | None  # the pid that claimed the run; None: no process loaded the hook
    status: dict[str, Any] | None  # the owner's, written at its exit
    refusals: tuple[dict[str, Any], ...]  # other processes' refused calls, first refused first

    @property
    def failure(self) -> dict[str, Any] | None:
        """The failure to report: a refused call (the run cannot be whole without that
        process's calls), else the owner's."""
        if self.refusals:
            return self.refusals[0]
        if self.status is not None and "error" in self.status:
            return self.status
        return None


def read_outcome(directory: Path) -> HookOutcome:
    refusals = [found for path in directory.glob(f"{REFUSED_PREFIX}*.json")
                if (found := _read_json(path)) is not None and "error" in found]
    refusals.sort(key=_noted_at)
    try:
        owner: int | None = int((directory / OWNER_FILE).read_text(encoding="ascii"))
    except (OSError, ValueError):
        owner = None
    return HookOutcome(owner, _read_json(directory / STATUS_FILE), tuple(refusals))


def _noted_at(note: Mapping[str, Any]) -> int:
    at = note.get("at")
    return at if isinstance(at, int) else 0


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


@contextmanager
def children_refused(shown: Path | str, *, replaying: bool,
                     environ: MutableMapping[str, str] = os.environ) -> Iterator[Callable[[], None]]:
    """For the block (a `cafe.wire.record()` or `replay()` in this process), every Python of
    this installation started from here (a spawned multiprocessing worker, a subprocess) has
    its model calls refused before they are sent, through `environ`, which such a process
    inherits; the function yielded raises the first refusal noted."""
    directory = Path(tempfile.mkdtemp(prefix="cafe-children-"))
    maker = os.getpid()  # a child forked in the block leaves it too: the directory stays its parent's
    previous = environ.get(HOOK_VARIABLE)
    environ[HOOK_VARIABLE] = json.dumps({"action": REFUSE, "directory": str(directory), "shown": str(shown),
                                         "replaying": replaying})

    def raise_refused() -> None:
        from cafe.recording.errors import OtherProcessCall

        refusals = read_outcome(directory).refusals
        if not refusals:
            return
        first = refusals[0]
        pid = first.get("pid")
        if first.get("exit_code") == OtherProcessCall.exit_code and isinstance(pid, int):
            raise OtherProcessCall(shown, pid, replaying)
        raise HookNotLoaded(str(first.get("error")))  # its hook stopped it before it ran

    try:
        yield raise_refused
    finally:
        if previous is None:
            environ.pop(HOOK_VARIABLE, None)
        else:
            environ[HOOK_VARIABLE] = previous
        if os.getpid() == maker:
            remove_hook_directory(directory)


def hook_directory(parent: Path) -> Path:
    """A new directory holding the hook's `sitecustomize.py`, its path absolute (the program
    may change directory); one that cannot be made or filled (a full disk, a file size limit)
    is `Unwritable`, and none is left behind."""
    directory: Path | None = None
    try:
        directory = Path(tempfile.mkdtemp(prefix=".cafe-run-", dir=parent)).absolute()
        (directory / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    except OSError as error:
        if directory is not None:
            remove_hook_directory(directory)
        raise Unwritable(parent, reason(error), what="cafe's hook (a .cafe-run-* directory) in it") from None
    return directory


def remove_hook_directory(directory: Path) -> None:
    import shutil

    shutil.rmtree(directory, ignore_errors=True)


def program_environ(environ: Mapping[str, str], hook: Path, plan: Mapping[str, Any]) -> dict[str, str]:
    """The program's environment: the hook's directory first on `PYTHONPATH`, and the plan
    (`directory` is filled in: every process finds the others' notes there)."""
    child = dict(environ)
    child["PYTHONPATH"] = os.pathsep.join([str(hook), *filter(None, [environ.get("PYTHONPATH")])])
    child[HOOK_VARIABLE] = json.dumps({**plan, "directory": str(hook)})
    return child
