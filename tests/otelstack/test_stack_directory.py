"""The stack directory and stack.json: never followed through a link, never a traceback,
private to its owner, and stack.json replaced whole."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from tests.otelstack.helpers import REPO, fake_program, one_error_line, record, stack, write_state

BOOT = "00000000-0000-4000-8000-000000000000"
GOOD = {"pid": 4242, "start_time": 1, "boot_id": BOOT, "executable": "/bin/sleep", "cmdline": ["sleep"]}


def _one(name: str, **changes: object) -> bytes:
    return json.dumps({"version": 1, "processes": {name: {**GOOD, **changes}}}).encode()


MALFORMED = {
    "empty": b"",
    "not json": b"{",
    "not utf-8": b"\xff\xfe{}",
    "nested deep": b"[" * 60000,
    "array": b"[]",
    "null": b"null",
    "older format": b'{"collector": 8388608}',  # above any pid_max: no process to hit
    "twice": b'{"version": 1, "version": 1, "processes": {}}',
    "nan": b'{"version": 1, "processes": {"collector": {"pid": NaN}}}',
    "version 2": json.dumps({"version": 2, "processes": {}}).encode(),
    "version text": json.dumps({"version": "1", "processes": {}}).encode(),
    "processes array": json.dumps({"version": 1, "processes": []}).encode(),
    "other program": json.dumps({"version": 1, "processes": {"prometheus": GOOD}}).encode(),
    "missing key": json.dumps({"version": 1, "processes": {"collector": {"pid": 4242}}}).encode(),
    "extra key": _one("collector", pgid=4242),
    "start_time text": _one("collector", start_time="1"),
    "boot_id other": _one("collector", boot_id="x\n"),
    "relative executable": _one("jaeger", executable="jaeger"),
    "empty cmdline": _one("jaeger", cmdline=[]),
    "cmdline numbers": _one("jaeger", cmdline=[1]),
    "too large": b" " * (65 * 1024) + b"{}",
}


@pytest.mark.parametrize("command", ["down", "up"])
@pytest.mark.parametrize("content", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_stack_json_is_one_named_error_and_is_kept(tmp_path, command, content) -> None:
    directory = tmp_path / ".stack"
    directory.mkdir(mode=0o700)
    (directory / "stack.json").write_bytes(content)

    result = stack(command, directory, CAFE_OTELCOL_BIN="/nonexistent", CAFE_JAEGER_BIN="/nonexistent")

    assert result.returncode == 61, (result.returncode, result.stdout, result.stderr)
    line = one_error_line(result)
    assert f"{directory}/stack.json: " in line and line.rstrip().endswith("nothing was signalled")
    assert (directory / "stack.json").read_bytes() == content


@pytest.mark.parametrize("command", ["down", "up"])
def test_a_stack_directory_that_is_a_file_is_refused(tmp_path, command) -> None:
    directory = tmp_path / ".stack"
    directory.write_text("notes")

    result = stack(command, directory, CAFE_OTELCOL_BIN="/nonexistent", CAFE_JAEGER_BIN="/nonexistent")

    assert result.returncode == 60 and f"{directory} is not a directory" in one_error_line(result)
    assert directory.read_text() == "notes"


@pytest.mark.parametrize("command", ["down", "up"])
def test_a_stack_directory_that_is_a_link_is_not_followed(tmp_path, sleepers, command) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    unrelated = sleepers(new_session=True)
    (elsewhere / "stack.json").write_text(json.dumps({"collector": unrelated.pid}))
    (tmp_path / ".stack").symlink_to(elsewhere)

    result = stack(command, tmp_path / ".stack", CAFE_OTELCOL_BIN="/nonexistent", CAFE_JAEGER_BIN="/nonexistent")

    assert unrelated.poll() is None
    assert result.returncode == 60 and "is a symbolic link; otelstack does not follow one" in one_error_line(result)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["stack.json"]


@pytest.mark.parametrize("command", ["down", "up"])
def test_a_stack_json_that_is_a_link_is_not_followed(tmp_path, sleepers, command) -> None:
    unrelated = sleepers(new_session=True)
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"collector": unrelated.pid}))
    directory = tmp_path / ".stack"
    directory.mkdir(mode=0o700)
    (directory / "stack.json").symlink_to(target)

    result = stack(command, directory, CAFE_OTELCOL_BIN="/nonexistent", CAFE_JAEGER_BIN="/nonexistent")

    assert unrelated.poll() is None
    assert result.returncode == 60 and f"{directory}/stack.json is a symbolic link" in one_error_line(result)
    assert target.read_text() == json.dumps({"collector": unrelated.pid})


@pytest.mark.parametrize("log", ["jaeger.log", "collector.log"])
def test_up_does_not_write_a_log_through_a_link(tmp_path, fakes_dir, log) -> None:
    directory = tmp_path / ".stack"
    directory.mkdir(mode=0o700)
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep\n")
    (directory / log).symlink_to(target)

    result = stack("up", directory, CAFE_OTELCOL_BIN=str(fake_program(fakes_dir, "collector", "exit")),
                   CAFE_JAEGER_BIN=str(fake_program(fakes_dir, "jaeger", "exit")))

    assert result.returncode == 60 and f"{directory}/{log} is a symbolic link" in one_error_line(result)
    assert target.read_text() == "keep\n"
    assert not (directory / "stack.json").exists() and not (fakes_dir / "pids").exists()


def test_up_makes_the_stack_directory_for_its_owner_only(tmp_path) -> None:
    directory = tmp_path / ".stack"

    result = stack("up", directory, CAFE_OTELCOL_BIN="/nonexistent", CAFE_JAEGER_BIN="/nonexistent")

    assert result.returncode == 63 and "CAFE_OTELCOL_BIN names /nonexistent, which is not" in one_error_line(result)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_down_makes_an_existing_stack_directory_private(tmp_path) -> None:
    directory = tmp_path / ".stack"
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)

    result = stack("down", directory)

    assert result.returncode == 0 and result.stdout == "stack was not running\n"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_stack_json_is_replaced_whole_and_private(tmp_path, sleepers) -> None:
    """A second name of the old stack.json (a hard link) keeps its content: `up` renames a
    new file over it instead of writing into it."""
    from otelstack.identity import ProcessIdentity
    from otelstack.state import StackDirectory

    ended = sleepers(new_session=True)
    old = write_state(tmp_path / ".stack", {"collector": record(ended.pid)})
    other_name = tmp_path / "other-name.json"
    other_name.hardlink_to(old)
    before = other_name.read_bytes()
    ours = ProcessIdentity(**{**record(ended.pid), "cmdline": ("python",)})  # type: ignore[arg-type]

    with StackDirectory.open(tmp_path / ".stack", create=False) as directory:  # type: ignore[union-attr]
        directory.write_state({"jaeger": ours})
        assert directory.read_state(frozenset({"jaeger"})) == {"jaeger": ours}

    assert other_name.read_bytes() == before
    assert stat.S_IMODE(old.stat().st_mode) == 0o600
    assert sorted(p.name for p in (tmp_path / ".stack").iterdir()) == ["stack.json"]
    assert isinstance(json.loads(old.read_text())["processes"]["jaeger"]["pid"], int)



@pytest.mark.parametrize("command", ["down", "up"])
@pytest.mark.parametrize("mode", [0o1777, 0o777, 0o703], ids=["sticky", "everyone", "others-write"])
def test_a_stack_directory_others_can_write_is_refused_and_left_as_it_is(tmp_path, command, mode) -> None:
    """A shared directory (/tmp, say) is neither used nor made private: others could swap what
    otelstack keeps there, and everyone else would lose the directory."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)

    result = stack(command, shared, CAFE_OTELCOL_BIN="/nonexistent", CAFE_JAEGER_BIN="/nonexistent")

    assert result.returncode == 60, (result.returncode, result.stdout, result.stderr)
    assert f"{shared} is writable by other users (mode {mode:o})" in one_error_line(result)
    assert stat.S_IMODE(shared.stat().st_mode) == mode and list(shared.iterdir()) == []


@pytest.mark.parametrize("command", ["down", "up"])
@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_stack_directory_is_a_usage_error_and_changes_nothing(tmp_path, command, value) -> None:
    """An empty --dir would be the working directory: `down` would make it private, `up` fill it."""
    here = tmp_path / "here"
    here.mkdir()
    here.chmod(0o755)

    result = subprocess.run([sys.executable, "-m", "otelstack", command, "--dir", value], cwd=here,
                            capture_output=True, text=True, timeout=60, check=False, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), "CAFE_OTELCOL_BIN": "/nonexistent",
                                 "CAFE_JAEGER_BIN": "/nonexistent"})

    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "argument --dir: needs a directory (an empty one names none)" in result.stderr
    assert "Traceback" not in result.stderr
    assert stat.S_IMODE(here.stat().st_mode) == 0o755 and list(here.iterdir()) == []


@pytest.mark.parametrize("command", ["down", "up"])
def test_a_stack_directory_under_a_file_is_named_as_such(tmp_path, command) -> None:
    (tmp_path / "notes").write_text("mine")

    result = stack(command, tmp_path / "notes" / ".stack", CAFE_OTELCOL_BIN="/nonexistent",
                   CAFE_JAEGER_BIN="/nonexistent")

    assert result.returncode == 60, (result.returncode, result.stdout, result.stderr)
    assert f"{tmp_path / 'notes'} is not a directory" in one_error_line(result)
    assert (tmp_path / "notes").read_text() == "mine"


def test_a_subdirectory_of_another_user_is_refused(tmp_path) -> None:
    from otelstack.errors import StackDirectoryUnusable
    from otelstack.state import StackDirectory

    directory = tmp_path / ".stack"
    directory.mkdir(mode=0o700)
    (directory / "queue").mkdir(mode=0o777)
    (directory / "queue").chmod(0o777)
    if os.geteuid() == 0:
        os.chown(directory / "queue", 65534, 65534)
    else:
        pytest.skip("only root can give a directory to another user")

    with StackDirectory.open(directory, create=False) as stack_directory:  # type: ignore[union-attr]
        with pytest.raises(StackDirectoryUnusable, match=r"queue belongs to another user"):
            stack_directory.subdirectory("queue")
        (directory / "jaeger").mkdir(mode=0o755)
        (directory / "jaeger").chmod(0o755)
        assert stack_directory.subdirectory("jaeger") == directory / "jaeger"
    assert stat.S_IMODE((directory / "jaeger").stat().st_mode) == 0o700
