"""`otelstack up` calls the stack up only while the processes it started run and serve their
own ports: a health answer from anyone else proves nothing. The programs are stand-ins
(tests/otelstack/helpers.py FAKE) on ports drawn free for the test."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from otelstack.errors import AlreadyUp, PortInUse, ProgramFailed
from otelstack.local import down, up
from otelstack.procs import free_ports
from tests.local_http import QuietHandler, serving
from tests.otelstack.helpers import fake_pids, fake_program, gone, stat_fields

NAMES = {"collector": ("otlp_grpc", "otlp_http", "health", "metrics"),
         "jaeger": ("otlp_grpc", "otlp_http", "query_http", "query_grpc", "health")}


@pytest.fixture
def ports() -> dict[str, dict[str, int]]:
    drawn = iter(free_ports(*(f"{program}.{label}" for program, labels in NAMES.items() for label in labels)).values())
    return {program: {label: next(drawn) for label in labels} for program, labels in NAMES.items()}


@pytest.fixture
def directory(tmp_path: Path) -> Iterator[Path]:
    """The stack directory; whatever stack.json still names at the end is stopped by `down`."""
    path = tmp_path / ".stack"
    yield path
    if (path / "stack.json").exists():
        down(path, grace=5, out=io.StringIO())


def _environ(fakes_dir: Path, collector: str = "serve", jaeger: str = "serve") -> dict[str, str]:
    return {**os.environ, "CAFE_OTELCOL_BIN": str(fake_program(fakes_dir, "collector", collector)),
            "CAFE_JAEGER_BIN": str(fake_program(fakes_dir, "jaeger", jaeger))}


class Healthy(QuietHandler):
    def do_GET(self) -> None:
        self.answer(200, b"{}")


def _start_times(pids: dict[str, int]) -> dict[str, int]:
    found = {name: stat_fields(pid) for name, pid in pids.items()}
    return {name: int(fields[19]) for name, fields in found.items() if fields is not None}


@pytest.mark.parametrize(("program", "label"), [("collector", "health"), ("collector", "otlp_grpc"),
                                                ("jaeger", "health")])
def test_up_refuses_a_port_another_process_already_answers(directory, fakes_dir, ports, program, label) -> None:
    with serving(Healthy) as taken:
        ports[program][label] = taken
        with pytest.raises(PortInUse) as raised:
            up(directory, environ=_environ(fakes_dir), ports=ports, timeout=30, out=io.StringIO())

    assert str(raised.value) == (f"{program}'s {label.replace('_', ' ')} port 127.0.0.1:{taken} is in use by "
                                 "another process; nothing was started")
    assert raised.value.exit_code == 62
    assert fake_pids(fakes_dir) == {} and not (directory / "stack.json").exists()


def test_up_fails_when_the_collector_exits_and_another_process_answers_its_port(directory, fakes_dir, ports) -> None:
    """The Collector forks a process that serves its ports, and exits: up is not up."""
    out = io.StringIO()
    with pytest.raises(ProgramFailed) as raised:
        up(directory, environ=_environ(fakes_dir, collector="detach"), ports=ports, timeout=30, out=out)

    assert str(raised.value).startswith("collector exited with code 0 before it served its ports; see ")
    assert "stack up" not in out.getvalue() and not (directory / "stack.json").exists()
    assert all(gone(pid, start) for pid, start in _start_times(fake_pids(fakes_dir)).items())


def test_up_fails_when_its_health_port_is_answered_by_another_process(directory, fakes_dir, ports) -> None:
    """The Collector runs, but what answers its health check is another process (here, one it
    forked): up waits for the Collector itself, and gives up at its timeout."""
    with pytest.raises(ProgramFailed) as raised:
        up(directory, environ=_environ(fakes_dir, collector="elsewhere"), ports=ports, timeout=3, out=io.StringIO())

    health = ports["collector"]["health"]
    assert str(raised.value).startswith(f"collector did not come up within 3 s: collector's health port "
                                        f"127.0.0.1:{health} answers, but from another process; see ")
    assert not (directory / "stack.json").exists()
    assert all(gone(pid, start) for pid, start in _start_times(fake_pids(fakes_dir)).items())


def test_up_stops_jaeger_when_the_collector_exits(directory, fakes_dir, ports) -> None:
    with pytest.raises(ProgramFailed, match=r"^collector exited with code 3 before it served its ports"):
        up(directory, environ=_environ(fakes_dir, collector="exit"), ports=ports, timeout=30, out=io.StringIO())

    pids = fake_pids(fakes_dir)
    assert set(pids) == {"jaeger", "collector"}
    assert all(gone(pid, start) for pid, start in _start_times(pids).items())
    assert not (directory / "stack.json").exists()


def test_up_then_down_with_programs_that_serve_their_ports(directory, fakes_dir, ports) -> None:
    out = io.StringIO()
    assert up(directory, environ=_environ(fakes_dir), ports=ports, timeout=60, out=out) == 0
    assert out.getvalue().startswith("stack up") and f"127.0.0.1:{ports['collector']['otlp_grpc']}" in out.getvalue()
    recorded = json.loads((directory / "stack.json").read_text())["processes"]
    pids = fake_pids(fakes_dir)
    assert {name: r["pid"] for name, r in recorded.items()} == pids
    for name in ("jaeger.log", "collector.log", "stack.json"):
        assert (directory / name).stat().st_mode & 0o777 == 0o600, name
    for name in ("jaeger", "queue", "."):
        assert (directory / name).stat().st_mode & 0o777 == 0o700, name

    with pytest.raises(AlreadyUp):
        up(directory, environ=_environ(fakes_dir), ports=ports, timeout=60, out=io.StringIO())
    starts = _start_times(pids)
    assert set(starts) == {"jaeger", "collector"}, "a second up stopped the running stack"

    said = io.StringIO()
    assert down(directory, out=said) == 0
    assert said.getvalue().splitlines() == [f"collector (pid {pids['collector']}): stopped",
                                            f"jaeger (pid {pids['jaeger']}): stopped",
                                            "stack down (2 process(es) stopped)"]
    assert all(gone(pid, starts[name], timeout=1) for name, pid in pids.items())
    assert not (directory / "stack.json").exists()


def test_up_records_a_command_line_down_can_match_when_proc_shows_it_late(directory, fakes_dir, ports,
                                                                          monkeypatch) -> None:
    # Right after its exec a program's /proc command line can read empty while the kernel maps it.
    import dataclasses

    from otelstack import local

    real, early = local.identify, {"reads": 0}

    def identify_mid_exec(pid: int):
        found = real(pid)
        early["reads"] += 1
        return dataclasses.replace(found, cmdline=()) if found is not None and early["reads"] <= 3 else found

    monkeypatch.setattr(local, "identify", identify_mid_exec)
    assert up(directory, environ=_environ(fakes_dir), ports=ports, timeout=60, out=io.StringIO()) == 0
    recorded = json.loads((directory / "stack.json").read_text())["processes"]
    assert all(record["cmdline"] for record in recorded.values())
    said = io.StringIO()
    assert down(directory, out=said) == 0
    assert said.getvalue().splitlines()[-1] == "stack down (2 process(es) stopped)"


def test_the_command_line_moves_the_ports_it_is_told_and_keeps_the_others(directory, fakes_dir, ports,
                                                                           monkeypatch, capsys) -> None:
    from otelstack.local import PORTS, main

    for name, value in _environ(fakes_dir).items():
        monkeypatch.setenv(name, value)
    options = [f"--port={program}.{label}={number}" for program, found in ports.items()
               for label, number in found.items()]
    assert main(["up", "--dir", str(directory), *options]) == 0
    said = capsys.readouterr().out
    assert f"grpc http://127.0.0.1:{ports['collector']['otlp_grpc']}" in said
    assert f"CAFE_JAEGER_URL=http://127.0.0.1:{ports['jaeger']['query_http']}" in said
    assert not any(f":{number}" in said for found in PORTS.values() for number in found.values())
    assert down(directory, out=io.StringIO()) == 0


def test_the_usual_ports_stay_the_default():
    from otelstack.local import PORTS, chosen_ports

    assert chosen_ports([]) == PORTS
    moved = chosen_ports([("collector", "otlp_grpc", 24317)])
    assert moved["collector"] == {**PORTS["collector"], "otlp_grpc": 24317} and moved["jaeger"] == PORTS["jaeger"]


@pytest.mark.parametrize(("options", "message"), [
    (["--port", "collector.otlp=1"], "expected PROGRAM.PORT=NUMBER, PROGRAM.PORT one of collector.otlp_grpc"),
    (["--port", "collector.otlp_grpc"], "expected PROGRAM.PORT=NUMBER"),
    (["--port", "collector.otlp_grpc=0"], "collector.otlp_grpc: expected a port number from 1 to 65535"),
    (["--port", "collector.otlp_grpc=70000"], "expected a port number from 1 to 65535"),
    (["--port", "collector.otlp_grpc=４３"], "expected a port number from 1 to 65535"),
    (["--port", "collector.otlp_grpc=14317"], "jaeger.otlp_grpc and collector.otlp_grpc are both port 14317"),
])
def test_a_bad_port_setting_is_one_usage_line_and_starts_nothing(tmp_path, options, message) -> None:
    import subprocess
    import sys

    from tests.otelstack.helpers import REPO

    directory = tmp_path / ".stack"
    result = subprocess.run([sys.executable, "-m", "otelstack", "up", "--dir", str(directory), *options], cwd=REPO,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith("python -m otelstack: error: ")
    assert not directory.exists()
