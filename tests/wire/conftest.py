"""The wire tests' fixtures: `http`, each covered client library installed here in turn."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from tests.wire.libraries import INSTALLED


@pytest.fixture(params=INSTALLED)
def http(request: pytest.FixtureRequest) -> ModuleType:
    return importlib.import_module(request.param)
