"""An empty path where a command reads a file is a usage error (exit 2, one line): it was
`Path("")`, which is `.`, and each command then said "`.`: it is a directory"."""

from __future__ import annotations

import io

import pytest

from cafe.cli import main
from cafe_otel.cli_plugin import plugin


@pytest.mark.parametrize("argv", [
    ["replay", ""], ["view", "", "-o", "page.html"], ["check-recording", " "],
    ["export", ""], ["golden", "", "g.otlp"], ["golden", "s.jsonl", ""],
])
def test_an_empty_file_path_is_a_usage_error(argv: list[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, environ={}, out=out, err=err, load_plugins=lambda warn: [plugin])
    assert (code, out.getvalue()) == (2, "")
    assert err.getvalue().count("\n") == 1 and "needs a file path (an empty path names no file)" in err.getvalue()
    assert "directory" not in err.getvalue()
