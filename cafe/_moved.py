"""Names that moved to the café example (`cafe.counter`), still found where they were, with a
`DeprecationWarning` that says where they are now."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def forwarding(where: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `where` that finds each name of `moved` in the module it
    names, warning once a lookup that the name is to be imported from there."""

    def __getattr__(name: str) -> Any:
        module = moved.get(name)
        if module is None:
            raise AttributeError(f"module {where!r} has no attribute {name!r}")
        warnings.warn(f"{where}.{name} moved to {module}.{name}: import it from {module} (the café example); "
                      f"{where} no longer holds it", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), name)

    return __getattr__
