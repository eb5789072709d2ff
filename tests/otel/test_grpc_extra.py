"""OTLP/gRPC is the `grpc` extra: without it, recording, replay and OTLP/HTTP work, and asking
for gRPC is one named error (exit 20) whose remedy installs what is missing."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import cafe_otel
from cafe_otel._export.grpc_extra import GRPC_EXTRA, GRPC_REQUIREMENT, INSTALL_GRPC, GrpcExtraMissing

REPO = Path(__file__).resolve().parents[2]
GRPC_MODULES = ("grpc", "opentelemetry.exporter.otlp.proto.grpc",
                "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
                "opentelemetry.exporter.otlp.proto.grpc.metric_exporter")
# Run before anything else in a child interpreter: gRPC as if it were not installed.
WITHOUT_GRPC = (
    "import sys\n"
    "class _NoGrpc:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'grpc' or name.startswith(('grpc.', 'opentelemetry.exporter.otlp.proto.grpc')):\n"
    "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
    "sys.meta_path.insert(0, _NoGrpc())\n"
)


@pytest.fixture
def no_grpc(monkeypatch):
    for name in GRPC_MODULES:
        monkeypatch.setitem(sys.modules, name, None)  # `import name` raises ImportError


@pytest.mark.parametrize("environ", [
    {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
    {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"},
], ids=["traces", "metrics"])
def test_grpc_without_the_extra_is_a_named_error_naming_the_extra(no_grpc, environ):
    with pytest.raises(GrpcExtraMissing) as raised:
        cafe_otel.configure("svc", endpoint="http://127.0.0.1:4317", environ=environ)
    assert raised.value.exit_code == 20
    message = str(raised.value)
    assert INSTALL_GRPC in message and "\n" not in message
    assert "http/protobuf" in message


def test_http_needs_no_grpc(no_grpc):
    handle = cafe_otel.configure("svc", endpoint="http://127.0.0.1:9", protocol="http/protobuf", environ={})
    handle.shutdown(0.5)


def test_the_remedy_installs_the_extras_requirement_which_provides_the_missing_modules():
    # cafe-otel is not on PyPI: the remedy names what the extra requires, which is.
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"][GRPC_EXTRA] == [GRPC_REQUIREMENT]
    assert GRPC_REQUIREMENT in INSTALL_GRPC and project["name"] not in INSTALL_GRPC
    core = {Requirement(r).name for r in project["dependencies"]}
    wanted = {Requirement(r).name for r in project["optional-dependencies"][GRPC_EXTRA]}
    assert "opentelemetry-exporter-otlp-proto-grpc" in wanted
    assert not any("grpc" in dist for dist in core), "the core must not pull in gRPC"
    # The distribution the extra names is the one that provides what was missing, with grpcio.
    dist = importlib.metadata.distribution("opentelemetry-exporter-otlp-proto-grpc")
    files = {str(f) for f in dist.files or ()}
    assert "opentelemetry/exporter/otlp/proto/grpc/trace_exporter/__init__.py" in files
    assert any(Requirement(r).name == "grpcio" for r in dist.requires or ())


def _cli_without_grpc(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    code = WITHOUT_GRPC + f"from cafe.cli import main\nraise SystemExit(main({args!r}))\n"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "OTEL_SDK_DISABLED": "false"})


def test_record_and_replay_run_without_grpc_and_otlp_grpc_names_the_extra(tmp_path):
    path = tmp_path / "agent.jsonl"
    program = ["--", sys.executable, "-c", "print('served')"]
    recorded = _cli_without_grpc(["record", str(path), *program], tmp_path)
    assert recorded.returncode == 0 and "served" in recorded.stdout, recorded.stderr
    replayed = _cli_without_grpc(["replay-run", str(path), *program], tmp_path)
    assert replayed.returncode == 0 and "served" in replayed.stdout, replayed.stderr
    asked = _cli_without_grpc(["export", str(path), "--otlp-protocol", "grpc", "--otlp", "http://127.0.0.1:9"],
                              tmp_path)
    assert asked.returncode == 20, asked.stderr
    assert "Traceback" not in asked.stderr
    assert INSTALL_GRPC in asked.stderr
    assert len(asked.stderr.strip().splitlines()) == 1
