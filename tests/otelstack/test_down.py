"""`otelstack down` signals a pid only while it is provably the process `up` started.

Each stand-in for "a pid the kernel gave to an unrelated process" is a sleeper this test
starts itself; `down` runs in its own session, so a wrong signal could reach only it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.otelstack.helpers import REPO, gone, one_error_line, record, stack, stat_fields, write_state


@pytest.mark.parametrize("differs", [
    {"start_time": 1},  # the pid was freed and given to a later process
    {"boot_id": "00000000-0000-4000-8000-000000000000"},  # recorded before a reboot
    {"executable": "/usr/bin/otelcol-cafe"},
    {"cmdline": ["otelcol-cafe", "--config=collector.yaml"]},
], ids=["start_time", "boot_id", "executable", "cmdline"])
def test_down_leaves_a_process_whose_identity_differs_from_the_record(tmp_path, sleepers, differs) -> None:
    unrelated = sleepers(new_session=True)
    state = write_state(tmp_path / ".stack", {"collector": record(unrelated.pid, **differs)})

    down = stack("down", tmp_path / ".stack")

    assert unrelated.poll() is None, "down signalled a process it did not start"
    assert down.returncode == 0, down.stderr
    assert f"collector (pid {unrelated.pid}): not signalled: not the process `up` started (" in down.stdout
    assert "stack down (0 process(es) stopped)" in down.stdout
    assert not state.exists()


def test_down_refuses_a_bare_pid_of_an_older_stack_json(tmp_path, sleepers) -> None:
    unrelated = sleepers(new_session=True)
    state = tmp_path / ".stack" / "stack.json"
    state.parent.mkdir()
    state.write_text(json.dumps({"collector": unrelated.pid}))

    down = stack("down", tmp_path / ".stack")

    assert unrelated.poll() is None, "down signalled a pid that nothing proves is ours"
    assert down.returncode == 61 and "stack.json: the top level: expected exactly the keys" in one_error_line(down)
    assert state.read_text() == json.dumps({"collector": unrelated.pid})


@pytest.mark.parametrize("bare", [False, True], ids=["recorded", "bare-pid"])
def test_down_does_not_call_a_process_outside_its_own_session_stopped(tmp_path, sleepers, bare) -> None:
    """`up` starts each program as the leader of a new session; a process that leads none is
    not one of them, even when everything else about it matches."""
    unrelated = sleepers(new_session=False)
    directory = tmp_path / ".stack"
    if bare:
        directory.mkdir()
        (directory / "stack.json").write_text(json.dumps({"jaeger": unrelated.pid}))
    else:
        write_state(directory, {"jaeger": record(unrelated.pid)})

    down = stack("down", directory)

    assert unrelated.poll() is None
    assert "stopped)" not in down.stdout or "(0 process(es) stopped)" in down.stdout
    if bare:
        assert down.returncode == 61 and one_error_line(down)
    else:
        assert down.returncode == 0, down.stderr
        assert "not signalled: not the process `up` started (it does not lead its own session" in down.stdout


@pytest.mark.parametrize("pid", [0, 1, -1, True, 1.5, "4242", 1 << 40])
def test_down_refuses_a_pid_no_process_of_up_can_have(tmp_path, pid) -> None:
    state = write_state(tmp_path / ".stack", {"collector": {
        "pid": pid, "start_time": 1, "boot_id": "00000000-0000-4000-8000-000000000000",
        "executable": "/bin/sleep", "cmdline": ["sleep"]}})
    before = state.read_bytes()

    down = stack("down", tmp_path / ".stack")

    assert down.returncode == 61, (down.returncode, down.stdout, down.stderr)
    assert "processes.collector.pid: expected a whole number above 1" in one_error_line(down)
    assert state.read_bytes() == before


def test_down_never_signals_its_own_group_for_a_pid_of_0(tmp_path) -> None:
    """The state file of an older otelstack, with pid 0: killpg(0) would be down's own group."""
    state = tmp_path / ".stack" / "stack.json"
    state.parent.mkdir()
    state.write_text('{"collector": 0}')

    down = stack("down", tmp_path / ".stack")

    assert down.returncode == 61, f"down ended with {down.returncode} (a negative one is the signal it got)"
    one_error_line(down)


# Runs `down` from a process whose own identity the state file records.
_SELF = """
import json, os, sys
from pathlib import Path
from otelstack.identity import identify
from otelstack.local import main
directory = Path(sys.argv[1])
me = identify(os.getpid())
directory.mkdir(mode=0o700)
(directory / "stack.json").write_text(json.dumps({"version": 1, "processes": {"collector": {
    "pid": me.pid, "start_time": me.start_time, "boot_id": me.boot_id, "executable": me.executable,
    "cmdline": list(me.cmdline)}}}))
sys.exit(main(["down", "--dir", str(directory)]))
"""


def test_down_never_signals_itself(tmp_path) -> None:
    down = subprocess.run([sys.executable, "-c", _SELF, str(tmp_path / ".stack")], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False, start_new_session=True)

    assert down.returncode == 0, (down.returncode, down.stderr)
    assert "not signalled: that pid is this otelstack process" in down.stdout


def test_down_stops_the_process_it_recorded_and_its_group(tmp_path, sleepers) -> None:
    ours = sleepers(new_session=True, member=True)
    member = int((tmp_path / "member-0").read_text())
    member_fields = stat_fields(member)
    assert member_fields is not None
    state = write_state(tmp_path / ".stack", {"collector": record(ours.pid)})

    down = stack("down", tmp_path / ".stack")

    assert down.returncode == 0, down.stderr
    assert ours.wait(30) == -15  # SIGTERM
    assert gone(member, int(member_fields[19]))
    assert f"collector (pid {ours.pid}): stopped" in down.stdout and "stack down (1 process(es) stopped)" in down.stdout
    assert not state.exists()


def test_down_kills_what_outlives_its_grace(tmp_path, sleepers) -> None:
    from otelstack.local import down

    ours = sleepers(new_session=True, ignore_term=True)
    write_state(tmp_path / ".stack", {"jaeger": record(ours.pid)})

    assert down(tmp_path / ".stack", grace=0.5) == 0
    assert ours.wait(30) == -9  # SIGKILL


def test_down_says_a_recorded_process_that_ended_is_already_gone(tmp_path, sleepers) -> None:
    ended = sleepers(new_session=True)
    recorded = record(ended.pid)
    ended.kill()
    ended.wait(10)
    write_state(tmp_path / ".stack", {"collector": recorded})

    down = stack("down", tmp_path / ".stack")

    assert down.returncode == 0, down.stderr
    assert f"collector (pid {ended.pid}): already gone" in down.stdout
    assert "stack down (0 process(es) stopped)" in down.stdout
