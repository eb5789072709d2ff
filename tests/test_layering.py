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
              "cafe.errors", "cafe.view", "cafe.cli.plugins", "cafe.apis", "cafe.counter"}


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


# The worked example and its OpenTelemetry side: the product never imports them.
EXAMPLE = ("cafe.counter", "cafe_otel._counter")


def _module_of(path: str) -> str:
    name = path[:-3].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def _in_example(module: str) -> bool:
    return any(module == example or module.startswith(example + ".") for example in EXAMPLE)


def test_the_product_never_imports_the_cafe_example() -> None:
    found = [(where, line, module) for package in ("cafe", "cafe_otel")
             for where, line, module in _imports(package)
             if not _in_example(_module_of(where)) and _in_example(module)]
    assert found == []


def _graph(packages: tuple[str, ...], root: Path = ROOT) -> dict[str, set[str]]:
    """Each module of `packages` and the modules of theirs it imports (a `from X import y`
    of a submodule `X.y` counts as importing `X.y`), function-level imports included."""
    modules = {_module_of(str(path.relative_to(root))) for package in packages
               for path in (root / package).rglob("*.py")}
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            here = _module_of(str(path.relative_to(root)))
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                targets: list[str] = []
                if isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    targets = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
                for target in targets:
                    while target and target not in modules:
                        target = target.rpartition(".")[0]
                    if target and target != here and not here.startswith(target + "."):
                        graph[here].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_modules_import_each_other() -> None:
    """No import cycle in the product, the example or the benchmarks, lazy imports included: a
    package's `__init__` importing its own modules is the one direction allowed."""
    assert _cycles(_graph(("cafe", "cafe_otel", "bench"))) == []


def test_the_cycle_check_finds_two_modules_that_import_each_other(tmp_path: Path) -> None:
    package = tmp_path / "ring"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from ring.b import f\n")
    (package / "b.py").write_text("def f():\n    from ring import a\n")
    assert _cycles(_graph(("ring",), tmp_path)) == [["ring.a", "ring.b"]]
