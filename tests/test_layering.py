"""The import graph, read from the source: `cafe` never imports OpenTelemetry or `cafe_otel`
(the OTel layer reaches the harness through an entry point), and `cafe_otel` reaches `cafe`
only through its faces, never past them into the modules that hold the code."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What cafe_otel may import from the harness: the package faces, the error tree, the shared
# privacy and URL checks, and the plugin face of the CLI.
CAFE_FACES = {"cafe", "cafe.trace", "cafe.recording", "cafe.privacy", "cafe.urls", "cafe.wire",
              "cafe.errors", "cafe.view", "cafe.cli.plugins"}


def _imports(package: str, root: Path = ROOT) -> Iterator[tuple[str, int, str]]:
    for path in sorted((root / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):  # function-level imports too
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield str(path.relative_to(root)), node.lineno, alias.name
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                yield str(path.relative_to(root)), node.lineno, node.module


def _top(module: str) -> str:
    return module.split(".")[0]


def test_cafe_never_imports_opentelemetry_or_cafe_otel() -> None:
    found = [(where, line, module) for where, line, module in _imports("cafe")
             if _top(module) in ("opentelemetry", "cafe_otel")]
    assert found == []


def test_cafe_otel_reaches_cafe_only_through_its_faces() -> None:
    found = [(where, line, module) for where, line, module in _imports("cafe_otel")
             if _top(module) == "cafe" and module not in CAFE_FACES]
    assert found == []


def test_the_walk_finds_an_import_past_a_face_inside_a_function(tmp_path: Path) -> None:
    """A lazy import past a face, inside a function, is found as a top-level one is."""
    package = tmp_path / "layer"
    package.mkdir()
    (package / "mod.py").write_text("import cafe\n\ndef f():\n    from cafe.recording.reader import load_recording\n")
    found = [(where, line, module) for where, line, module in _imports("layer", tmp_path)
             if module not in CAFE_FACES]
    assert found == [("layer/mod.py", 4, "cafe.recording.reader")]
