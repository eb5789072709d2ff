"""`cafe record REC -- CMD` and `cafe replay-run REC -- CMD`: an unchanged program using the
`openai` SDK, recorded against the local server, then replayed with the server stopped, or
still serving to prove that a replay sends it nothing, however the program's Python starts
(`-I`, `-E`, `-S`, `opentelemetry-instrument`) and whatever processes it forks or starts;
the program's exit code passes through, a replay's refusal is the command's exit code and
one line."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cafe.recording import load_recording
from cafe.recording.errors import UnusedCalls
from tests.wire.openai_server import OpenAIServer

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-test-run-cli-0123456789abcdef"

AGENT = '''
import os
import sys

import openai

if os.environ.get("AGENT_CHDIR"):
    os.chdir(os.environ["AGENT_CHDIR"])

client = openai.OpenAI(base_url=os.environ["AGENT_BASE_URL"], api_key=os.environ["AGENT_KEY"], max_retries=0)
reply = client.chat.completions.create(model="m", max_tokens=int(os.environ.get("AGENT_MAX_TOKENS", "5")),
                                       messages=[{"role": "user", "content": "A latte, please."}])
print("plain:", reply.choices[0].message.content)
stream = client.chat.completions.create(model="m", stream=True,
                                        messages=[{"role": "user", "content": "And a croissant."}])
print("stream:", "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices))
print("theirs:", os.environ.get("THEIR_SITECUSTOMIZE", "not run"))
sys.exit(int(os.environ.get("AGENT_EXIT", "0")))
'''


# Calls once, forks, and calls again once its child has ended; the child ends normally, or
# (FORK_CHILD=call) makes a call of its own and ends with os._exit, as a multiprocessing worker does.
FORKING = '''
import os
import sys

import openai

client = openai.OpenAI(base_url=os.environ["AGENT_BASE_URL"], api_key=os.environ["AGENT_KEY"], max_retries=0)


def ask(text):
    reply = client.chat.completions.create(model="m", max_tokens=5, messages=[{"role": "user", "content": text}])
    return reply.choices[0].message.content


print("parent:", ask("A latte, please."))
child = os.fork()
if child == 0:
    if os.environ.get("FORK_CHILD") == "call":
        try:
            ask("And one for the child.")
        finally:
            os._exit(0)
    sys.exit(0)
os.waitpid(child, 0)
print("parent again:", ask("And a croissant."))
'''

# Calls, runs a multiprocessing pool (POOL_METHOD: fork or spawn) whose workers square numbers
# or (POOL_WORK=call) make a call each, then calls again.
POOL = '''
import multiprocessing
import os

import openai


def ask(text):
    client = openai.OpenAI(base_url=os.environ["AGENT_BASE_URL"], api_key=os.environ["AGENT_KEY"], max_retries=0)
    reply = client.chat.completions.create(model="m", max_tokens=5, messages=[{"role": "user", "content": text}])
    return reply.choices[0].message.content


def ask_in_worker(text):
    try:
        return ask(text)
    except Exception as error:  # an SDK's own error may not cross back from a worker (openai 1.x's do not unpickle)
        raise RuntimeError(type(error).__name__) from None


def square(number):
    return number * number


if __name__ == "__main__":
    print("first:", ask("A latte, please."))
    with multiprocessing.get_context(os.environ["POOL_METHOD"]).Pool(2) as pool:
        if os.environ.get("POOL_WORK") == "call":
            print("workers:", pool.map(ask_in_worker, ["One for worker 1.", "One for worker 2."]))
        else:
            print("workers:", pool.map(square, [1, 2, 3]))
    print("last:", ask("And a croissant."))
'''


def _environ(tmp_path: Path, **env: str) -> dict[str, str]:
    theirs = tmp_path / "theirs"
    theirs.mkdir(exist_ok=True)
    # The program's own sitecustomize, which cafe's hook shadows and must still run.
    (theirs / "sitecustomize.py").write_text("import os\nos.environ['THEIR_SITECUSTOMIZE'] = 'ran'\n")
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("CAFE_", "OPENAI_", "OTEL_"))}
    environ.update({"PYTHONPATH": os.pathsep.join([str(REPO), str(theirs)]), "AGENT_KEY": KEY}, **env)
    return environ


def _cafe(tmp_path: Path, *arguments: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cafe", *arguments], env=_environ(tmp_path, **env),
                          capture_output=True, text=True, timeout=180, check=False, cwd=tmp_path)


def _hook_directories(where: Path) -> list[Path]:
    return [path for path in where.iterdir() if path.name.startswith(".cafe-run-")]


def test_an_unchanged_program_is_recorded_then_replayed_without_the_server(tmp_path: Path) -> None:
    agent, recording = tmp_path / "agent.py", tmp_path / "agent.jsonl"
    agent.write_text(AGENT)
    program = ["--", sys.executable, str(agent)]
    with OpenAIServer.running() as server:
        live = _cafe(tmp_path, "record", str(recording), *program, AGENT_BASE_URL=server.base_url)
        assert live.returncode == 0, live.stderr
        assert server.count == 2
        url = server.base_url
    assert live.stderr.splitlines() == [f"cafe: recorded 2 call(s) to {recording}"]
    assert "theirs: ran" in live.stdout
    assert KEY not in recording.read_text()

    replayed = _cafe(tmp_path, "replay-run", str(recording), *program, AGENT_BASE_URL=url)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == live.stdout  # the program's output alone: cafe's summary is on stderr
    assert replayed.stderr.splitlines() == [f"cafe: replayed 2 call(s) from {recording}: every recorded call used"]

    changed = _cafe(tmp_path, "replay-run", str(recording), *program, AGENT_BASE_URL=url, AGENT_MAX_TOKENS="6")
    assert changed.returncode == 41
    assert changed.stderr.splitlines()[-1] == (f"cafe: error: {recording}: call 1: the request differs from the "
                                               "recording at $.max_tokens: recorded 5, incoming 6")

    failing = _cafe(tmp_path, "replay-run", str(recording), *program, AGENT_BASE_URL=url, AGENT_EXIT="3")
    assert failing.returncode == 3
    assert failing.stderr.splitlines() == ["cafe: the program exited 3; every recorded call was used"]

    again = _cafe(tmp_path, "record", str(recording), *program, AGENT_BASE_URL=url)
    assert again.returncode == 36 and "record mode 'once' never overwrites" in again.stderr


def test_a_failed_program_leaves_no_recording_and_keeps_its_calls(tmp_path: Path) -> None:
    agent, recording = tmp_path / "agent.py", tmp_path / "failed.jsonl"
    agent.write_text(AGENT)
    with OpenAIServer.running() as server:
        done = _cafe(tmp_path, "record", str(recording), "--", sys.executable, str(agent),
                     AGENT_BASE_URL=server.base_url, AGENT_EXIT="4")
    assert done.returncode == 4
    assert not recording.exists()
    kept = tmp_path / "failed.jsonl.partial"
    assert done.stderr.splitlines() == [f"cafe: the program exited 4: nothing recorded at {recording}; its calls "
                                        f"are kept in {kept}"]
    assert len(kept.read_text().splitlines()) == 3
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".cafe-run-")]


def test_usage_errors_are_one_line_with_their_exit_code(tmp_path: Path) -> None:
    missing = _cafe(tmp_path, "record", str(tmp_path / "x.jsonl"))
    assert missing.returncode == 2
    assert missing.stderr.splitlines() == [f"cafe: error: cafe record: no program to run: write the command after "
                                           f"--, e.g. `cafe record {tmp_path / 'x.jsonl'} -- python agent.py`"]
    unknown = _cafe(tmp_path, "record", str(tmp_path / "x.jsonl"), "--", "no-such-program-of-cafe")
    assert (unknown.returncode, unknown.stderr) == (24, "cafe: error: no-such-program-of-cafe: no such program "
                                                        "(the command after --)\n")
    offline = tmp_path / "offline.jsonl"
    assert _cafe(tmp_path, "shift", "--record", str(offline)).returncode == 0
    refused = _cafe(tmp_path, "replay-run", str(offline), "--", sys.executable, "-c", "pass")
    assert refused.returncode == 30
    assert refused.stderr.splitlines() == [f"cafe: error: {offline}: it holds no HTTP exchanges (format version 4); "
                                           f"replay it with `cafe replay {offline}`"]


def test_the_hook_in_the_program_reads_the_variable_the_command_sets() -> None:
    from cafe.wire._hook import HOOK_VARIABLE, SITECUSTOMIZE, HookNotLoaded

    compile(SITECUSTOMIZE, "sitecustomize.py", "exec")
    assert f'os.environ.get("{HOOK_VARIABLE}")' in SITECUSTOMIZE
    # It stops a Python without cafe with the code the command reports for it.
    assert f'"exit_code": {HookNotLoaded.exit_code}' in SITECUSTOMIZE
    assert f"os._exit({HookNotLoaded.exit_code})" in SITECUSTOMIZE


KEYED_AGENT = '''
import os

import openai

client = openai.OpenAI(base_url=os.environ["AGENT_BASE_URL"], api_key=os.environ["AGENT_KEY"], max_retries=0,
                       default_query={"api-version": "2024-10-21", "api-key": os.environ["AGENT_QUERY_KEY"]})
reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "A latte, please."}])
print("keyed:", reply.choices[0].message.content)
heard = client.audio.transcriptions.create(model="whisper-1", file=("order.wav", b"RIFF\\x00\\xffWAVE", "audio/wav"),
                                           prompt="A latte order.")
print("heard:", heard.text)
stream = client.chat.completions.create(model="m", stream=True, messages=[{"role": "user", "content": "My key?"}])
print("streamed:", "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices))
'''


def test_a_program_with_a_key_in_its_query_an_upload_and_a_streamed_key_replays_unchanged(tmp_path: Path) -> None:
    agent, recording = tmp_path / "keyed.py", tmp_path / "keyed.jsonl"
    agent.write_text(KEYED_AGENT)
    program = ["--", sys.executable, str(agent)]
    query_key = "Zm9vYmFy" + "QmF6cXV4MTIzNDU2Nzg5MA"
    leak = "sk-" + "proj-" + "Kq72Zx9Wm4Rt8Yp3Ln6Bv1Cs5Df0Gh2"
    with OpenAIServer.running() as server:
        server.require_query("api-key", query_key)
        server.answer_with(f"Your key is {leak}.", token_chars=4)
        live = _cafe(tmp_path, "record", str(recording), *program, AGENT_BASE_URL=server.base_url,
                     AGENT_QUERY_KEY=query_key)
        assert live.returncode == 0, live.stderr
        url = server.base_url
    kept = recording.read_text(encoding="utf-8")
    assert query_key not in kept and leak[8:18] not in kept
    assert f"streamed: Your key is {leak}." in live.stdout.splitlines()
    replayed = _cafe(tmp_path, "replay-run", str(recording), *program, AGENT_BASE_URL=url, AGENT_QUERY_KEY=query_key)
    assert replayed.returncode == 0, replayed.stderr
    said = [line for line in live.stdout.splitlines() if line.startswith(("keyed:", "heard:"))]
    assert len(said) == 2
    assert [line for line in replayed.stdout.splitlines() if line.startswith(("keyed:", "heard:"))] == [
        line.replace(leak, "[REDACTED]") for line in said]
    streamed = next(line for line in replayed.stdout.splitlines() if line.startswith("streamed:"))
    assert streamed.startswith("streamed: Your key is [REDACTED]") and leak[8:12] not in streamed


def _record_then_replay(tmp_path: Path, program: list[str], **env: str) -> tuple[
        subprocess.CompletedProcess[str], subprocess.CompletedProcess[str], int]:
    """Record `program`, then replay it with the server still serving; (the record, the replay,
    the requests the server received during the replay)."""
    recording = tmp_path / "agent.jsonl"
    with OpenAIServer.running() as server:
        live = _cafe(tmp_path, "record", str(recording), "--", *program, AGENT_BASE_URL=server.base_url, **env)
        assert live.returncode == 0, live.stderr
        before = server.count
        replayed = _cafe(tmp_path, "replay-run", str(recording), "--", *program, AGENT_BASE_URL=server.base_url,
                         **env)
        return live, replayed, server.count - before


@pytest.mark.parametrize("flag", ["-I", "-E"])
def test_a_python_that_ignores_pythonpath_is_recorded_and_replayed_without_the_server(
        tmp_path: Path, flag: str) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    live, replayed, during_replay = _record_then_replay(tmp_path, [sys.executable, flag, str(agent)])
    assert live.stderr.splitlines() == [f"cafe: recorded 2 call(s) to {tmp_path / 'agent.jsonl'}"]
    assert replayed.returncode == 0, replayed.stderr
    assert during_replay == 0
    assert replayed.stdout == live.stdout


def test_a_python_that_skips_its_startup_files_is_refused_before_it_runs(tmp_path: Path) -> None:
    agent, recording = tmp_path / "agent.py", tmp_path / "agent.jsonl"
    agent.write_text(AGENT)
    with OpenAIServer.running() as server:
        assert _cafe(tmp_path, "record", str(recording), "--", sys.executable, str(agent),
                     AGENT_BASE_URL=server.base_url).returncode == 0
        before = server.count
        for command, target in (("replay-run", recording), ("record", tmp_path / "again.jsonl")):
            refused = _cafe(tmp_path, command, str(target), "--", sys.executable, "-S", str(agent),
                            AGENT_BASE_URL=server.base_url)
            assert refused.returncode == 52, refused.stderr
            assert refused.stdout == ""  # the program never ran
            assert refused.stderr.splitlines() == [
                f"cafe: error: {Path(sys.executable).name} -S: the program is not run: this Python would run it "
                "without cafe's hook (-S skips every startup file, cafe's hook included); run it without that "
                "option, or with the Python cafe is installed in"]
        assert server.count == before
    assert not (tmp_path / "again.jsonl").exists() and not (tmp_path / "again.jsonl.partial").exists()
    assert _hook_directories(tmp_path) == []


def _python_without_cafe(where: Path) -> str:
    base = getattr(sys, "_base_executable", sys.executable)
    bare = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    if subprocess.run([base, "-c", "import cafe"], env=bare, capture_output=True, check=False, timeout=60,
                      cwd=where).returncode == 0:
        pytest.skip("no Python without cafe here (the tests run outside a virtual environment)")
    return base


def test_a_python_that_cannot_import_cafe_is_stopped_before_it_runs(tmp_path: Path) -> None:
    python = _python_without_cafe(tmp_path)
    recording = tmp_path / "agent.jsonl"
    agent = tmp_path / "agent.py"
    agent.write_text("print('ran')\n" + AGENT)
    with OpenAIServer.running() as server:
        assert _cafe(tmp_path, "record", str(recording), "--", sys.executable, str(agent),
                     AGENT_BASE_URL=server.base_url).returncode == 0
        before = server.count
        # Not even cafe: stopped by the hook; with -I, refused by the command, since this
        # Python has no startup file of cafe's.
        for pythonpath, flags in (("", []), ("", ["-I"])):
            environ = _environ(tmp_path, AGENT_BASE_URL=server.base_url, PYTHONPATH=pythonpath)
            stopped = subprocess.run([sys.executable, "-m", "cafe", "replay-run", str(recording), "--", python,
                                      *flags, str(agent)], env=environ, capture_output=True, text=True,
                                     timeout=180, check=False, cwd=tmp_path)
            assert stopped.returncode == 52, stopped.stderr
            assert stopped.stdout == ""
            [line] = stopped.stderr.splitlines()
            if flags:
                assert "cafe's startup file is not installed in this Python" in line
            else:
                assert line.startswith(f"cafe: error: the program's Python ({python}) cannot import ")
                assert line.endswith(": run the program with the Python cafe is installed in")
        # cafe on PYTHONPATH, and no HTTP library: the hook needs none, so the program runs (and
        # fails on its own import of openai, its recorded calls never made).
        environ = _environ(tmp_path, AGENT_BASE_URL=server.base_url, PYTHONPATH=str(REPO))
        ran = subprocess.run([sys.executable, "-m", "cafe", "replay-run", str(recording), "--", python, str(agent)],
                             env=environ, capture_output=True, text=True, timeout=180, check=False, cwd=tmp_path)
        assert ran.returncode == UnusedCalls.exit_code and ran.stdout == "ran\n", ran.stderr
        assert server.count == before


def test_a_program_under_opentelemetry_instrument_is_recorded_and_replayed_without_the_server(
        tmp_path: Path) -> None:
    from tests.otel.test_cli_plugin import Receiver

    command = Path(sys.executable).parent / "opentelemetry-instrument"
    if not command.exists():
        pytest.skip("opentelemetry-instrument is not installed beside this Python")
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    receiver = Receiver()
    receiver.thread.start()
    try:
        # Its own sitecustomize comes first on PYTHONPATH, shadowing the hook's.
        live, replayed, during_replay = _record_then_replay(
            tmp_path, [str(command), sys.executable, str(agent)], OTEL_SERVICE_NAME="agent",
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
            OTEL_METRIC_EXPORT_INTERVAL="600000")
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
    assert replayed.returncode == 0, replayed.stderr
    assert during_replay == 0
    assert replayed.stdout == live.stdout
    assert "cafe-otel: telemetry: 2 spans exported" in replayed.stderr  # instrumented as well as replayed


def _calls(path: Path) -> list[int]:
    return [call.index for call in load_recording(path).calls]


def test_a_forked_child_that_ends_normally_leaves_the_parents_recording_whole(tmp_path: Path) -> None:
    agent = tmp_path / "forking.py"
    agent.write_text(FORKING)
    live, replayed, during_replay = _record_then_replay(tmp_path, [sys.executable, str(agent)])
    recording = tmp_path / "agent.jsonl"
    assert live.stderr.splitlines() == [f"cafe: recorded 2 call(s) to {recording}"]
    assert _calls(recording) == [1, 2]
    assert replayed.returncode == 0, replayed.stderr
    assert during_replay == 0
    assert replayed.stdout == live.stdout
    assert _hook_directories(tmp_path) == []


def test_a_forked_childs_call_is_refused_and_the_parents_calls_are_kept(tmp_path: Path) -> None:
    agent = tmp_path / "forking.py"
    agent.write_text(FORKING)
    recording, kept = tmp_path / "agent.jsonl", tmp_path / "agent.jsonl.partial"
    with OpenAIServer.running() as server:
        refused = _cafe(tmp_path, "record", str(recording), "--", sys.executable, str(agent),
                        AGENT_BASE_URL=server.base_url, FORK_CHILD="call")
        assert refused.returncode == 51, refused.stderr
        assert server.count == 2  # the parent's two: the child's was never sent
        last = refused.stderr.splitlines()[-1]
        assert last.startswith(f"cafe: error: {recording}: a model call from process ")
        assert last.endswith(" was refused: only the process that records this recording makes its model calls "
                             "(not a child it forks or starts); make the calls there; nothing recorded at "
                             f"{recording}; its calls are kept in {kept}")
        assert not recording.exists()
        assert _calls(kept) == [1, 2]  # one line a call number
        kept.unlink()

        assert _cafe(tmp_path, "record", str(recording), "--", sys.executable, str(agent),
                     AGENT_BASE_URL=server.base_url).returncode == 0
        before = server.count
        replayed = _cafe(tmp_path, "replay-run", str(recording), "--", sys.executable, str(agent),
                         AGENT_BASE_URL=server.base_url, FORK_CHILD="call")
        assert replayed.returncode == 51, replayed.stderr
        assert "only the process that replays this recording makes its model calls" in replayed.stderr
        assert server.count == before
    assert _hook_directories(tmp_path) == []


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_pools_workers_run_and_their_calls_are_refused_before_they_are_sent(tmp_path: Path, method: str) -> None:
    agent = tmp_path / "pool.py"
    agent.write_text(POOL)
    live, replayed, during_replay = _record_then_replay(tmp_path, [sys.executable, str(agent)], POOL_METHOD=method)
    assert "workers: [1, 4, 9]" in live.stdout
    assert replayed.returncode == 0, replayed.stderr
    assert during_replay == 0 and replayed.stdout == live.stdout

    recording = tmp_path / "agent.jsonl"
    with OpenAIServer.running() as server:
        replay_calls = _cafe(tmp_path, "replay-run", str(recording), "--", sys.executable, str(agent),
                             AGENT_BASE_URL=server.base_url, POOL_METHOD=method, POOL_WORK="call")
        assert replay_calls.returncode == 51, replay_calls.stderr
        assert server.count == 0
        record_calls = _cafe(tmp_path, "record", str(tmp_path / "workers.jsonl"), "--", sys.executable, str(agent),
                             AGENT_BASE_URL=server.base_url, POOL_METHOD=method, POOL_WORK="call")
        assert record_calls.returncode == 51, record_calls.stderr
        assert server.count == 1  # the first call, the program's own
    assert record_calls.stderr.splitlines()[-1].endswith(f"its calls are kept in {tmp_path / 'workers.jsonl.partial'}")
    assert _calls(tmp_path / "workers.jsonl.partial") == [1]


def test_a_relative_recording_is_made_where_it_was_named_when_the_program_changes_directory(
        tmp_path: Path) -> None:
    agent, elsewhere = tmp_path / "agent.py", tmp_path / "elsewhere"
    agent.write_text(AGENT)
    elsewhere.mkdir()
    program = ["--", sys.executable, str(agent)]
    with OpenAIServer.running() as server:
        live = _cafe(tmp_path, "record", "relative.jsonl", *program, AGENT_BASE_URL=server.base_url,
                     AGENT_CHDIR=str(elsewhere))
        assert live.returncode == 0, live.stderr
        assert live.stderr.splitlines() == ["cafe: recorded 2 call(s) to relative.jsonl"]
        before = server.count
        replayed = _cafe(tmp_path, "replay-run", "relative.jsonl", *program, AGENT_BASE_URL=server.base_url,
                         AGENT_CHDIR=str(elsewhere))
        assert replayed.returncode == 0, replayed.stderr
        assert server.count == before
    assert _calls(tmp_path / "relative.jsonl") == [1, 2]
    assert list(elsewhere.iterdir()) == []


def test_a_hook_that_cannot_be_written_is_one_line_and_leaves_no_directory(tmp_path: Path) -> None:
    agent, temporary = tmp_path / "agent.py", tmp_path / "tmp"
    agent.write_text(AGENT)
    temporary.mkdir()
    recording = tmp_path / "agent.jsonl"
    with OpenAIServer.running() as server:
        assert _cafe(tmp_path, "record", str(recording), "--", sys.executable, str(agent),
                     AGENT_BASE_URL=server.base_url).returncode == 0

    def small_files() -> None:  # the hook's sitecustomize.py is larger: its write fails (EFBIG)
        resource.setrlimit(resource.RLIMIT_FSIZE, (256, 256))

    for command, target, where in (("record", tmp_path / "new.jsonl", tmp_path),
                                   ("replay-run", recording, temporary)):
        done = subprocess.run([sys.executable, "-m", "cafe", command, str(target), "--", sys.executable, str(agent)],
                              env=_environ(tmp_path, TMPDIR=str(temporary)), capture_output=True, text=True,
                              timeout=180, check=False, cwd=tmp_path, preexec_fn=small_files)
        assert done.returncode == 38, done.stderr
        assert done.stdout == ""
        assert done.stderr.splitlines() == [f"cafe: error: {where}: cannot write cafe's hook (a .cafe-run-* "
                                            "directory) in it (file too large)"]
        assert _hook_directories(where) == []
    assert not (tmp_path / "new.jsonl").exists()


def test_options_written_between_rec_and_the_program_are_the_commands(tmp_path: Path) -> None:
    agent, recording = tmp_path / "agent.py", tmp_path / "agent.jsonl"
    agent.write_text(AGENT)
    program = ["--", sys.executable, str(agent)]
    with OpenAIServer.running() as server:
        url = server.base_url
        assert _cafe(tmp_path, "record", str(recording), *program, AGENT_BASE_URL=url).returncode == 0
        again = _cafe(tmp_path, "record", str(recording), "--record-mode", "all", *program, AGENT_BASE_URL=url,
                      AGENT_MAX_TOKENS="6")
        assert again.returncode == 0, again.stderr
        assert json.loads(recording.read_text().splitlines()[1])["request"]["max_tokens"] == 6
        before = server.count
        ignoring = _cafe(tmp_path, "replay-run", str(recording), "--ignore", "max_tokens", *program,
                         AGENT_BASE_URL=url, AGENT_MAX_TOKENS="7")
        assert ignoring.returncode == 0, ignoring.stderr
        assert server.count == before

    unknown = _cafe(tmp_path, "record", str(recording), "--no-such-option", *program)
    assert (unknown.returncode, unknown.stderr.splitlines()) == (2, [
        "cafe: error: cafe record: --no-such-option: not an option of cafe record (the program goes after --)"])
    unmarked = _cafe(tmp_path, "record", str(recording), "--record-mode", "all", sys.executable, str(agent))
    assert (unmarked.returncode, unmarked.stderr.splitlines()) == (2, [
        "cafe: error: cafe record: --record-mode: write the program after --, and the command's options before "
        f"it, e.g. `cafe record {recording} --record-mode ... -- python agent.py`"])
    assert _hook_directories(tmp_path) == []


def test_a_program_that_never_loads_the_hook_is_reported_as_unchecked(tmp_path: Path) -> None:
    agent, recording = tmp_path / "agent.py", tmp_path / "agent.jsonl"
    agent.write_text(AGENT)
    with OpenAIServer.running() as server:
        assert _cafe(tmp_path, "record", str(recording), "--", sys.executable, str(agent),
                     AGENT_BASE_URL=server.base_url).returncode == 0
    shell = shutil.which("sh")
    assert shell is not None
    for command, target in (("replay-run", recording), ("record", tmp_path / "none.jsonl")):
        unchecked = _cafe(tmp_path, command, str(target), "--", shell, "-c", "exit 0")
        assert unchecked.returncode == 50, unchecked.stderr
        assert "without loading cafe's hook (not a Python program, or a Python that skips its startup files)" \
            in unchecked.stderr
        assert len(unchecked.stderr.splitlines()) == 1
    assert not (tmp_path / "none.jsonl").exists()


# Calls, then replaces itself with a fresh interpreter (`exec`, the same process) that calls again.
EXECS = '''
import os
import sys

import openai

client = openai.OpenAI(base_url=os.environ["AGENT_BASE_URL"], api_key=os.environ["AGENT_KEY"], max_retries=0)
text = "And a croissant." if sys.argv[1:] == ["again"] else "A latte, please."
print(client.chat.completions.create(model="m", max_tokens=5, messages=[{"role": "user", "content": text}])
      .choices[0].message.content)
if not sys.argv[1:]:
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, __file__, "again"])
'''


def test_a_program_that_execs_after_recording_calls_has_its_later_calls_refused(tmp_path: Path) -> None:
    agent, recording = tmp_path / "execs.py", tmp_path / "agent.jsonl"
    agent.write_text(EXECS)
    with OpenAIServer.running() as server:
        done = _cafe(tmp_path, "record", str(recording), "--", sys.executable, str(agent),
                     AGENT_BASE_URL=server.base_url)
        assert server.count == 1  # the second interpreter's call was never sent
    assert done.returncode == 30, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"cafe: error: {recording}: a model call was refused: the program's Python replaced itself (exec) after "
        "recording calls, which the interpreter before it wrote; cafe record records one interpreter's calls "
        f"(make them before the exec, or after it only); nothing recorded at {recording}; its calls are kept in "
        f"{tmp_path / 'agent.jsonl.partial'}")
    assert _calls(tmp_path / "agent.jsonl.partial") == [1]


# Asks the server through the standard library only: neither httpx nor httpx2 is imported.
NEITHER = '''
import json
import os
import sys
import urllib.request

request = urllib.request.Request(os.environ["AGENT_BASE_URL"] + "/chat/completions", method="POST",
                                 data=json.dumps({"model": "m", "messages": []}).encode(),
                                 headers={"content-type": "application/json"})
with urllib.request.urlopen(request, timeout=30) as answer:
    print("answered:", answer.status)
print("imported:", sorted(name for name in ("httpx", "httpx2") if name in sys.modules))
'''


def test_a_program_that_uses_neither_library_is_told_so_in_one_line(tmp_path: Path) -> None:
    agent, recording, neither = tmp_path / "agent.py", tmp_path / "agent.jsonl", tmp_path / "neither.py"
    agent.write_text(AGENT)
    neither.write_text(NEITHER)
    note = ("no call went through httpx or httpx2 (the program imported neither: cafe records and replays the "
            "calls made through them)")
    with OpenAIServer.running() as server:
        empty = tmp_path / "empty.jsonl"
        made = _cafe(tmp_path, "record", str(empty), "--", sys.executable, str(neither),
                     AGENT_BASE_URL=server.base_url)
        assert made.returncode == 0 and made.stdout == "answered: 200\nimported: []\n", made.stderr
        assert made.stderr.splitlines() == [f"cafe: recorded 0 call(s) to {empty}; {note}"]
        replayed = _cafe(tmp_path, "replay-run", str(empty), "--", sys.executable, str(neither),
                         AGENT_BASE_URL=server.base_url)
        assert replayed.stderr.splitlines() == [f"cafe: replayed 0 call(s) from {empty}: every recorded call used; "
                                                f"{note}"]
        assert _cafe(tmp_path, "record", str(recording), "--", sys.executable, str(agent),
                     AGENT_BASE_URL=server.base_url).returncode == 0
        unused = _cafe(tmp_path, "replay-run", str(recording), "--", sys.executable, str(neither),
                       AGENT_BASE_URL=server.base_url)
    assert unused.returncode == UnusedCalls.exit_code
    [line] = unused.stderr.splitlines()
    assert line.startswith(f"cafe: error: {recording}: 2 recorded call(s) were never made") and line.endswith(note)
