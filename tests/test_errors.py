"""The error tree `cafe/errors.py` draws is the tree of the classes, each exit code has one
meaning, and docs/cli.md carries the exit table made from it."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from pathlib import Path

import cafe
import cafe_otel
import otelstack
from cafe.errors import CafeError, documented_tree, exit_table

ROOT = Path(__file__).resolve().parent.parent


def _import_everything() -> None:
    """Every module of the three packages (not `__main__`, which runs a command), so that no
    error class escapes the walk by living in a module nothing imported yet."""
    for package in (cafe, cafe_otel, otelstack):
        for module in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + "."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)


def _present(module: str) -> bool:
    """Whether the module an entry of the tree names is installed: the example's errors are
    drawn there too, and the product works (and is checked) without the example."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a package above it is not there
        return False


def _drawn() -> list[object]:
    return [entry for entry in documented_tree() if entry.module is None or _present(entry.module)]


def _classes() -> list[type[CafeError]]:
    _import_everything()
    found: list[type[CafeError]] = []
    pending: list[type[CafeError]] = [CafeError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending += cls.__subclasses__()
    # A private class (`_Reported`) stands for an error of another process, with its code.
    return [cls for cls in found if not cls.__name__.startswith("_")]


def _base(cls: type[CafeError]) -> type[CafeError] | None:
    return next((base for base in cls.__bases__ if issubclass(base, CafeError)), None)


def _parent(cls: type[CafeError]) -> str | None:
    base = _base(cls)
    return None if base is None else base.__name__


def _owner(cls: type[CafeError]) -> type[CafeError]:
    """The topmost class on `cls`'s line with its exit code: the one whose meaning it refines."""
    base = _base(cls)
    while base is not None and base.exit_code == cls.exit_code:
        cls, base = base, _base(base)
    return cls


def test_the_docstring_draws_every_error_class_where_it_is_with_its_exit_code():
    real = {(cls.__name__, cls.exit_code, _parent(cls), cls.__module__) for cls in _classes()}
    drawn = {(e.name, e.exit_code, e.parent, e.module) for e in _drawn() if e.name is not None}
    assert drawn - real == set(), "drawn in cafe/errors.py but not so in the code"
    assert real - drawn == set(), "in the code but not drawn so in cafe/errors.py"


def test_each_exit_code_has_one_meaning():
    """A class shares a code only with the ancestor whose meaning it refines; the code is
    described once, on the class that owns it (or once for a code no class carries)."""
    owners: dict[int, set[str]] = {}
    for cls in _classes():
        owners.setdefault(cls.exit_code, set()).add(_owner(cls).__name__)
    assert {code: names for code, names in owners.items() if len(names) > 1} == {}
    owning = {name for names in owners.values() for name in names}
    for entry in _drawn():
        if entry.name is not None:
            assert (entry.meaning is not None) == (entry.name in owning), entry
    described = [e.exit_code for e in documented_tree() if e.meaning is not None]
    assert len(described) == len(set(described)), "a code described twice"


def test_the_codes_no_class_carries_are_the_ones_the_command_returns():
    from cafe.cli._main import EXIT_INTERNAL
    from cafe.cli.termination import EXIT_TERMINATED

    classless = {e.exit_code for e in documented_tree() if e.name is None}
    assert classless == {EXIT_INTERNAL, 130, EXIT_TERMINATED}
    assert classless.isdisjoint(cls.exit_code for cls in _classes())


def test_docs_cli_carries_the_exit_table_as_it_is():
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    table = exit_table()
    start = "<!-- exit table: generated from cafe/errors.py, checked by tests/test_errors.py -->\n"
    end = "<!-- end of exit table -->"
    assert text.count(start) == 1 and text.count(end) == 1
    assert text[text.index(start) + len(start):text.index(end)] == table, \
        f"docs/cli.md is stale; the table is now:\n{table}"
    assert "| exit |" not in (ROOT / "README.md").read_text(encoding="utf-8"), "one exit table, in docs/cli.md"
