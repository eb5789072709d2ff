"""Writing a recording (cafe/recording/writer.py): never through whatever is at the path, never
half a recording at the path, never two recorders interleaved in one file, and never a line
or a header the reader would refuse."""

from __future__ import annotations

import math
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cafe import Tracer
from cafe.counter import RecordingClient, record_shift, replay_shift
from cafe.counter.clients.scripted import ScriptedClient
from cafe.counter.consent import make_responder
from cafe.recording import RecordingError, RecordingExists, RecordingUnwritable, load_recording
from cafe.recording import format as _format
from cafe.recording.writer import partial_path
from tests.recording.helpers import run_cli, size_limited, snapshot, valid_bytes

ROOT = Path(__file__).resolve().parents[2]


def _cafe(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "COURSE_MODE"):
        environ.pop(name, None)
    return subprocess.run([sys.executable, "-m", "cafe.cli", *argv], cwd=ROOT, env=environ,
                          capture_output=True, text=True, timeout=timeout)


def _record(path: Path, mode: str = "all") -> None:
    record_shift(ScriptedClient(), ["A latte, please."], path, responder=make_responder([("approve", None)]),
                 mode=mode, seed=1)


def test_a_fifo_at_the_path_is_refused_without_opening_it(tmp_path: Path):
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    done = _cafe("shift", "--record", str(fifo), "--record-mode", "all", timeout=30)  # opening it would hang
    assert done.returncode == RecordingUnwritable.exit_code, done.stderr
    assert "a FIFO, not a regular file" in done.stderr and done.stderr.count("\n") == 1
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and not partial_path(fifo).exists()


def test_a_symlink_at_the_path_is_refused_and_its_target_untouched(tmp_path: Path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    target.chmod(0o644)
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    before = snapshot(target)
    for mode in ("all", "once"):
        code, _, err = run_cli("shift", "--record", str(link), "--record-mode", mode, "--seed", "1")
        assert code == RecordingUnwritable.exit_code and "a symbolic link" in err
    assert snapshot(target) == before and link.is_symlink()


def test_a_device_at_the_path_is_refused_and_its_mode_kept(tmp_path: Path):
    device = tmp_path / "null.jsonl"
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs privileges")
    before = os.lstat(device).st_mode
    with pytest.raises(RecordingUnwritable, match="a character device"):
        _record(device)
    assert os.lstat(device).st_mode == before


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_another_users_file_is_neither_truncated_nor_opened_up(tmp_path: Path):
    theirs = tmp_path / "theirs.jsonl"
    theirs.write_bytes(valid_bytes())
    theirs.chmod(0o600)
    os.chown(theirs, 4242, 4242)
    before = snapshot(theirs)
    with pytest.raises(RecordingUnwritable, match="belongs to another user"):
        _record(theirs)
    assert snapshot(theirs) == before and theirs.stat().st_uid == 4242


def test_mode_all_replaces_a_file_of_ours_in_one_rename_and_keeps_it_until_then(tmp_path: Path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(valid_bytes(calls=1))
    path.chmod(0o644)
    old_inode = path.stat().st_ino
    seen: list[bytes] = []

    class Peeking(ScriptedClient):
        def chat(self, *args, **kwargs):
            seen.append(path.read_bytes())  # mid-shift, the old recording is still whole
            return super().chat(*args, **kwargs)

    record_shift(Peeking(), ["A latte, please."], path, responder=make_responder([("approve", None)]),
                 mode="all", seed=1)
    assert seen and all(data == valid_bytes(calls=1) for data in seen)
    assert path.stat().st_ino != old_inode and path.stat().st_mode & 0o777 == 0o600
    assert load_recording(path).ending is not None and not partial_path(path).exists()


def test_a_recording_that_fails_before_its_first_line_leaves_nothing(tmp_path: Path):
    path = tmp_path / "nan.jsonl"
    with pytest.raises(RecordingError, match="NaN"):
        RecordingClient(ScriptedClient(), path, shift_settings={"temperature": math.nan})
    assert list(tmp_path.iterdir()) == []
    _record(path, mode="once")  # nothing blocks mode `once` afterwards
    assert load_recording(path).ending is not None


def test_a_shift_that_fails_leaves_the_path_as_it_was(tmp_path: Path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(valid_bytes(calls=1))
    before = snapshot(path)

    class Fails(ScriptedClient):
        def chat(self, *args, **kwargs):
            raise ConnectionError("gone")

    with pytest.raises(ConnectionError):
        record_shift(Fails(), ["A latte."], path, responder=make_responder([]), mode="all")
    assert snapshot(path) == before
    assert not partial_path(path).exists()  # only a header: nothing worth keeping


def test_an_empty_record_path_is_a_usage_error():
    for blank in ("", "  "):
        code, _, err = run_cli("shift", "--record", blank)
        assert code == 2
        assert "empty path" in err and err.count("\n") == 1


def test_mode_once_never_replaces_a_recording_that_appears_during_the_shift(tmp_path: Path):
    path = tmp_path / "race.jsonl"

    class Racing(ScriptedClient):
        def chat(self, *args, **kwargs):
            if not path.exists():
                path.write_bytes(valid_bytes(calls=1))
            return super().chat(*args, **kwargs)

    with pytest.raises(RecordingExists) as caught:
        record_shift(Racing(), ["A latte, please."], path, responder=make_responder([("approve", None)]))
    assert path.read_bytes() == valid_bytes(calls=1)
    assert caught.value.kept == partial_path(path) and load_recording(caught.value.kept).ending is not None


def test_parallel_recorders_never_leave_an_interleaved_file(tmp_path: Path):
    path = tmp_path / "shared.jsonl"
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    script = tmp_path / "lines.txt"
    script.write_text("\n".join(["A latte, please.", "What do you have?"] * 6) + "\n")
    processes = [
        subprocess.Popen([sys.executable, "-m", "cafe.cli", "shift", "--record", str(path), "--record-mode", "all",
                          "--script", str(script), "--max-turns", "40", "--seed", str(n)],
                         cwd=ROOT, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for n in range(6)
    ]
    observed = 0
    deadline = time.monotonic() + 60
    while any(p.poll() is None for p in processes) and time.monotonic() < deadline:
        if path.exists():  # a reader never sees half a recording, or two mixed
            try:
                recording = load_recording(path)
            except FileNotFoundError:
                continue
            assert recording.ending is not None
            observed += 1
        time.sleep(0.005)
    codes, errors = [], []
    for process in processes:
        _, err = process.communicate(timeout=60)
        codes.append(process.returncode)
        errors.append(err.decode())
    assert set(codes) <= {0, RecordingUnwritable.exit_code}, errors
    assert 0 in codes
    for code, err in zip(codes, errors, strict=True):
        if code:
            assert err.count("\n") == 1 and "in progress" in err
    recording = load_recording(path)
    assert recording.ending is not None and recording.header.seed in range(6)
    assert [c.index for c in recording.calls] == list(range(1, len(recording.calls) + 1))
    assert not partial_path(path).exists()


def test_a_shift_that_fails_mid_way_names_the_kept_calls_on_its_one_error_line(tmp_path: Path, monkeypatch):
    from cafe.errors import ModelCallError

    class FailsSecond(ScriptedClient):
        def chat(self, *args, **kwargs):
            if self.calls == 1:
                raise ModelCallError("model endpoint example failed: APIConnectionError")
            return super().chat(*args, **kwargs)

    monkeypatch.setattr("cafe.counter.cli.get_client", lambda environ: FailsSecond())
    path = tmp_path / "half.jsonl"
    code, _, err = run_cli("shift", "--record", str(path), "--seed", "1")
    assert code == ModelCallError.exit_code and err.count("\n") == 1
    assert err.endswith(f"; the 1 call(s) recorded before it are kept in {partial_path(path)}\n")
    assert not path.exists()
    code, out, err = run_cli("replay", str(partial_path(path)))  # what was kept replays
    assert code == 0, err
    assert "replayed 1 call(s)" in out


def test_every_line_is_written_in_its_canonical_form(tmp_path: Path):
    # Sorted keys and no whitespace between tokens: each line is then exactly what orjson
    # writes for what it reads, the form the reader proves strict with one comparison.
    import orjson

    path = tmp_path / "shift.jsonl"
    record_shift(ScriptedClient(), ["A latte and a chocolate croissant, please.", "Nothing else."], path,
                 responder=make_responder([("approve", None)]), mode="all", seed=1)
    lines = path.read_bytes().splitlines()
    assert len(lines) >= 4
    for line in lines:
        assert orjson.dumps(orjson.loads(line)) == line
    assert lines[0].startswith(b'{"clock_origin_unix_nano":')


# A write that fails part way (a full disk, a quota, a file size limit) is a named error, and
# what was there before is kept, with the note of where the recording's calls are. The limit
# is the process's own (RLIMIT_FSIZE), so these tests need no special file system.

RECORDING = ROOT / "tests" / "recordings" / "seed-shift.jsonl"


def _cafe_limited(cwd: Path, limit_bytes: int, *argv: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("CAFE_DEBUG", "OTEL_EXPORTER_OTLP_ENDPOINT", "COURSE_MODE"):
        environ.pop(name, None)
    return subprocess.run(size_limited(limit_bytes, [sys.executable, "-m", "cafe", *argv]), cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_recording_cut_by_a_full_disk_keeps_its_calls_and_says_where(tmp_path: Path) -> None:
    done = _cafe_limited(tmp_path, 5_000, "shift", "--seed", "1", "--record", "shift.jsonl")
    assert done.returncode == 30, done.stderr
    assert done.stderr.startswith("cafe: error: shift.jsonl: line ") and done.stderr.count("\n") == 1
    assert "could not be written to shift.jsonl.partial (file too large)" in done.stderr
    assert "call(s) recorded before it are kept in shift.jsonl.partial" in done.stderr
    assert not (tmp_path / "shift.jsonl").exists()
    kept = _cafe_limited(tmp_path, 2**30, "replay", "shift.jsonl.partial", "--allow-truncated")
    assert kept.returncode == 0, kept.stderr


def test_a_recording_whose_first_call_cannot_be_written_leaves_nothing(tmp_path: Path) -> None:
    done = _cafe_limited(tmp_path, 1_000, "shift", "--seed", "1", "--record", "shift.jsonl")
    assert done.returncode == 30 and "line 2 could not be written" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["export", str(RECORDING), "--out", "out.otlp"],
                                  ["view", str(RECORDING), "-o", "out.html"]])
def test_an_output_cut_by_a_full_disk_is_exit_38_and_leaves_nothing_half_written(
    tmp_path: Path, argv: list[str]
) -> None:
    done = _cafe_limited(tmp_path, 2_000, *argv)
    assert done.returncode == 38 and done.stderr.count("\n") == 1, done.stderr
    assert "could not be written (file too large)" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_output_over_an_earlier_one_keeps_it_when_the_new_one_cannot_be_written(tmp_path: Path) -> None:
    earlier = tmp_path / "out.otlp"
    earlier.write_bytes(b"earlier")
    done = _cafe_limited(tmp_path, 2_000, "export", str(RECORDING), "--out", "out.otlp")
    assert done.returncode == 38 and "what was there is unchanged" in done.stderr, done.stderr
    assert earlier.read_bytes() == b"earlier" and sorted(p.name for p in tmp_path.iterdir()) == ["out.otlp"]


# A line cut short by a full disk is cut off again, so the lines after it (a wire recorder
# goes on recording the calls that follow) make a file with whole lines only.

_WRITE_PAST_THE_LIMIT = """
import sys
from cafe.recording.errors import RecordingError
from cafe.recording.format import WIRE_VERSION, Header
from cafe.recording.writer import RecordingWriter

writer = RecordingWriter(sys.argv[1], Header(version=WIRE_VERSION))
exchange = {"method": "POST", "target": "/v1/chat/completions", "outcome": "completed", "status": 200}
for number, size in ((1, 10), (2, 50_000), (3, 10)):
    try:
        writer.write_call({"model": "m", "text": "x" * size}, None, None, exchange, number=number)
    except RecordingError as error:
        print(error)
"""


def test_a_line_the_disk_cannot_hold_is_cut_off_again_and_later_lines_are_written_whole(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    done = subprocess.run(size_limited(20_000, [sys.executable, "-c", _WRITE_PAST_THE_LIMIT, str(path)]),
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{path}: line 3 could not be written to {partial_path(path)} (file too large)\n"
    kept = load_recording(partial_path(path))
    assert kept.header.version == 3 and [call.index for call in kept.calls] == [1, 3]


# A recording whose header would be out of the reader's ranges (a seed beyond 64 bits, a
# turn cap over 1,000,000) is refused before anything is written: every replay would refuse it.

SCRIPT = ["A latte, please.", "That's all."]


@pytest.mark.parametrize(("options", "field"), [
    ({"seed": 2**63}, "seed"), ({"seed": -(2**63) - 1}, "seed"), ({"max_turns": 1_000_001}, "max_turns"),
    ({"seed": 10**30}, "seed"),
])
def test_a_header_the_reader_would_refuse_is_not_recorded(tmp_path: Path, options: dict, field: str) -> None:
    path = tmp_path / "shift.jsonl"
    with pytest.raises(RecordingError, match=rf"nothing recorded: {field}: a recording's header holds an integer"):
        record_shift(ScriptedClient(), SCRIPT, path, responder=make_responder([("approve", None)]), **options)
    assert list(tmp_path.iterdir()) == []


def test_the_command_line_says_so_with_exit_30_and_the_extremes_in_range_replay(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    code, out, err = run_cli("shift", "--seed", str(2**63), "--record", str(path))
    assert code == 30 and err.count("\n") == 1 and "recorded" not in out, (out, err)
    assert list(tmp_path.iterdir()) == []
    code, _, err = run_cli("shift", "--max-turns", "1000001", "--record", str(path))
    assert code == 30 and "max_turns" in err
    for seed in (-(2**63), 2**63 - 1):
        path = tmp_path / f"{seed}.jsonl"
        assert run_cli("shift", "--seed", str(seed), "--max-turns", "1000000", "--record", str(path))[0] == 0
        replay_shift(path)
        assert run_cli("replay", str(path))[0] == 0


# The reader refuses a line longer than `MAX_LINE_BYTES`, so the writer refuses one as it is
# written (a reply that large, or a long shift whose last request holds every earlier reply),
# as a write that fails is: the calls before it are kept in PATH.partial.

LIMIT = 64 * 1024


class _GrowingReplies:
    """A model whose replies are small until `big_from`, then each one `size` characters."""

    model, provider = "m", "test"

    def __init__(self, big_from: int, size: int) -> None:
        self.big_from, self.size, self.calls = big_from, size, 0

    def chat(self, messages: list[dict[str, Any]], tools: Any = None, temperature: float = 0.0,
             tool_choice: Any = None) -> dict[str, Any]:
        self.calls += 1
        text = "x" * self.size if self.calls >= self.big_from else "Noted."
        return {"id": f"r{self.calls}", "model": "m", "usage": None,
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]}


def _record_growing(path: Path, client: _GrowingReplies) -> None:
    record_shift(client, ["A latte.", "A tea.", "That's all."], path, responder=make_responder([("approve", None)]),
                 tracer=Tracer())


@pytest.fixture
def _small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_format, "MAX_LINE_BYTES", LIMIT)


@pytest.mark.usefixtures("_small_limit")
def test_a_line_the_reader_would_refuse_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    with pytest.raises(RecordingError) as caught:
        _record_growing(path, _GrowingReplies(big_from=2, size=LIMIT))
    message = str(caught.value)
    assert "line 3" in message and f"at most {LIMIT} bytes" in message
    assert any("1 call(s) recorded before it are kept in" in note for note in caught.value.__notes__)
    assert not path.exists()
    kept = load_recording(path.with_name("shift.jsonl.partial"), allow_truncated=True)
    assert len(kept.calls) == 1


@pytest.mark.usefixtures("_small_limit")
def test_a_reply_too_large_for_its_first_line_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    with pytest.raises(RecordingError, match="line 2"):
        _record_growing(path, _GrowingReplies(big_from=1, size=LIMIT))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("_small_limit")
def test_lines_within_the_limit_are_recorded_and_read(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    _record_growing(path, _GrowingReplies(big_from=1, size=LIMIT // 8))
    assert len(load_recording(path).calls) >= 2


# Re-recording (mode `all`) replaces a recording, not whatever is at the path: a mistyped
# `--record README.md --record-mode all` leaves README.md as it is.

def test_a_file_that_is_not_a_recording_is_not_replaced(tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# my notes\n", encoding="utf-8")
    code, out, err = run_cli("shift", "--seed", "1", "--record", str(notes), "--record-mode", "all")
    assert code == 38 and "is not a cafe recording" in err and "recorded" not in out
    assert notes.read_text(encoding="utf-8") == "# my notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.md"]
    with pytest.raises(RecordingUnwritable):
        RecordingClient(ScriptedClient(), notes, mode="all")


@pytest.mark.parametrize("before", [valid_bytes(calls=1), b'{"request": {}, "response": {}}\n', b""],
                         ids=["recording", "plain recording", "empty file"])
def test_a_recording_or_an_empty_file_is_still_re_recorded(tmp_path: Path, before: bytes) -> None:
    path = tmp_path / "shift.jsonl"
    path.write_bytes(before)
    code, _, err = run_cli("shift", "--seed", "1", "--record", str(path), "--record-mode", "all")
    assert code == 0, err
    assert load_recording(path).header.seed == 1
