"""The docs a newcomer reads hold together: every relative link and anchor of every Markdown
file resolves, the docs stay within their budget, the Python blocks of README.md and docs/
run as written, and the `cafe` flags they name exist.

A Python block is run unless the line before its fence is `<!-- not run: REASON -->`. One that
is a pytest module (it marks a test `cafe_recording`, or asks for a fixture) is run by pytest
twice, against a local OpenAI-compatible server and then with that server stopped: recorded,
then replayed. Any other is run as a program. Both see the `OPENAI_*` variables of the local
server and the `OTEL_*` ones of a local OTLP/HTTP receiver, each in a directory of its own.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from cafe.cli.commands import build_parser
from cafe.cli.plugins import installed_plugins
from tests.local_http import QuietHandler, serving
from tests.test_flag_names import PYTEST, Mention, mentions_in, options_of, problems, subcommands
from tests.timing import SCHEDULING_SLACK
from tests.wire.openai_server import OpenAIServer

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
Commands = dict[str, dict[str, argparse.Action]]
BUDGET_BYTES = 100_000  # all Markdown under docs/, bench/ and the repository's root
BENCH_README_BYTES = 20_000
# Directories that hold no docs of ours: tools' caches, virtualenvs, builds.
_NOT_DOCS = {"node_modules", "build", "dist", "__pycache__"}
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(\S.*?)\s*-->$")


def markdown_files() -> list[Path]:
    """Every Markdown file of the repository, outside hidden and generated directories."""
    found = []
    for directory, names, files in os.walk(REPO):
        names[:] = sorted(n for n in names if not n.startswith(".") and n not in _NOT_DOCS
                          and not n.endswith(".egg-info"))
        found += [Path(directory) / name for name in sorted(files) if name.endswith(".md")]
    return found


def budgeted_files() -> list[Path]:
    """The Markdown the budget counts: under docs/ and bench/, and at the repository's root."""
    under = [path for top in ("docs", "bench") for path in sorted((REPO / top).rglob("*.md"))]
    return [*sorted(REPO.glob("*.md")), *under]


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    info: str
    text: str
    note: str  # what the line before the fence says of it: `<!-- not run: ... -->`, or ""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def split(text: str, path: Path) -> tuple[list[tuple[int, str]], list[Block]]:
    """The lines outside fenced code blocks (numbered from 1), and the blocks."""
    prose: list[tuple[int, str]] = []
    blocks: list[Block] = []
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        opening = FENCE.match(lines[number])
        if opening is None:
            prose.append((number + 1, lines[number]))
            number += 1
            continue
        marker, info = opening.group(2), opening.group(3).strip()
        start = number
        body = []
        number += 1
        while number < len(lines) and not lines[number].strip().startswith(marker):
            body.append(lines[number][len(opening.group(1)):])
            number += 1
        number += 1  # the closing fence
        before = lines[start - 1].strip() if start else ""
        note = before if NOT_RUN.match(before) else ""
        blocks.append(Block(path, start + 1, info, "\n".join(body) + "\n", note))
    return prose, blocks


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text without markup, lower case, punctuation
    removed (letters, digits, `_` and `-` kept), each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = text.replace("`", "").lower()
    text = "".join(char for char in text if char.isalnum() or char in " -_")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    prose, _ = split(path.read_text(encoding="utf-8"), path)
    seen: Counter[str] = Counter()
    found = set()
    for _, line in prose:
        heading = HEADING.match(line)
        if heading is None:
            continue
        base = slug(heading.group(2))
        found.add(base if not seen[base] else f"{base}-{seen[base]}")
        seen[base] += 1
    found |= {match.group(1) for _, line in prose for match in re.finditer(r'<a\s+(?:name|id)="([^"]+)"', line)}
    return found


def links(path: Path) -> Iterator[tuple[int, str]]:
    """(line, target) of every link and image outside code, in `path`."""
    prose, _ = split(path.read_text(encoding="utf-8"), path)
    for number, line in prose:
        line = CODE_SPAN.sub("", line)
        for match in LINK.finditer(line):
            yield number, match.group(1)
        reference = REFERENCE.match(line)
        if reference is not None:
            yield number, reference.group(1)


def broken_links(path: Path) -> list[str]:
    found = []
    for number, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
            continue  # https:, mailto:: not ours to check offline
        where = f"{path.relative_to(REPO)}:{number}: {target}"
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            found.append(f"{where}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            found.append(f"{where}: no heading #{anchor} in {linked.relative_to(REPO)}")
    return found


# --- links, anchors and the budget --------------------------------------------------------------


def test_the_link_checker_finds_links_and_anchors() -> None:
    # The collection works: it sees links that are certainly there, and a slug as GitHub makes it.
    readme = dict((target, number) for number, target in links(REPO / "README.md"))
    assert "docs/wire.md" in readme and "docs/view.png" in readme
    assert slug("From the command line: an unchanged program") == "from-the-command-line-an-unchanged-program"
    assert slug("The café: the worked example") == "the-café-the-worked-example"
    assert slug("Recording any agent on the wire (`cafe.wire`)") == "recording-any-agent-on-the-wire-cafewire"
    assert "version-2-wire-recordings" in anchors(REPO / "docs" / "recording-format.md")


def test_a_broken_link_or_anchor_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / "b.md").write_text("# Only heading\n\n## Twice\n\n## Twice\n", encoding="utf-8")
    page = tmp_path / "a.md"
    page.write_text("[ok](b.md#only-heading) [second](b.md#twice-1) [gone](c.md) [anchor](b.md#nowhere)\n"
                    "`[in code](missing.md)` [self](#a-title) [web](https://example.com/x)\n\n# A title\n\n"
                    "```\n[in a block](missing.md)\n```\n", encoding="utf-8")
    assert broken_links(page) == ["a.md:1: c.md: no such file", "a.md:1: b.md#nowhere: no heading #nowhere in b.md"]


@pytest.mark.parametrize("path", markdown_files(), ids=lambda path: str(path.relative_to(REPO)))
def test_every_relative_link_and_anchor_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_bench_readme_is_at_most_20_kb() -> None:
    size = (REPO / "bench" / "README.md").stat().st_size
    assert size <= BENCH_README_BYTES, f"bench/README.md is {size:,} bytes; at most {BENCH_README_BYTES:,}"


def test_the_markdown_under_docs_bench_and_the_root_is_at_most_100_kb() -> None:
    sizes = {str(path.relative_to(REPO)): path.stat().st_size for path in budgeted_files()}
    assert {"README.md", "CHANGELOG.md", "docs/cli.md", "bench/README.md"} <= set(sizes)
    assert sum(sizes.values()) <= BUDGET_BYTES, f"{sum(sizes.values()):,} bytes in all: {sizes}"


def test_the_docs_are_one_folder_beside_the_root_and_bench() -> None:
    # Elsewhere, only a README that says what each data file beside it is (configs, recordings).
    outside = set(markdown_files()) - set(budgeted_files())
    assert {str(path.relative_to(REPO)) for path in outside} <= {"collector-config/README.md",
                                                                  "tests/recordings/README.md"}


# --- the flags the docs name --------------------------------------------------------------------


def doc_mentions(paths: list[Path] | None = None) -> list[Mention]:
    """Each `--flag` of a code span or a code block line that names `cafe <command>` (what
    that line says of the command), and each `--cafe-...` flag, which is pytest's."""
    found = []
    for path in paths if paths is not None else [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        prose, blocks = split(path.read_text(encoding="utf-8"), path)
        pieces = [(number, match.group(2)) for number, line in prose for match in CODE_SPAN.finditer(line)]
        pieces += [(block.line + offset + 1, line) for block in blocks if block.info != "python"
                   for offset, line in enumerate(block.text.splitlines())]
        for number, piece in pieces:
            where = f"{path.name}:{number}"
            for mention in mentions_in(piece, where, ()):
                if mention.flag.startswith("--cafe-"):
                    found.append(Mention(where, mention.flag, mention.value, (PYTEST,)))
                elif mention.commands:
                    found.append(mention)
    return found


@pytest.fixture(scope="module")
def cafe_commands() -> Commands:
    parser = build_parser(installed_plugins(lambda line: None))
    return {"cafe": options_of(parser), **{name: options_of(sub) for name, sub in subcommands(parser).items()}}


def test_every_cafe_flag_a_doc_names_exists(cafe_commands: Commands, pytestconfig: pytest.Config) -> None:
    mentions = doc_mentions()
    assert any(m.flag == "--record-mode" and "record" in m.commands for m in mentions)
    assert any(m.flag == "--cafe-record-mode" for m in mentions)
    if len(installed_plugins(lambda line: None)) < len(entry_points(group="cafe.plugins")):
        # A plugin registered but not here (the example deleted): its commands cannot be asked.
        mentions = [m for m in mentions if set(m.commands) <= {*cafe_commands, PYTEST}]
    assert problems(mentions, cafe_commands, pytestconfig) == []


def test_a_doc_naming_a_flag_that_is_not_there_is_caught(
        cafe_commands: Commands, pytestconfig: pytest.Config, tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("Run `cafe replay-run r.jsonl --no-such-flag`, or pytest `--cafe-no-such`.\n\n"
                    "```\ncafe view r.jsonl --open\npip wheel --no-deps .\n```\n", encoding="utf-8")
    found = problems(doc_mentions([page]), cafe_commands, pytestconfig)
    assert found == ["page.md:1: --no-such-flag is not an option of cafe replay-run",
                     "page.md:1: --cafe-no-such is not a pytest option",
                     "page.md:4: --open is not an option of cafe view"]


# --- the Python blocks run ----------------------------------------------------------------------


def python_blocks() -> list[Block]:
    found = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        _, blocks = split(path.read_text(encoding="utf-8"), path)
        found += [block for block in blocks if block.info == "python"]
    return found


def is_pytest_module(block: Block) -> bool:
    tree = ast.parse(block.text)
    return any(isinstance(node, ast.FunctionDef) and node.name.startswith("test_") for node in tree.body)


def missing_modules(block: Block) -> list[str]:
    """The modules a block imports that are not installed here (a deleted example's)."""
    names = set()
    for node in ast.walk(ast.parse(block.text)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    missing = []
    for name in sorted(names):
        try:
            if importlib.util.find_spec(name) is None:
                missing.append(name)
        except ModuleNotFoundError:
            missing.append(name)
    return missing


class _OtlpReceiver(QuietHandler):
    """Takes every OTLP/HTTP export and answers it with an empty (successful) response."""

    def do_POST(self) -> None:
        self.read_body()
        self.answer(200, b"", "application/x-protobuf")


_SETTINGS = ("OPENAI_", "OTEL_", "CAFE_")


@pytest.fixture
def block_environ(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The environment a block runs in (in this process too, for pytest's inline runs): the
    caller's without its own model and telemetry settings, exporting to a local OTLP receiver,
    the café's recordings made offline. The model server's URL is added by the test."""
    for name in [name for name in os.environ if name.startswith(_SETTINGS)]:
        monkeypatch.delenv(name)
    with serving(_OtlpReceiver, name="otlp-receiver") as port:
        settings = {"OPENAI_API_KEY": "sk-test-docs-0123456789abcdef", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                    "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}", "CAFE_MODE": "offline"}
        for name, value in settings.items():
            monkeypatch.setenv(name, value)
        yield dict(os.environ)


def test_the_docs_have_python_blocks_of_both_kinds() -> None:
    blocks = python_blocks()
    where = {block.where.split(":")[0] for block in blocks}
    assert {"README.md", "docs/wire.md", "docs/instrumentation.md", "docs/telemetry.md"} <= where
    assert any(is_pytest_module(block) for block in blocks)
    assert any(not is_pytest_module(block) for block in blocks)
    assert all(NOT_RUN.match(block.note) for block in blocks if block.note)


def _tests_in(block: Block) -> int:
    return sum(1 for node in ast.parse(block.text).body if isinstance(node, ast.FunctionDef)
               and node.name.startswith("test_"))


@pytest.mark.parametrize("block", python_blocks(), ids=lambda block: block.where)
def test_a_python_block_of_the_docs_runs_as_written(
        block: Block, block_environ: dict[str, str], pytester: pytest.Pytester,
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if block.note:
        pytest.skip(f"{block.where}: {block.note}")
    missing = missing_modules(block)
    if missing:
        pytest.skip(f"{block.where} imports {', '.join(missing)}, not installed here")
    if is_pytest_module(block):
        pytester.makepyfile(test_doc_block=block.text)
        with OpenAIServer.running() as server:
            monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
            pytester.runpytest("-p", "no:cacheprovider", "-W", "error::DeprecationWarning").assert_outcomes(
                passed=_tests_in(block))
        assert list((pytester.path / "recordings").rglob("*.jsonl")), f"{block.where} recorded nothing"
        # Replayed with the server gone: a call that reached for the network would fail.
        pytester.runpytest("-p", "no:cacheprovider", "-W", "error::DeprecationWarning").assert_outcomes(
            passed=_tests_in(block))
        return
    program = tmp_path / "block.py"
    program.write_text(block.text, encoding="utf-8")
    with OpenAIServer.running() as server:
        done = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", str(program)], cwd=tmp_path,
                              env={**block_environ, "OPENAI_BASE_URL": server.base_url}, capture_output=True,
                              text=True, timeout=120 + SCHEDULING_SLACK)
    assert done.returncode == 0, f"{block.where} exited {done.returncode}:\n{done.stderr[-3000:]}"
