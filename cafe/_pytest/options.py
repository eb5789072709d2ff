"""What a test's recording is: the plugin's settings, the marker's options (each checked for
its type), the recording's path and name, one test per recording, and its directory."""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cafe._pytest.failures import REPORT_DIR

if TYPE_CHECKING:
    from cafe.recording.modes import RecordMode

# The values of cafe.recording.modes.RecordMode, spelt out so that adding the option does
# not import cafe.recording (a test keeps the two equal).
RECORD_MODES = ("once", "all", "none")


@dataclass
class Extensions:
    """What plugins built on this one add (the café example's fixture): the fixtures that
    record and replay a test themselves (the marker's own recording stands aside for a test
    that asks for one), and marker flags of theirs."""

    fixtures: set[str] = field(default_factory=set)
    flags: set[str] = field(default_factory=set)


EXTENSIONS = pytest.StashKey[Extensions]()


def extend(config: pytest.Config, *, fixtures: Iterable[str] = (), flags: Iterable[str] = ()) -> None:
    """Declare, from a plugin's `pytest_configure`, fixtures of its that record and replay a
    test themselves and the marker flags it reads."""
    extensions = config.stash.setdefault(EXTENSIONS, Extensions())
    extensions.fixtures.update(fixtures)
    extensions.flags.update(flags)


def recording_fixtures(config: pytest.Config) -> set[str]:
    return config.stash.setdefault(EXTENSIONS, Extensions()).fixtures


def checked_settings(config: pytest.Config) -> None:
    """Refuse, before any test runs and in one line, a setting of the plugin that cannot be
    used; and fix `--cafe-report-dir` to where pytest starts (a test may change directory)."""
    mode = config.getini("cafe_record_mode")
    if mode not in RECORD_MODES:
        shown = repr(mode) if isinstance(mode, str) and len(mode) <= 20 else "given"
        raise pytest.UsageError(f"cafe_record_mode: unknown record mode {shown}; use one of {', '.join(RECORD_MODES)}")
    directory = config.getoption("--cafe-report-dir")
    if directory is not None and not directory.strip():
        raise pytest.UsageError("--cafe-report-dir: needs a directory (an empty one names none); leave the option "
                                "out to write no report pages")
    config.stash[REPORT_DIR] = None if directory is None else config.invocation_params.dir / directory


def record_mode(config: pytest.Config) -> RecordMode:
    from cafe.recording.modes import RecordMode

    chosen = config.getoption("--cafe-record-mode") or config.getini("cafe_record_mode")
    try:
        return RecordMode.parse(chosen)
    except ValueError as error:
        raise pytest.UsageError(f"cafe_record_mode: {error}") from None


MARKER = "cafe_recording"
MARKER_OPTIONS = ("path", "ignore", "allow_truncated", "allow_hosts")
MARKER_FLAGS = ("allow_truncated",)
MAX_NAME_BYTES = 96  # of the readable part of a recording's name; a file name may hold 255
DIGEST_CHARS = 12


def marker_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The test's `@pytest.mark.cafe_recording(...)` options, checked: an unknown option or
    an empty path fails the test saying so, rather than being quietly ignored."""
    marker = request.node.get_closest_marker(MARKER)
    if marker is None:
        return {}
    flags = (*MARKER_FLAGS, *sorted(request.config.stash.setdefault(EXTENSIONS, Extensions()).flags))
    taken = (*MARKER_OPTIONS, *flags[len(MARKER_FLAGS):])
    known = ", ".join(taken)
    unknown = sorted(set(marker.kwargs) - set(taken))
    if unknown:
        pytest.fail(f"cafe: @pytest.mark.cafe_recording: no option {unknown[0]!r}; it takes {known}", pytrace=False)
    if len(marker.args) > 1 or (marker.args and "path" in marker.kwargs):
        pytest.fail("cafe: @pytest.mark.cafe_recording: one path only, given either first or as path=",
                    pytrace=False)
    options = dict(marker.kwargs)
    for flag in flags:
        # bool("no") is True: only a bool says what the test means.
        if flag in options and not isinstance(options[flag], bool):
            pytest.fail(f"cafe: @pytest.mark.cafe_recording({flag}=...): expected True or False, found "
                        f"{type(options[flag]).__name__}", pytrace=False)
    if marker.args:
        options["path"] = marker.args[0]
    path = options.get("path")
    if path is not None:
        _check_path(path)
    if "ignore" in options:
        _check_ignore(options["ignore"])
    return options


def _check_path(path: Any) -> None:
    """The marker's path is a string (or a path object) naming a file."""
    shown = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not isinstance(shown, str):
        found = type(path if shown is None else shown).__name__
        pytest.fail(f"cafe: @pytest.mark.cafe_recording(path=...): needs a file path (a string), found {found}",
                    pytrace=False)
    if not shown.strip():
        pytest.fail("cafe: @pytest.mark.cafe_recording(path=...): needs a file path (an empty one names no "
                    "file); leave path out to name the recording after the test", pytrace=False)
    if "\0" in shown:
        pytest.fail("cafe: @pytest.mark.cafe_recording(path=...): a file path cannot hold a NUL character",
                    pytrace=False)


def _check_ignore(ignore: Any) -> None:
    """`ignore` is a list of field paths, each one replay can use: a string alone would be
    taken a character at a time, so it is refused, whether the test records or replays."""
    from cafe.recording.normalise import parse_path

    option = "cafe: @pytest.mark.cafe_recording(ignore=...)"
    if isinstance(ignore, str):
        plain = ignore.strip() and ignore.isprintable() and len(ignore) <= 60 and not set(ignore) & set('"\\')
        example = f'"{ignore}"' if plain else '"metadata.run_id"'
        pytest.fail(f"{option}: expected a list of field paths, found a string (write ignore=[{example}])",
                    pytrace=False)
    if not isinstance(ignore, list | tuple | set | frozenset):
        pytest.fail(f"{option}: expected a list of field paths, found {type(ignore).__name__} "
                    '(e.g. ignore=["metadata.run_id"])', pytrace=False)
    failure = None
    for declared in ignore:
        if not isinstance(declared, str):
            failure = f"expected a field path (a string), found {type(declared).__name__}"
            break
        try:
            parse_path(declared)
        except ValueError as error:
            failure = str(error)
            break
    if failure is not None:
        pytest.fail(f"{option}: {failure}", pytrace=False)


def recording_name(test: str) -> str:
    """A recording's file name for a test id within its module (`test_x[a, b]`,
    `TestCafe::test_x`): the id itself when it is a safe file name, else a readable slug
    of it, bounded in length, followed by a short hash of the whole id, so that two ids
    never share a name (`[A latte, please.]` and `[A latte; please.]` differ)."""
    readable = test.replace("::", ".")
    slug = re.sub(r"[^\w.-]+", "_", readable).strip("._-") or "test"
    exact = slug == readable and len(slug.encode("utf-8")) <= MAX_NAME_BYTES
    if exact:
        return f"{slug}.jsonl"
    bounded = slug.encode("utf-8")[:MAX_NAME_BYTES].decode("utf-8", "ignore").rstrip("._-") or "test"
    digest = hashlib.sha256(test.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_CHARS]
    return f"{bounded}-{digest}.jsonl"


def recording_path(request: pytest.FixtureRequest) -> Path:
    explicit = marker_options(request).get("path")
    here = Path(request.node.path).parent
    if explicit is not None:
        path = Path(explicit)
        return path if path.is_absolute() else here / path
    test = "::".join(request.node.nodeid.split("::")[1:]) or request.node.name
    return here / "recordings" / Path(request.node.path).stem / recording_name(test)


CLAIMED = pytest.StashKey[dict[str, str]]()


def claim(request: pytest.FixtureRequest, path: Path) -> None:
    """One recording per test in a session: a second test on the same file (a shared
    path=, or two names that one file system takes for the same: case, Unicode form)
    fails, instead of replaying or replacing the other's recording."""
    claims = request.config.stash.setdefault(CLAIMED, {})
    key = unicodedata.normalize("NFC", os.path.abspath(path)).casefold()
    owner = claims.setdefault(key, request.node.nodeid)
    if owner != request.node.nodeid:
        pytest.fail(f"cafe: {path}: this recording is already {owner}'s in this session; two tests cannot "
                    "share one (give this test its own @pytest.mark.cafe_recording(path=...))", pytrace=False)


def recording_exists(path: Path) -> bool:
    """Whether anything is at the recording's path; a path that cannot be examined (a name too
    long, a loop of links) fails the test in one line naming it and why."""
    from cafe._files import reason

    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as error:
        failure = f"cafe: {path}: the recording's path cannot be examined ({reason(error)})"
    else:
        return True
    pytest.fail(failure, pytrace=False)


def make_recording_directory(path: Path) -> None:
    """Make the directories a recording goes in, or fail the test in one line naming the
    recording and why they cannot be made (a file in the way, permission denied, a
    read-only file system)."""
    from cafe._files import reason
    from cafe.errors import Unwritable

    directory = path.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        # The part of the path that is there and is not a directory.
        blocker = next((part for part in (directory, *directory.parents)
                        if os.path.lexists(part) and not part.is_dir()), directory)
        why = f"its directory cannot be made: {blocker} is not a directory"
    except OSError as error:
        why = f"its directory {directory} cannot be made ({reason(error)})"
    else:
        return
    pytest.fail(f"cafe: {Unwritable(path, why, what='the recording')}", pytrace=False)


