"""`python -m otelstack up|down --dir DIR`: the local stack without Docker (`make up`, `make down`).

The built Collector (collector.yaml, one tier) and Jaeger (Badger storage under DIR, so a
restart keeps the traces), each bound to 127.0.0.1 on the usual ports: OTLP 4317/4318 into
the Collector, Jaeger's query API on 16686. `up --port PROGRAM.PORT=NUMBER` (repeated) moves
any of them (`--port collector.otlp_grpc=24317`), for a machine where another program holds
one; `down` needs none (stack.json names the processes). Both run in their own sessions, so they outlive
the command that started them; DIR (0700) holds their logs, stack.json, the Collector's queue
and Jaeger's data. A DIR others may write into (/tmp) is refused, not made private.

`up` refuses a port already in use, and calls a program up only while that process itself
runs and holds its ports (a health answer from another process proves nothing). stack.json
records each process's pid with its boot, start time, executable and command line; `down`
signals a pid only while all of them still match (otelstack.identity), and says of each
process whether it stopped, was already gone or was not ours.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from otelstack.binaries import BUILD_HINT, binary_path, usable
from otelstack.errors import (
    AlreadyUp,
    PortInUse,
    ProgramFailed,
    ProgramNotBuilt,
    StackDirectoryUnusable,
    StackError,
    StillRunning,
    one_line,
)
from otelstack.identity import (
    ProcessIdentity,
    identify,
    listening_ports,
    own_ids,
    pidfd,
    signal_group_members,
    verify,
)
from otelstack.layout import COLLECTOR_CONFIG, JAEGER_CONFIG
from otelstack.procs import LOOPBACK, http_get
from otelstack.state import STATE, StackDirectory

PORTS: dict[str, dict[str, int]] = {
    "collector": {"otlp_grpc": 4317, "otlp_http": 4318, "health": 13133, "metrics": 8888},
    "jaeger": {"otlp_grpc": 14317, "otlp_http": 14318, "query_http": 16686, "query_grpc": 16685, "health": 13134},
}
PROGRAMS = frozenset(PORTS)
GRACE = 15.0  # seconds a program has to exit after SIGTERM
KILL_WAIT = 5.0  # and after SIGKILL
POLL = 0.1
IDENTIFY_WAIT = 5.0  # seconds a new program's command line has to appear in /proc
Ports = Mapping[str, Mapping[str, int]]


@dataclass(frozen=True)
class Program:
    name: str
    argv: list[str]
    env: dict[str, str]
    health_url: str
    ports: Mapping[str, int]

    def port_name(self, port: int) -> str:
        label = next(label for label, number in self.ports.items() if number == port)
        return f"{self.name}'s {label.replace('_', ' ')} port {LOOPBACK}:{port}"


def _binary(variable: str, name: str, environ: Mapping[str, str]) -> Path:
    path, explicit = binary_path(variable, name, environ)
    if usable(path):
        return path
    if explicit:
        raise ProgramNotBuilt(f"{variable} names {path}, which is not an executable file")
    raise ProgramNotBuilt(f"{name} is not built at {path}; {BUILD_HINT}")


def _programs(stack: StackDirectory, environ: Mapping[str, str], ports: Ports) -> list[Program]:
    """Jaeger, then the Collector that exports to it."""
    c, j = ports["collector"], ports["jaeger"]
    collector = _binary("CAFE_OTELCOL_BIN", "otelcol-cafe", environ)
    jaeger = _binary("CAFE_JAEGER_BIN", "jaeger", environ)
    return [
        Program("jaeger", [str(jaeger), f"--config={JAEGER_CONFIG}"], {
            "CAFE_JAEGER_OTLP_GRPC_ENDPOINT": f"{LOOPBACK}:{j['otlp_grpc']}",
            "CAFE_JAEGER_OTLP_HTTP_ENDPOINT": f"{LOOPBACK}:{j['otlp_http']}",
            "CAFE_JAEGER_QUERY_HTTP_ENDPOINT": f"{LOOPBACK}:{j['query_http']}",
            "CAFE_JAEGER_QUERY_GRPC_ENDPOINT": f"{LOOPBACK}:{j['query_grpc']}",
            "CAFE_JAEGER_HEALTH_ENDPOINT": f"{LOOPBACK}:{j['health']}",
            "CAFE_JAEGER_DATA_DIR": str(stack.subdirectory("jaeger")),
        }, f"http://{LOOPBACK}:{j['health']}/status", j),
        Program("collector", [str(collector), f"--config={COLLECTOR_CONFIG}"], {
            "CAFE_OTLP_GRPC_ENDPOINT": f"{LOOPBACK}:{c['otlp_grpc']}",
            "CAFE_OTLP_HTTP_ENDPOINT": f"{LOOPBACK}:{c['otlp_http']}",
            "CAFE_OTELCOL_HEALTH_ENDPOINT": f"{LOOPBACK}:{c['health']}",
            "CAFE_OTELCOL_METRICS_HOST": LOOPBACK,
            "CAFE_OTELCOL_METRICS_PORT": str(c["metrics"]),
            "CAFE_OTELCOL_QUEUE_DIR": str(stack.subdirectory("queue")),
            "CAFE_UPSTREAM_OTLP_ENDPOINT": f"{LOOPBACK}:{j['otlp_grpc']}",
            "CAFE_UPSTREAM_TLS_INSECURE": "true",
            # No metrics backend runs without Docker (compose has Prometheus): the metrics
            # wait in the Collector's queue, on a loopback port nothing listens on.
            "CAFE_METRICS_UPSTREAM_ENDPOINT": f"http://{LOOPBACK}:9",
            # Nor a logs backend (Jaeger stores none): the content event waits the same way.
            "CAFE_LOGS_UPSTREAM_OTLP_ENDPOINT": f"{LOOPBACK}:9",
            "CAFE_LOGS_UPSTREAM_TLS_INSECURE": "true",
        }, f"http://{LOOPBACK}:{c['health']}/", c),
    ]


def _refuse_taken_ports(programs: list[Program]) -> None:
    for program in programs:
        for port in program.ports.values():
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                # As the programs' own listeners do: a closed connection's TIME_WAIT is no user.
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind((LOOPBACK, port))
                except OSError:
                    raise PortInUse(f"{program.port_name(port)} is in use by another process; "
                                    "nothing was started") from None


def _exit_status(child: subprocess.Popen[bytes]) -> int | None:
    """The child's exit status, or None while it runs. It stays unreaped (WNOWAIT), so its
    pid, and with it its group's id, names no other process until we reap it."""
    if child.returncode is not None:
        return child.returncode
    found = os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    if found is None:
        return None
    return found.si_status if found.si_code == os.CLD_EXITED else -found.si_status


def _ended(status: int) -> str:
    return f"was killed by signal {-status}" if status < 0 else f"exited with code {status}"


def _wait_serving(program: Program, child: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    """Until `child` itself listens on each of its ports and its health check answers 200."""
    wanted = set(program.ports.values())
    deadline = time.monotonic() + timeout
    while True:
        status = _exit_status(child)
        if status is not None:
            raise ProgramFailed(f"{program.name} {_ended(status)} before it served its ports; see {log}")
        healthy = http_get(program.health_url, timeout=1.0)[0] == 200
        held = listening_ports(child.pid)
        if healthy and wanted <= held and _exit_status(child) is None:
            return
        if time.monotonic() > deadline:
            if healthy and program.ports["health"] not in held:
                why = f"{program.port_name(program.ports['health'])} answers, but from another process"
            elif not wanted <= held:
                why = "it does not listen on " + ", ".join(str(p) for p in sorted(wanted - held))
            else:
                why = f"its health check {program.health_url} does not answer 200"
            raise ProgramFailed(f"{program.name} did not come up within {timeout:g} s: {why}; see {log}")
        time.sleep(0.25)


def _stop_started(children: list[subprocess.Popen[bytes]], grace: float) -> None:
    """Stop the children this `up` started (not yet reaped, so their pids are still theirs)."""
    for child in reversed(children):
        if child.returncode is None:
            signal_group_members(child.pid, signal.SIGTERM)
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for child in reversed(children):
        if child.returncode is not None:
            continue
        while _exit_status(child) is None and time.monotonic() < deadline:
            time.sleep(POLL)
        # A member it left behind (a daemon it forked) goes with it.
        signal_group_members(child.pid, signal.SIGKILL)
        if _exit_status(child) is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(KILL_WAIT)


def _identify_started(pid: int) -> ProcessIdentity | None:
    """The identity of a child just started. Popen returns once the exec is past its point of
    no return, while the kernel may still be mapping the new program: /proc then shows an empty
    command line, which `down` could never match. So the read is repeated, boundedly, until the
    command line is there; None when it never is, or the process is gone."""
    deadline = time.monotonic() + IDENTIFY_WAIT
    while True:
        identity = identify(pid)
        if identity is None or identity.cmdline:
            return identity
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.005)


def _start(stack: StackDirectory, programs: list[Program], environ: Mapping[str, str], timeout: float) -> None:
    children: list[subprocess.Popen[bytes]] = []
    records: dict[str, ProcessIdentity] = {}
    try:
        for program in programs:
            log = stack.open_log(f"{program.name}.log")
            try:
                child = subprocess.Popen(program.argv, env={**environ, **program.env}, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            finally:
                os.close(log)
            children.append(child)
            identity = _identify_started(child.pid)
            if identity is not None:
                records[program.name] = identity
                stack.write_state(records)
            _wait_serving(program, child, stack.path / f"{program.name}.log", timeout)
            if identity is None:
                raise ProgramFailed(f"{program.name} (pid {child.pid}) could not be identified in /proc")
        for program, child in zip(programs, children, strict=True):
            status = _exit_status(child)
            if status is not None:
                raise ProgramFailed(f"{program.name} {_ended(status)} while the stack came up; "
                                    f"see {stack.path / (program.name + '.log')}")
    except BaseException:
        _stop_started(children, GRACE)
        stack.remove_state()
        raise


def up(directory: Path, *, environ: Mapping[str, str] | None = None, ports: Ports | None = None,
       timeout: float = 60.0, out: TextIO | None = None) -> int:
    env = os.environ if environ is None else environ
    ports = PORTS if ports is None else ports
    stack = StackDirectory.open(directory, create=True)
    if stack is None:  # pragma: no cover - open(create=True) makes it or raises
        raise StackDirectoryUnusable(f"{directory}: cannot be created")
    with stack:
        running = [f"{name} pid {record.pid}" for name, record in stack.read_state(PROGRAMS).items()
                   if verify(record).ours]
        if running:
            raise AlreadyUp(f"already up ({', '.join(running)}); `python -m otelstack down --dir {directory}` first")
        programs = _programs(stack, env, ports)
        for program in programs:  # a link planted at a log is refused before anything starts
            os.close(stack.open_log(f"{program.name}.log"))
        _refuse_taken_ports(programs)
        _start(stack, programs, env, timeout)
    c, jaeger_ui = ports["collector"], f"http://{LOOPBACK}:{ports['jaeger']['query_http']}"
    print(f"""stack up (logs, queue and Jaeger's Badger data in {directory}):
  OTLP into the Collector   grpc http://{LOOPBACK}:{c['otlp_grpc']}   http http://{LOOPBACK}:{c['otlp_http']}
  Collector health, metrics http://{LOOPBACK}:{c['health']}/      http://{LOOPBACK}:{c['metrics']}/metrics
  Jaeger (query API)        {jaeger_ui}/api/traces/<trace id>   (the web UI is not built here)
then:
  CAFE_JAEGER_URL={jaeger_ui} .venv/bin/cafe shift --otlp http://{LOOPBACK}:{c['otlp_grpc']}
  make down""", file=out or sys.stdout)
    return 0


def _wait_gone(record: ProcessIdentity, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while verify(record).ours:
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL)
    return True


def _stop(record: ProcessIdentity, grace: float) -> tuple[str, bool | None]:
    """(what happened, stopped): stopped is True, False when it outlived SIGKILL, None when
    it was not signalled."""
    if record.pid in own_ids():
        return "not signalled: that pid is this otelstack process, its parent, group or session", None
    handle = pidfd(record.pid)
    if handle is None:
        return "already gone", None
    try:
        # The pidfd opened first: the process verified now is the one it signals.
        verdict = verify(record)
        if not verdict.ours:
            return ("already gone" if verdict.why_not is None
                    else f"not signalled: not the process `up` started ({verdict.why_not})"), None
        for signum, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, KILL_WAIT)):
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(handle, signum)
            # It leads its own group (verify checked its session), so the group is ours too.
            signal_group_members(record.pid, signum)
            if _wait_gone(record, wait):
                return "stopped", True
        return "still running after SIGKILL", False
    finally:
        os.close(handle)


def down(directory: Path, *, grace: float = GRACE, out: TextIO | None = None) -> int:
    write = out or sys.stdout
    stack = StackDirectory.open(directory, create=False)
    if stack is None:
        print("stack was not running", file=write)
        return 0
    with stack:
        records = stack.read_state(PROGRAMS)
        if not records:
            print("stack was not running", file=write)
            return 0
        stopped, left = 0, []
        # The Collector first: it may still deliver what it holds to Jaeger.
        for name, record in reversed(records.items()):
            what, result = _stop(record, grace)
            print(f"{name} (pid {record.pid}): {what}", file=write)
            stopped += result is True
            if result is False:
                left.append(f"{name} pid {record.pid}")
        if left:
            raise StillRunning(f"{', '.join(left)} outlived SIGKILL; {directory / STATE} is kept")
        stack.remove_state()
    print(f"stack down ({stopped} process(es) stopped)", file=write)
    return 0


def _port_setting(value: str) -> tuple[str, str, int]:
    """`PROGRAM.PORT=NUMBER` (`collector.otlp_grpc=24317`): a port of the stack moved."""
    name, equals, number = value.partition("=")
    program, _, label = name.strip().partition(".")
    known = ", ".join(f"{p}.{n}" for p, ports in PORTS.items() for n in ports)
    if not equals or program not in PORTS or label not in PORTS[program]:
        raise argparse.ArgumentTypeError(f"expected PROGRAM.PORT=NUMBER, PROGRAM.PORT one of {known}")
    number = number.strip()
    if not (number.isascii() and number.isdigit()) or not 1 <= int(number) <= 65535:
        raise argparse.ArgumentTypeError(f"{program}.{label}: expected a port number from 1 to 65535")
    return program, label, int(number)


def chosen_ports(settings: list[tuple[str, str, int]]) -> dict[str, dict[str, int]]:
    """The stack's ports: the usual ones, with each setting applied. Two ports alike are a
    ValueError (each program binds its own)."""
    ports = {program: dict(found) for program, found in PORTS.items()}
    for program, label, number in settings:
        ports[program][label] = number
    seen: dict[int, str] = {}
    for program, found in ports.items():
        for label, number in found.items():
            if number in seen:
                raise ValueError(f"{program}.{label} and {seen[number]} are both port {number}")
            seen[number] = f"{program}.{label}"
    return ports


def _directory(value: str) -> Path:
    # An empty value is Path("."), the working directory: `down` would make it private, `up` fill it.
    if not value.strip():
        raise argparse.ArgumentTypeError("needs a directory (an empty one names none), e.g. --dir .stack")
    return Path(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m otelstack", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("command", choices=["up", "down"])
    parser.add_argument("--dir", type=_directory, required=True, help="where the stack keeps logs, pids and data")
    parser.add_argument("--port", type=_port_setting, action="append", default=[], metavar="PROGRAM.PORT=NUMBER",
                        help="up: move one of the stack's ports, e.g. --port collector.otlp_grpc=24317 "
                             "(repeat for more; the usual ones otherwise)")
    args = parser.parse_args(argv)
    if args.port and args.command != "up":
        parser.error("--port: only `up` binds ports")
    try:
        ports = chosen_ports(args.port)
    except ValueError as error:
        parser.error(f"--port: {error}")
    try:
        return up(args.dir, ports=ports) if args.command == "up" else down(args.dir)
    except StackError as error:
        print(f"otelstack: error: {one_line(str(error))}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("otelstack: interrupted", file=sys.stderr)
        return 130
    except OSError as error:
        print(f"otelstack: error: {one_line(str(error))}", file=sys.stderr)
        return 70


if __name__ == "__main__":
    sys.exit(main())
