"""`cafe record REC -- CMD` and `cafe replay-run REC -- CMD`: an unchanged program using the
`openai` SDK, recorded against the local server, then replayed with the server stopped;
the program's exit code passes through, a replay's refusal is the command's exit code and
one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.wire.openai_server import OpenAIServer

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-test-run-cli-0123456789abcdef"

AGENT = '''
import os
import sys

import openai

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


def _cafe(tmp_path: Path, *arguments: str, **env: str) -> subprocess.CompletedProcess[str]:
    theirs = tmp_path / "theirs"
    theirs.mkdir(exist_ok=True)
    # The program's own sitecustomize, which cafe's hook shadows and must still run.
    (theirs / "sitecustomize.py").write_text("import os\nos.environ['THEIR_SITECUSTOMIZE'] = 'ran'\n")
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("CAFE_", "OPENAI_"))}
    environ.update({"PYTHONPATH": os.pathsep.join([str(REPO), str(theirs)]), "AGENT_KEY": KEY}, **env)
    return subprocess.run([sys.executable, "-m", "cafe", *arguments], env=environ, capture_output=True, text=True,
                          timeout=180, check=False, cwd=tmp_path)


def test_an_unchanged_program_is_recorded_then_replayed_without_the_server(tmp_path: Path) -> None:
    agent, recording = tmp_path / "agent.py", tmp_path / "agent.jsonl"
    agent.write_text(AGENT)
    program = ["--", sys.executable, str(agent)]
    with OpenAIServer.running() as server:
        live = _cafe(tmp_path, "record", str(recording), *program, AGENT_BASE_URL=server.base_url)
        assert live.returncode == 0, live.stderr
        assert server.count == 2
        url = server.base_url
    assert f"recorded 2 call(s) to {recording}" in live.stdout
    assert "theirs: ran" in live.stdout
    assert KEY not in recording.read_text()

    replayed = _cafe(tmp_path, "replay-run", str(recording), *program, AGENT_BASE_URL=url)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.replace(f"replayed 2 call(s) from {recording}: every recorded call used\n", "") == \
        live.stdout.replace(f"recorded 2 call(s) to {recording}\n", "")

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
    assert refused.stderr.splitlines() == [f"cafe: error: {offline}: it holds no HTTP exchanges (format version 1); "
                                           f"replay it with `cafe replay {offline}`"]


def test_the_hook_in_the_program_reads_the_variable_the_command_sets() -> None:
    from cafe.wire._hook import HOOK_VARIABLE, SITECUSTOMIZE

    compile(SITECUSTOMIZE, "sitecustomize.py", "exec")
    assert f'os.environ.pop("{HOOK_VARIABLE}", None)' in SITECUSTOMIZE


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
