"""A failed replay as a page: `cafe replay --report` and the pytest plugin's --cafe-report-dir."""

from __future__ import annotations

import html
import io
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cafe import Tracer
from cafe.cli import main
from cafe.counter import make_responder, record_shift, replay_shift
from cafe.counter.cli import plugin as COUNTER
from cafe.counter.clients.scripted import ScriptedClient
from cafe.counter.demo import DEFAULT_DECISIONS, DEFAULT_SCRIPT
from cafe.recording import ReplayError, Scrubber, load_recording
from cafe.view import page_name, write_report_into
from tests.recording.helpers import size_limited
from tests.view.browser import read_png, visit
from tests.view.test_view import rows_of

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), environ={}, out=out, err=err, load_plugins=lambda warn: [COUNTER])
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
    return re.findall(r'class="diff" id="diff-(?:recorded|incoming)" data-path="([^"]*)"', page)


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


def _last_call(lines: list[str]) -> int:
    """The index of the last call line: no later line extends its request (format 4), so an
    edit of it is replayed, not refused as a changed file."""
    return max(index for index, line in enumerate(lines) if '"call"' in line and "request" in json.loads(line))


def _with_request_key(recording: Path, target: Path, key: str) -> Path:
    """`recording` with one more key in its last call's request, which a replay does not send."""
    lines = recording.read_text().splitlines()
    index = _last_call(lines)
    last = json.loads(lines[index])
    last["request"][key] = True
    lines[index] = json.dumps(last)
    target.write_text("\n".join(lines) + "\n")
    return target


@pytest.mark.parametrize("key", ["messages[x]", "messages[300000]", "messages[1]", "a.b", ""])
def test_a_key_spelt_like_a_path_is_highlighted_where_it_is(recording, tmp_path, key):
    hostile = _with_request_key(recording, tmp_path / "hostile.jsonl", key)
    report = tmp_path / "report.html"
    code, out, err = _cli("replay", str(hostile), "--report", str(report))
    assert code == 41 and err.count("\n") == 1 and "wrote the mismatch report" in out, err
    assert f"at $.<a key of {len(key)} characters>: recorded True, incoming absent" in err
    page = report.read_text()
    assert len(page) < 3 * hostile.stat().st_size  # both requests once, no placeholder per index
    marked = re.findall(r'<span class="diff" id="diff-(recorded|incoming)"[^>]*>(.*?)</span>', page)
    assert marked == [("recorded", "true"), ("incoming", "<i>absent</i>")]  # the key, on both sides
    quoted = html.escape(json.dumps(key))
    assert page.count(f'{quoted}: <span class="diff"') == 2
    assert f"first differ at <code>${html.escape(f'[{json.dumps(key)}]')}</code>" in page  # the key, escaped


def test_a_report_that_cannot_be_written_leaves_the_mismatch_and_its_exit_code(recording, tmp_path):
    stale = _script(tmp_path, DEFAULT_SCRIPT[0], "Nothing more for me.")
    environ = {key: value for key, value in os.environ.items() if key != "CAFE_DEBUG"}
    done = subprocess.run(
        size_limited(4_000, [sys.executable, "-m", "cafe", "replay", str(recording), "--script", stale,
                             "--report", "report.html"]),
        cwd=tmp_path, env={**environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120,
        check=False,  # the page is larger than 4,000 bytes; the replay writes nothing
    )
    assert done.returncode == 41, done.stderr
    first, second = done.stderr.splitlines()
    assert first == "cafe: no mismatch report: report.html: cannot write the page (it could not be written " \
                    "(file too large))"
    assert second.startswith("cafe: error: ") and "the request differs from the recording at $.messages" in second
    assert not (tmp_path / "report.html").exists()


def test_a_report_too_deep_to_draw_leaves_the_mismatch_and_its_exit_code(recording, tmp_path):
    deep: object = True
    for _ in range(600):
        deep = [deep]
    lines = recording.read_text().splitlines()
    index = _last_call(lines)
    last = json.loads(lines[index])
    last["request"]["deep"] = deep
    lines[index] = json.dumps(last)
    hostile = tmp_path / "deep.jsonl"
    hostile.write_text("\n".join(lines) + "\n")
    report = tmp_path / "report.html"
    code, out, err = _cli("replay", str(hostile), "--report", str(report))
    assert code == 41 and err.splitlines()[-1].endswith("differs from the recording at $.deep: recorded array(1), "
                                                        "incoming absent")
    # Drawn, or a line that says it was not and why: never the replay's result lost.
    assert (report.exists() and "wrote the mismatch report" in out) or (
        not report.exists() and err.startswith(f"cafe: no mismatch report: {report}: "))


def _transcript_report(recording: Path, tmp_path: Path, *argv: str) -> tuple[int, str, str, str]:
    report = tmp_path / "transcript.html"
    code, out, err = _cli("replay", str(recording), *argv, "--report", str(report))
    return code, out, err, report.read_text() if report.exists() else ""


def test_a_transcript_mismatch_writes_a_report_of_both_transcripts(recording, tmp_path):
    lines = recording.read_text().splitlines()
    ending = json.loads(lines[-1])
    ending["end"]["transcript_sha256"] = "0" * 64
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join([*lines[:-1], json.dumps(ending)]) + "\n")
    code, out, err, page = _transcript_report(tampered, tmp_path)
    assert code == 44 and err.count("\n") == 1 and "wrote the mismatch report" in out
    assert "every recorded call matched" in page and _calls(page)["matched"] == ["1", "2", "3", "4", "5"]
    assert "the recorded ending differs" in page and DEFAULT_SCRIPT[1] in page
    assert rows_of(page).tags.count("pre") == 2


def test_a_transcript_that_differs_at_a_line_is_highlighted_there_and_scrubbed(tmp_path):
    key = "sk-proj-Tr4nscriptCanary0123456789"
    path = tmp_path / "keyed.jsonl"
    line = f"A latte, please; my key is {key}"
    record_shift(ScriptedClient(), [line, DEFAULT_SCRIPT[1]], path, responder=make_responder(DEFAULT_DECISIONS),
                 tracer=Tracer(), decisions=list(DEFAULT_DECISIONS))
    # The calls match (an incoming request is scrubbed as the recorder scrubbed it); the
    # transcript, made of what the replay said, holds the key the recording does not.
    code, out, err, page = _transcript_report(path, tmp_path, "--script", _script(tmp_path, line, DEFAULT_SCRIPT[1]))
    assert code == 44 and "wrote the mismatch report" in out
    number = re.search(r"first difference at transcript line (\d+)$", err).group(1)
    marked = re.findall(r'<span class="diff" id="diff-(recorded|incoming)" data-line="(\d+)">', page)
    assert marked == [("recorded", number), ("incoming", number)]
    assert "differ only in text this page hides" in page  # both lines show [REDACTED]
    assert '<a href="#diff-recorded">' in page and '<a href="#diff-incoming">' in page
    assert key not in page and key[8:] not in page and "my key is [REDACTED]" in page


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


@pytest.fixture
def offline_plugin(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester directory whose tests record the scripted model: the plugin records only a
    model someone chose."""
    pytester.makeini("[pytest]\ncafe_record_offline = true\n")
    return pytester


PLUGIN_TEST = '''
from cafe.counter import make_responder, run_shift

def test_shift(cafe_recording):
    run_shift(cafe_recording, [{line!r}, "Nothing else, thanks."], make_responder([]))
'''


def test_the_pytest_plugin_writes_the_report_of_a_failing_replay(offline_plugin: pytest.Pytester):
    pytester = offline_plugin
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


HOSTILE_RECORDING_NAMES = ["..jsonl", "...jsonl", ".jsonl", ".hidden.jsonl", "a\nb.jsonl", "-rf.jsonl",
                           "x" * 250 + ".jsonl", "\U0001f375" * 100 + ".jsonl", "sk-proj-NameCanary0123456789.jsonl"]


@pytest.mark.parametrize("name", HOSTILE_RECORDING_NAMES)
@pytest.mark.parametrize("folder", ["recordings", "..", "."])
def test_a_report_page_name_is_one_plain_file_name(tmp_path, name, folder):
    page = page_name(Path(folder) / name, Scrubber.from_environment({})) + "-99.html"
    assert "/" not in page and "\n" not in page and not page.startswith((".", "-"))
    assert len(page.encode()) < 255 and "NameCanary" not in page
    assert (tmp_path / page).resolve().parent == tmp_path.resolve()


def test_reports_are_made_inside_a_new_private_directory_and_never_through_a_symlink(recording, tmp_path):
    outside = tmp_path / "outside.html"
    outside.write_text("mine")
    reports = tmp_path / "made" / "reports"
    stale = _script(tmp_path, DEFAULT_SCRIPT[0], "Nothing more for me.")
    error = _replay_error(recording, stale)
    first = write_report_into(reports, load_recording(recording), error, Scrubber.from_environment({}))
    assert stat.S_IMODE(reports.stat().st_mode) == 0o700 and first.parent == reports
    assert first.name == f"{recording.parent.name}.shift.html" and stat.S_IMODE(first.stat().st_mode) == 0o600
    (reports / f"{recording.parent.name}.shift-2.html").symlink_to(outside)
    third = write_report_into(reports, load_recording(recording), error, Scrubber.from_environment({}))
    assert third.name == f"{recording.parent.name}.shift-3.html" and outside.read_text() == "mine"
    assert _marked(third.read_text()) == _marked(first.read_text()) != []


def _replay_error(recording: Path, script: str) -> ReplayError:
    from cafe.counter.arguments import read_script

    with pytest.raises(ReplayError) as raised:
        replay_shift(recording, read_script(script), responder=make_responder(DEFAULT_DECISIONS))
    return raised.value


DOTTED_TEST = '''
import pytest
from cafe.counter import make_responder, run_shift

@pytest.mark.cafe_recording(path="recordings/..jsonl")
def test_shift(cafe_recording):
    run_shift(cafe_recording, [{line!r}, "Nothing else, thanks."], make_responder([]))
'''


def test_the_plugin_keeps_a_dotted_recordings_report_inside_the_directory_it_makes(offline_plugin: pytest.Pytester):
    pytester = offline_plugin
    pytester.makepyfile(test_shift=DOTTED_TEST.format(line="A latte, please."))
    pytester.runpytest().assert_outcomes(passed=1)
    pytester.makepyfile(test_shift=DOTTED_TEST.format(line="A mocha, please."))
    reports = pytester.path / "out" / "reports"
    result = pytester.runpytest(f"--cafe-report-dir={reports}")
    result.assert_outcomes(failed=1)
    named = Path(re.search(r"\(report: (\S+)\)", result.stdout.str()).group(1))
    assert named.parent == reports and named.name == "recordings.html"
    assert [p.name for p in reports.iterdir()] == ["recordings.html"]
    assert stat.S_IMODE(reports.stat().st_mode) == 0o700
    assert sorted(p.name for p in (pytester.path / "out").iterdir()) == ["reports"]  # nothing beside it


JUMP_BUTTON, TARGETED = (180, 83, 9), (252, 211, 77)


def test_the_reports_summary_links_to_the_highlight_below_the_fold(recording, tmp_path):
    stale = _script(tmp_path, DEFAULT_SCRIPT[0], "Nothing more for me.")
    report = tmp_path / "mismatch.html"
    assert _cli("replay", str(recording), "--script", stale, "--report", str(report))[0] == 41
    first = visit(report.as_uri(), tmp_path / "browser", "top")
    links = re.findall(r'<a href="#(diff-[a-z]+)">', first.dom)
    assert links == ["diff-recorded", "diff-incoming"]
    assert all(f'id="{anchor}"' in first.dom for anchor in links)
    shot = read_png(first.screenshot)
    buttons = [b for b in shot.blocks(JUMP_BUTTON) if b[3] - b[1] >= 12]
    assert len(buttons) == 2 and all(bottom < shot.height for *_, bottom in buttons)  # in the first screen
    assert not shot.blocks(TARGETED)
    assert _marked(first.dom) and first.dom.index('id="diff-recorded"') > first.dom.index('href="#diff-recorded"')
    # Headless Chromium paints nothing of a scrolled page, so the whole page fits this window:
    # the link's target is the recorded side's node, and `:target` marks it.
    jumped = visit(report.as_uri() + "#diff-recorded", tmp_path / "browser", "jumped", window=(1000, 3600))
    shot = read_png(jumped.screenshot)
    targeted = [b for b in shot.blocks(TARGETED) if b[3] - b[1] >= 8]
    assert len(targeted) == 1 and targeted[0][2] < shot.width / 2 and targeted[0][1] > 900


def test_a_responses_replay_mismatch_page_names_the_field_and_each_call_by_its_input(tmp_path):
    import openai

    import cafe.wire as wire
    from cafe.recording.errors import ReplayMismatch
    from cafe.view import failed_replay, mismatch_page
    from tests.wire.responses_server import ResponsesServer

    path = tmp_path / "agent.jsonl"

    def calls(base_url: str, instructions: str) -> None:
        client = openai.OpenAI(base_url=base_url, api_key="sk-test-mismatch-0123456789abcdef", max_retries=0)
        first = client.responses.create(model="gpt-4.1", instructions="Be kind.", input="A latte")
        client.responses.create(model="gpt-4.1", instructions=instructions, previous_response_id=first.id,
                                input=[{"type": "function_call_output", "call_id": "call_1", "output": "1.60"}])

    with ResponsesServer.running() as server:
        with wire.record(path):
            calls(server.base_url, "Be kind.")
        with pytest.raises(ReplayMismatch) as caught, wire.replay(path):
            calls(server.base_url, "Be quick.")
    assert "call 2: the request differs from the recording at $.instructions:" in str(caught.value)
    page = mismatch_page(load_recording(path), failed_replay(caught.value))
    assert _marked(page) == ["$.instructions", "$.instructions"]
    assert _calls(page) == {"matched": ["1"], "failed": ["2"], "unused": []}
    shown = html.unescape(page)
    assert "call 1: matched · POST /v1/responses, a text input" in shown
    assert ("call 2: failed here · POST /v1/responses, 1 input item(s), the last a function_call_output, "
            "after a previous response") in shown
