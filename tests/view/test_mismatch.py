"""A failed replay as a page: `cafe replay --report` and the pytest plugin's --cafe-report-dir."""

from __future__ import annotations

import io
import re
import stat
from pathlib import Path

import pytest

from cafe import Tracer, make_responder, record_shift
from cafe.cli import main
from cafe.clients.scripted import ScriptedClient
from cafe.demo import DEFAULT_DECISIONS, DEFAULT_SCRIPT
from tests.view.browser import visit
from tests.view.test_view import rows_of

pytest_plugins = ["pytester"]


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), environ={}, out=out, err=err, load_plugins=lambda warn: [])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "shift.jsonl"
    record_shift(ScriptedClient(), list(DEFAULT_SCRIPT), path, responder=make_responder(DEFAULT_DECISIONS),
                 tracer=Tracer(), decisions=list(DEFAULT_DECISIONS))
    return path


def _script(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / f"script-{len(list(tmp_path.glob('script-*')))}.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _marked(page: str) -> list[str]:
    return re.findall(r'class="diff" data-path="([^"]*)"', page)


def _calls(page: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {"matched": [], "failed": [], "unused": []}
    for state, call in re.findall(r'<li class="(matched|failed|unused)" data-call="(\d+)"', page):
        found[state].append(call)
    return found


def test_a_mismatch_report_names_the_path_and_call_of_the_one_line_error(recording, tmp_path):
    # The second customer line changed: call 1 and 2 match, call 3 differs.
    stale = _script(tmp_path, DEFAULT_SCRIPT[0], "Nothing more for me.")
    report = tmp_path / "mismatch.html"
    code, out, err = _cli("replay", str(recording), "--script", stale, "--report", str(report))
    assert code == 41 and err.count("\n") == 1
    call, path = re.search(r"call (\d+): the request differs from the recording at (\S+):", err).groups()
    assert "wrote the mismatch report" in out and stat.S_IMODE(report.stat().st_mode) == 0o600
    page = report.read_text()
    assert _marked(page) == [path, path]  # highlighted on the recorded side and the incoming side
    assert f'data-call="{call}"' in page and re.search(r'data-path="([^"]*)"', page).group(1) == path
    calls = _calls(page)
    assert calls["failed"] == [call]
    assert calls["matched"] == [str(n) for n in range(1, int(call))]  # the calls before it, greyed
    assert "Nothing more for me." in page  # the page is private: it shows the text the error hides
    assert "Nothing more for me." not in err


def test_an_unused_calls_report_lists_what_was_never_reached(recording, tmp_path):
    report = tmp_path / "unused.html"
    code, _, err = _cli("replay", str(recording), "--script", _script(tmp_path, DEFAULT_SCRIPT[0]),
                        "--report", str(report))
    assert code == 42
    first = re.search(r"from call (\d+)", err).group(1)
    calls = _calls(report.read_text())
    assert calls["failed"] == [first] and calls["matched"] == [str(n) for n in range(1, int(first))]


def test_the_report_path_is_checked_before_the_replay(recording, tmp_path):
    taken = tmp_path / "taken.html"
    taken.write_text("mine")
    code, _, err = _cli("replay", str(recording), "--report", str(taken))
    assert code == 38 and "never overwritten" in err and taken.read_text() == "mine"
    code, _, _ = _cli("replay", str(recording), "--report", str(tmp_path / "unused-if-ok.html"))
    assert code == 0 and not (tmp_path / "unused-if-ok.html").exists()  # written only on a failure


def test_the_report_in_a_browser_shows_both_sides_marked_and_fetches_nothing(recording, tmp_path):
    report = tmp_path / "mismatch.html"
    stale = _script(tmp_path, "A latte and an espresso, please.", DEFAULT_SCRIPT[1])
    assert _cli("replay", str(recording), "--script", stale, "--report", str(report))[0] == 41
    seen = visit(report.as_uri(), tmp_path / "browser", "mismatch")
    assert seen.screenshot.stat().st_size > 0
    assert _marked(seen.dom) == ["$.messages[1].content"] * 2
    assert seen.requested_urls() == []
    assert rows_of(seen.dom).tags.count("pre") == 2


PLUGIN_TEST = '''
from cafe import make_responder, run_shift

def test_shift(cafe_recording):
    run_shift(cafe_recording, [{line!r}, "Nothing else, thanks."], make_responder([]))
'''


def test_the_pytest_plugin_writes_the_report_of_a_failing_replay(pytester: pytest.Pytester):
    pytester.makepyfile(test_shift=PLUGIN_TEST.format(line="A latte, please."))
    pytester.runpytest().assert_outcomes(passed=1)
    pytester.makepyfile(test_shift=PLUGIN_TEST.format(line="A mocha, please."))
    reports = pytester.path / "reports"
    reports.mkdir()
    result = pytester.runpytest(f"--cafe-report-dir={reports}")
    result.assert_outcomes(failed=1)
    line = next(line for line in result.stdout.lines if "request differs" in line)
    named = Path(re.search(r"\(report: (\S+)\)", line).group(1))
    assert named.parent == reports and stat.S_IMODE(named.stat().st_mode) == 0o600
    path = re.search(r"differs from the recording at (\S+):", line).group(1)
    assert _marked(named.read_text()) == [path, path]
    assert "mocha" not in result.stdout.str()  # the failure line stays metadata; the page is private
    second = pytester.runpytest(f"--cafe-report-dir={reports}")
    assert len(list(reports.iterdir())) == 2  # a second failure never overwrites the first report
    second.assert_outcomes(failed=1)
