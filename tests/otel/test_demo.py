"""`make demo` (`cafe demo`): the story's facts, checked in what it prints."""

from __future__ import annotations

import io
import os
import stat

from cafe.cli import main
from cafe.counter.cli import plugin as COUNTER
from cafe.counter.demo import STORY_SCRIPT
from cafe.recording import load_recording
from cafe_otel._cli.plugin import plugin
from cafe_otel._counter.plugin import plugin as COUNTER_OTEL


def _demo(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["demo", *argv], environ={}, out=out, err=err, load_plugins=lambda warn: [COUNTER, COUNTER_OTEL,
                                                                                          plugin])
    return code, out.getvalue(), err.getvalue()


def _section(text: str, start: str, end: str | None) -> str:
    body = text.split(start, 1)[1]
    return body.split(end, 1)[0] if end else body


def test_the_demo_tells_the_story_and_proves_its_claims(tmp_path):
    code, out, err = _demo("--keep", str(tmp_path))
    assert code == 0 and err == ""
    story = _section(out, "== the shift ==", "== handover note ==")
    assert story.count("sent to the kitchen") == 1  # the ticket fires exactly once
    assert "fires the ticket again (a retry) -> REFUSED (duplicate)" in story
    assert "checks allergens: tomato toast -> no egg" in story and "customer approved (approval A1)" in story
    note = _section(out, "== handover note ==", "== 1.")
    assert "ticket 1 (turn 5, approval A1): table 4, 2 item(s), EUR 4.00" in note

    recording = tmp_path / "shift.jsonl"
    assert stat.S_IMODE(recording.stat().st_mode) == 0o600
    assert len(load_recording(recording).calls) == 6
    assert f"cafe view {recording} -o" in out

    tree = _section(out, "== 2. the span tree", "== 3.")
    assert "0.000s" not in tree and "µs" in tree  # real, non-zero durations

    telemetry = _section(out, "== 3. what leaves the process", "== 4.")
    assert "customer text in the telemetry: none" in telemetry
    for line in STORY_SCRIPT:
        assert line not in telemetry
    for word in ("allergic", "Lovely", "tomato toast", "table 4"):
        assert word not in telemetry
    assert "gen_ai.client.token.usage{input} sum 740 over 6" in telemetry
    assert "cafe.tickets.fired{} 1" in telemetry and "cafe.shifts{consent_violation} 1" in telemetry
    assert "0 dropped; 11 metric points exported, 0 dropped" in telemetry

    replay = _section(out, "== 4. the replay ==", "== 5.")
    assert "replayed 6 calls from the recording with 0 model calls; transcript identical: yes" in replay


def test_the_demo_ends_on_what_a_user_buys_it_for_and_the_next_commands(tmp_path):
    code, out, err = _demo("--keep", str(tmp_path))
    assert code == 0 and err == ""
    # The stop reason is explained as the guard it is.
    assert "shift ended: consent_violation" in out and "not a failure" in out
    caught = _section(out, "== 5. what CI catches", "== 6.")
    [line] = [line for line in caught.splitlines() if line.startswith("cafe: error: ")]
    assert "call 1: the request differs from the recording at $.messages[0].content" in line
    mismatch = tmp_path / "mismatch.html"
    assert f"page of the mismatch, recorded and incoming request side by side: {mismatch}\n" in caught
    assert stat.S_IMODE(mismatch.stat().st_mode) == 0o600 and "messages[0].content" in mismatch.read_text()
    page = tmp_path / "shift.html"
    assert str(page) in _section(out, "== 6. the shift as a page", "== next ==")
    assert stat.S_IMODE(page.stat().st_mode) == 0o600 and "<html" in page.read_text().lower()
    commands = [line.split("  # ")[0].strip() for line in _section(out, "== next ==", None).splitlines() if line]
    assert f"cafe replay {tmp_path / 'shift.jsonl'} --show" in commands
    # The next commands work as printed.
    for number, command in enumerate(commands):
        if command.startswith(("cafe replay", "cafe view")):
            argv = command.split()[1:]
            if "-o" in argv or "--report" in argv:
                argv[-1] = str(tmp_path / f"again-{number}.html")
            assert main(argv, environ={}, out=io.StringIO(), err=io.StringIO(),
                        load_plugins=lambda warn: [COUNTER]) == 0


def test_without_keep_the_demo_leaves_nothing_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    code, out, _ = _demo()
    assert code == 0 and "keep it with --keep DIR" in out
    assert list(tmp_path.iterdir()) == []
    # Nothing was kept, so the next commands name the recording `--keep DIR` would keep.
    commands = [line.split("  # ")[0].strip() for line in _section(out, "== next ==", None).splitlines() if line]
    assert commands[0] == "cafe demo --keep DIR"
    assert all(f"DIR/{'shift.jsonl'}" in command for command in commands[1:4]), commands


def test_keep_never_overwrites_an_earlier_demo(tmp_path):
    assert _demo("--keep", str(tmp_path))[0] == 0
    before = (tmp_path / "shift.jsonl").read_bytes()
    code, _, err = _demo("--keep", str(tmp_path))
    assert code == 36 and err.count("\n") == 1 and "exists" in err
    assert (tmp_path / "shift.jsonl").read_bytes() == before


def test_keep_over_an_earlier_demo_names_a_remedy_the_demo_has(tmp_path):
    # The writer's own remedy (record mode 'all') is not an option of `cafe demo`.
    assert _demo("--keep", str(tmp_path))[0] == 0
    code, _, err = _demo("--keep", str(tmp_path))
    assert code == 36 and "record mode" not in err
    assert err == (f"cafe: error: {tmp_path / 'shift.jsonl'}: a recording already exists; cafe demo never "
                   "overwrites one (choose another --keep DIR, or remove it)\n")
    other = tmp_path / "other"
    assert _demo("--keep", str(other))[0] == 0  # the remedy works


def test_keep_that_is_not_a_directory_is_a_usage_error_before_the_shift(tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine\n")
    os.mkfifo(tmp_path / "fifo")
    for path in (a_file, tmp_path / "fifo"):
        code, _, err = _demo("--keep", str(path))
        assert code == 2 and err == f"cafe: error: cafe demo --keep {path}: not a directory\n", err
    assert a_file.read_text() == "mine\n" and sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "notes.txt"]
    code, _, err = _demo("--keep", "")
    assert code == 2 and "needs a directory" in err
