"""Figure 9: what each GenAI instrumentation adds to one model call, ours among them.

The same request (cafe's system prompt and five tool schemas, a mid-shift conversation from
bench/synthetic.py) goes through the `openai` SDK to an `httpx2.MockTransport` that answers
at once with a fixed chat.completions body (two tool calls, usage). Variants:

- `bare`: the SDK call alone (`client.chat.completions.create`), no OpenTelemetry at all;
- `ours`: the same SDK call under our instrumentor (`cafe_otel.instrumentation`, an observer
  on the wire seam) reporting through `cafe_otel.configure()` (content off, its own chain over
  a do-nothing exporter, as figure 1 builds it);
- `floor`: the bare call inside one SDK span holding the GenAI attributes (values known up
  front, nothing read from the request or response), on the SDK's `BatchSpanProcessor` over
  the do-nothing exporter: what any instrumentation that makes a span pays at the least;
- the peers, each instrumenting the bare SDK call with content off, a `TracerProvider` and
  the SDK's `BatchSpanProcessor` over the same do-nothing exporter: the official
  `opentelemetry-instrumentation-genai-openai`, OpenLLMetry's
  `opentelemetry-instrumentation-openai`, and `openinference-instrumentation-openai`.

The same conversation is also sent as an OpenAI Responses call (`client.responses.create`)
and as an Anthropic Messages call (`anthropic`'s `client.messages.create`), each written in
its API's own words by bench/apis.py, against the peers that instrument that API (for
Anthropic: the official `opentelemetry-instrumentation-genai-anthropic`, OpenLLMetry's and
OpenInference's, and the `anthropic` SDK's own spans, its `open_telemetry` client option);
those are counted by instructions only.

Each twice: the plain call, and the same answer streamed (the mock sends its server-sent
events, a role chunk, the words, the tool calls' pieces, the finish reason and the usage; the
caller reads them to the end). Spans only, and again with metrics on (an SDK `MeterProvider`
with an in-memory reader that is
never collected) for every variant that records metrics. Each variant runs in a fresh
interpreter (bench/peer_runner.py); the peers in virtualenvs of their own under the cache, so
that their packages never touch the project's venv. Every round runs every variant once, the
order rotating from round to round; a variant's figure for a round is the median of its
samples; "added" is that minus the bare call's in the same round; figures are medians over
rounds, ratios the medians of per-round ratios.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import apis, instructions
from bench.stats import Paired, median
from bench.synthetic import MODEL, synthetic_calls
from bench.table import Figure

ROOT = Path(__file__).resolve().parent.parent
BASE_URL = "http://127.0.0.1:9/v1"  # never dialled: the mock transport answers
OTEL_INSTRUMENTATION = "opentelemetry-instrumentation==0.66b2"  # pairs with the pinned SDK 1.45.x


@dataclass(frozen=True)
class Peer:
    name: str  # the runner's variant name
    label: str
    requirements: tuple[str, ...]  # exact pins, besides the shared ones from the project's venv
    env: tuple[tuple[str, str], ...]  # its content switch (checked in its source; see README)
    records_metrics: tuple[str, ...]  # the APIs whose calls it records metrics for
    apis: tuple[str, ...] = ("chat", "responses")  # the model APIs it instruments
    sdk: str = "openai"  # the SDK it wraps, installed at the project venv's version


PEERS = (
    Peer("official", "official OTel (opentelemetry-instrumentation-genai-openai)",
         ("opentelemetry-instrumentation-genai-openai==1.3b0", "opentelemetry-util-genai==1.3b0",
          OTEL_INSTRUMENTATION),
         (("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "NO_CONTENT"),), ("chat", "responses")),
    # The official package most users have: it imports under openai 3.x once `httpx` is installed,
    # with opentelemetry-util-genai at most 1.1b0 (its later releases dropped what 2.4b0 imports).
    Peer("openai_v2", "official OTel (opentelemetry-instrumentation-openai-v2)",
         ("opentelemetry-instrumentation-openai-v2==2.4b0", "opentelemetry-util-genai==1.1b0", "httpx==0.28.1",
          OTEL_INSTRUMENTATION),
         (("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "false"),), ("chat",), ("chat",)),
    Peer("openllmetry", "OpenLLMetry (opentelemetry-instrumentation-openai)",
         ("opentelemetry-instrumentation-openai==0.62.4", "opentelemetry-semantic-conventions-ai==0.5.1",
          OTEL_INSTRUMENTATION),
         (("TRACELOOP_TRACE_CONTENT", "false"),), ("chat",)),  # none for a Responses call
    Peer("openinference", "OpenInference (openinference-instrumentation-openai)",
         ("openinference-instrumentation-openai==0.1.66", "openinference-instrumentation==0.1.72",
          "openinference-semantic-conventions==0.1.42", OTEL_INSTRUMENTATION),
         # Also passed as TraceConfig(hide_inputs=True, hide_outputs=True) by the runner.
         (("OPENINFERENCE_HIDE_INPUTS", "true"), ("OPENINFERENCE_HIDE_OUTPUTS", "true")), ()),
    Peer("official_anthropic", "official OTel (opentelemetry-instrumentation-genai-anthropic)",
         ("opentelemetry-instrumentation-genai-anthropic==1.3b0", "opentelemetry-util-genai==1.3b0",
          OTEL_INSTRUMENTATION),
         (("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "NO_CONTENT"),), ("anthropic",), ("anthropic",),
         "anthropic"),
    Peer("openllmetry_anthropic", "OpenLLMetry (opentelemetry-instrumentation-anthropic)",
         ("opentelemetry-instrumentation-anthropic==0.62.4", "opentelemetry-semantic-conventions-ai==0.5.1",
          OTEL_INSTRUMENTATION),
         (("TRACELOOP_TRACE_CONTENT", "false"),), ("anthropic",), ("anthropic",), "anthropic"),
    Peer("openinference_anthropic", "OpenInference (openinference-instrumentation-anthropic)",
         ("openinference-instrumentation-anthropic==3.1.0", "openinference-instrumentation==0.1.72",
          "openinference-semantic-conventions==0.1.42", OTEL_INSTRUMENTATION),
         (("OPENINFERENCE_HIDE_INPUTS", "true"), ("OPENINFERENCE_HIDE_OUTPUTS", "true")), (), ("anthropic",),
         "anthropic"),
)
# Installed into every peer's venv at the project venv's own versions (with the peer's SDK), so
# the SDK call underneath (openai or anthropic, httpx2, pydantic) and the OTel SDK are the same
# code as ours runs on.
SHARED_ROOTS = ("opentelemetry-api", "opentelemetry-sdk", "opentelemetry-semantic-conventions", "wrapt",
                "packaging")
_SWITCH_PREFIXES = ("OTEL_", "TRACELOOP_", "OPENINFERENCE_")


ESSENTIAL = ("bare", "ours")  # without these there is no figure: their failure is a crash
CHILD_TIMEOUT = 300.0  # seconds for a child to set up, or to answer one sample


class VenvUnavailable(Exception):
    """A peer's virtualenv could not be made (no network, a version that does not resolve)."""


def cache_dir() -> Path:
    return Path(os.environ.get("CAFE_BENCH_CACHE") or Path.home() / ".cache" / "cafe-otel" / "bench-venvs")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def shared_pins(roots: Iterable[str] = SHARED_ROOTS) -> list[str]:
    """`name==version` for the roots and everything they require, as installed here."""
    pins: dict[str, str] = {}
    pending = list(roots)
    while pending:
        name = _normal(pending.pop())
        if name in pins:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional requirement this venv does not have
        pins[name] = dist.version
        for requirement in dist.requires or ():
            if "extra ==" in requirement:
                continue
            pending.append(re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0])
    return [f"{name}=={version}" for name, version in sorted(pins.items())]


def requirement_line(peer: Peer) -> str:
    return " ".join([*peer.requirements, *shared_pins((peer.sdk, *SHARED_ROOTS))])


def venv_path(peer: Peer) -> Path:
    line = f"{sys.version_info[0]}.{sys.version_info[1]} {requirement_line(peer)}"
    return cache_dir() / f"{peer.name}-{hashlib.sha256(line.encode()).hexdigest()[:12]}"


def venv_python(peer: Peer) -> Path | None:
    """The peer's venv interpreter if the venv is complete, else None (never creates one)."""
    place = venv_path(peer)
    return place / "bin" / "python" if (place / "complete").is_file() else None


def ensure_venv(peer: Peer) -> Path:
    """The peer's venv interpreter, making the venv first if needed (needs PyPI)."""
    found = venv_python(peer)
    if found is not None:
        return found
    place = venv_path(peer)
    if place.exists():  # an earlier attempt stopped half-way
        shutil.rmtree(place)
    place.parent.mkdir(parents=True, exist_ok=True)
    python = place / "bin" / "python"
    steps = [
        [sys.executable, "-m", "venv", str(place)],
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
         *peer.requirements, *shared_pins((peer.sdk, *SHARED_ROOTS))],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise VenvUnavailable(f"{peer.name}: `{' '.join(step[:4])} ...` failed: {last[:200]}")
    freeze = subprocess.run([str(python), "-m", "pip", "freeze"], capture_output=True, text=True, check=True)
    (place / "requirements.txt").write_text(requirement_line(peer).replace(" ", "\n") + "\n")
    (place / "freeze.txt").write_text(freeze.stdout)
    (place / "complete").write_text("ok\n")
    return python


def _child_env(extra: Iterable[tuple[str, str]]) -> dict[str, str]:
    # No variable of ours or of a peer leaks in from the caller's shell: each variant sees
    # exactly its own switches.
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SWITCH_PREFIXES) and k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)
    # One hash seed for every process, so that dict and set layouts do not differ from one
    # variant's process to the next.
    env["PYTHONHASHSEED"] = "0"
    env.update(extra)
    return env


REQUEST_SIZES = ("small", "medium", "large")
"""The request's sizes: about 1 KB, 3.6 KB (the default) and 20 KB of JSON."""


def _request(size: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """(messages, tools, the synthetic answer) of a request of `size`: the third call of the
    synthetic session (system prompt, a finished exchange, a new user line, five tool schemas)
    for `medium`; its system prompt, its last user line and one tool schema for `small`; the
    44th call with the last 22 exchanges kept for `large` (a long-context agent's)."""
    if size == "large":
        call = synthetic_calls(44, window=22)[-1]
        return call.messages, call.tools, synthetic_calls(3)[2].response
    call = synthetic_calls(3)[2]
    if size == "small":
        return [call.messages[0], call.messages[-1]], call.tools[:1], call.response
    if size != "medium":
        raise ValueError(f"request size {size!r}: one of {', '.join(REQUEST_SIZES)}")
    return call.messages, call.tools, call.response


def workload(size: str = "medium", api: str = "chat") -> dict[str, Any]:
    """The request and the mock's answer, the same for every variant: the answer is two tool
    calls whatever the request's size; `api` says in which API's words (bench/apis.py)."""
    messages, tools, response = _request(size)
    message = dict(response["choices"][0]["message"])
    message.update(refusal=None, annotations=[])
    usage = dict(response["usage"])
    usage["prompt_tokens_details"] = {"cached_tokens": 0, "audio_tokens": 0}
    usage["completion_tokens_details"] = {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
    body = {
        "id": response["id"], "object": "chat.completion", "created": 1_767_225_600,
        "model": response["model"], "service_tier": "default", "system_fingerprint": "fp_bench0001",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls"}],
        "usage": usage,
    }
    user_lines = [m["content"] for m in messages if m["role"] == "user"]
    arguments = [c["function"]["arguments"] for c in message["tool_calls"]]
    tool_results = [m["content"] for m in messages if m["role"] == "tool"]
    markers = [*user_lines, *arguments, *tool_results, messages[0]["content"][:60]]
    call = apis.call_of(api, messages, tools, body, MODEL)
    return {**call, "base_url": BASE_URL.removesuffix("/v1") if api == "anthropic" else BASE_URL,
            "markers": markers, "request_size": size,
            "request_bytes": len(json.dumps({**call["request"], "model": call["model"]}))}


@dataclass
class Variant:
    key: str  # e.g. "official+metrics"
    runner: str  # the runner's variant name
    python: str
    metrics: bool
    env: tuple[tuple[str, str], ...] = ()


class Child:
    """One variant's process for one round: started, warmed up, then sampled on request."""

    def __init__(self, variant: Variant, spec: dict[str, Any], workdir: Path) -> None:
        self.variant = variant
        path = workdir / f"spec-{variant.key}.json"
        path.write_text(json.dumps({**spec, "variant": variant.runner, "metrics": variant.metrics}))
        self.errors = (workdir / f"stderr-{variant.key}.txt").open("w+")
        self.process = subprocess.Popen(
            [variant.python, "-m", "bench.peer_runner", str(path)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.errors, text=True, cwd=ROOT, env=_child_env(variant.env))

    def _line(self, timeout: float) -> str:
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.process.kill()
            self.process.wait()
            self.errors.seek(0)
            last = (self.errors.read().strip().splitlines() or [f"no answer (exit {self.process.returncode})"])[-1]
            raise RuntimeError(f"{self.variant.key}: {last[:300]}")
        return line

    def ready(self) -> None:
        if self._line(CHILD_TIMEOUT).strip() != "ready":
            raise RuntimeError(f"{self.variant.key}: did not say ready")

    def ask(self, command: str) -> dict[str, Any]:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return json.loads(self._line(CHILD_TIMEOUT))

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.errors.close()


def _variants(smoke: bool, blocked: dict[str, str], *, ours_metrics: bool, api: str = "chat") -> list[Variant]:
    here = sys.executable
    # `floor`: one SDK span around the bare call, what any span-making instrumentation pays.
    found = [Variant("bare", "bare", here, False), Variant("ours", "ours", here, False),
             Variant("floor", "sdk_span", here, False)]
    if ours_metrics:
        found.append(Variant("ours+metrics", "ours", here, True))
    if smoke:
        return found
    if api == "anthropic":  # the SDK's own spans: a peer already in the project's venv
        found.append(Variant("anthropic_sdk", "anthropic_sdk", here, False))
    for peer in PEERS:
        if api not in peer.apis:
            continue
        try:
            python = str(ensure_venv(peer))
        except (VenvUnavailable, subprocess.TimeoutExpired, OSError) as error:
            blocked[peer.name] = str(error)
            continue
        found.append(Variant(peer.name, peer.name, python, False, peer.env))
        if api in peer.records_metrics:
            found.append(Variant(f"{peer.name}+metrics", peer.name, python, True, peer.env))
    return found


def ours_records_metrics() -> bool:
    """Whether this cafe_otel can record metrics for ours (configure()'s metrics pipeline)."""
    try:
        import cafe_otel._metrics.listener  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return False
    return True


def _round(variants: list[Variant], spec: dict[str, Any], workdir: Path, number: int, samples: int,
           calls: int, failed: dict[str, str]) -> dict[str, dict[str, Any]]:
    """One round: a fresh process for every variant, then `samples` slots in which each
    variant runs one sample of `calls` calls, the order rotating from slot to slot."""
    children: dict[str, Child] = {}
    taken: dict[str, dict[str, Any]] = {}

    def drop(key: str, error: Exception) -> None:
        if key in ESSENTIAL:
            raise error
        failed[key] = str(error)
        children.pop(key).close()

    try:
        for variant in variants:
            if variant.key not in failed:
                children[variant.key] = Child(variant, spec, workdir)
        for key in list(children):
            try:
                children[key].ready()
            except RuntimeError as error:
                drop(key, error)
        cpu: dict[str, list[float]] = {key: [] for key in children}
        wall: dict[str, list[float]] = {key: [] for key in children}
        for slot in range(samples):
            keys = list(children)
            shift = (slot + number) % len(keys)
            order = keys[shift:] + keys[:shift]
            if (slot + number) % 2:
                order.reverse()
            for key in order:
                try:
                    answer = children[key].ask(f"sample {calls}")
                except (RuntimeError, ValueError) as error:
                    drop(key, error)
                    continue
                cpu[key].append(answer["cpu"])
                wall[key].append(answer["wall"])
        for key in list(children):
            try:
                result = children[key].ask("finish")
            except (RuntimeError, ValueError) as error:
                drop(key, error)
                continue
            taken[key] = {**result, "cpu": median(cpu[key]), "wall": median(wall[key]), "fastest": min(cpu[key])}
    finally:
        for child in children.values():
            child.close()
    return taken


API_WORDS = {"chat": "chat call", "responses": "Responses call", "anthropic": "Anthropic Messages call"}


def run(smoke: bool = False, *, metrics: bool | None = None, apis_run: tuple[str, ...] = apis.APIS) -> list[Figure]:
    """For each API, the plain call's figures, then the streamed call's. Chat's are counted and
    timed; the other APIs' counted only (timed in a smoke run, which counts nothing)."""
    found: list[Figure] = []
    for api in apis_run:
        timed = smoke or api == "chat"
        for stream in (False, True):
            found += run_one(smoke, metrics=metrics, stream=stream, api=api, timed=timed)
    return found


def run_one(smoke: bool = False, *, metrics: bool | None = None, stream: bool = False,
            sizes: tuple[int, int, int, int] | None = None, api: str = "chat", timed: bool = True,
            size: str = "medium") -> list[Figure]:
    """`metrics`: run ours with metrics too (default: when this cafe_otel has them).
    `sizes`: (rounds, warmup calls, samples a round, calls a sample) instead of the defaults.
    `timed`: the CPU-time rounds too, beside the instruction counts. `size`: the request's
    (REQUEST_SIZES); a row of any but the default size names it."""
    rounds, warmup, samples, calls = sizes or ((2, 20, 3, 20) if smoke else (5, 200, 30, 100))
    ours_metrics = ours_records_metrics() if metrics is None else metrics
    blocked: dict[str, str] = {}
    variants = _variants(smoke, blocked, ours_metrics=ours_metrics, api=api)
    spec = {**workload(size, api=api), "warmup": warmup, "stream": stream}
    if not timed:
        rounds = 0
    failed: dict[str, str] = {}
    by_round: list[dict[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="cafe-bench-peers-") as tmp:
        for number in range(rounds):
            by_round.append(_round(variants, spec, Path(tmp), number, samples, calls, failed))
    kept = [v for v in variants if v.key not in failed]
    # A variant's figure for a round: the median of its samples' CPU time a call.
    paired = Paired({v.key: [taken[v.key]["cpu"] for taken in by_round] for v in kept})
    walls = Paired({v.key: [taken[v.key]["wall"] for taken in by_round] for v in kept})
    # Interference on a shared machine only ever slows a sample down, so each process's
    # fastest sample is a steadier estimate; shown beside the medians as a cross-check.
    fastest = Paired({v.key: [taken[v.key]["fastest"] for taken in by_round] for v in kept})
    results = {v.key: [taken[v.key] for taken in by_round] for v in kept}
    figures = _counted_figures(variants, spec, blocked, smoke, stream)
    if timed:
        figures += _figures(paired, walls, fastest, results, failed, blocked, variants, rounds, samples, calls,
                            smoke, ours_metrics, api)
    words = API_WORDS[api]
    for figure in figures:
        name = figure.name.replace("chat call", words)
        if api != "chat":
            name = name.replace(": added per call", f": added per {words}")
        if stream:
            name = name.replace(words, f"streamed {words}").replace(": added per call", ", streamed: added per call")
        if size != "medium":
            name = name.replace(words, f"{words} ({size} request, {spec['request_bytes'] / 1e3:.1f} KB)", 1)
        figure.name = name
    return figures


WIRE_TARGET = 0.05  # what recording, and replaying, may add to the bare call


def wire_figures(smoke: bool = False) -> list[Figure]:
    """Figure 11 (b) by instructions: what the wire adds to this figure's chat call (the
    medium request), recorded (`WireRecorder`, every line whole: two requests alternate) and
    replayed (`ReplayTransport`), each a callgrind count against the bare call's."""
    name = "wire {} adds to figure 9's chat call, instructions"
    if smoke or not instructions.available():
        why = "smoke run" if smoke else "valgrind is not installed (apt-get install valgrind)"
        return [Figure(11, name.format(what), None, "%", f"<= {WIRE_TARGET:.0%}", None, f"not counted: {why}")
                for what in ("recording", "replaying")]
    here = sys.executable
    variants = [Variant(key, key, here, False) for key in ("bare", "wire_recording", "wire_replaying")]
    spec = {**workload(), "warmup": COUNT_WARMUP, "stream": False}
    with tempfile.TemporaryDirectory(prefix="cafe-bench-wire-count-") as tmp:
        counts, failed = count_variants(variants, spec, Path(tmp))
    figures = []
    for what in ("recording", "replaying"):
        key = f"wire_{what}"
        if key in failed or "bare" in failed:
            figures.append(Figure(11, name.format(what), None, "%", f"<= {WIRE_TARGET:.0%}", None,
                                  f"failed: {failed.get(key) or failed['bare']}"[:300]))
            continue
        bare, added = counts["bare"].process, counts[key].process - counts["bare"].process
        figures.append(Figure(
            11, name.format(what), added / bare * 100, "%", f"<= {WIRE_TARGET:.0%}", added / bare <= WIRE_TARGET,
            f"{added / 1e3:+,.0f}k over every thread against the bare call's {bare / 1e3:,.0f}k "
            f"({spec['request_bytes'] / 1e3:.1f} KB request); callgrind, {COUNT_CALLS} calls after {COUNT_WARMUP}"))
    return figures


TELEMETRY_TARGET = "<= cheapest peer, 2x floor"
COUNT_WARMUP = 10  # calls before the counted ones, in both processes of a variant: past every first-call cost
COUNT_CALLS = 20  # the counted calls: each is minutes under valgrind, and a count has no noise to average out
COUNT_PARALLEL = 3


@dataclass(frozen=True)
class Counted:
    caller: float  # instructions a call on the calling thread
    process: float  # instructions a call over every thread (the export worker's included)


def _counted_run(variant: Variant, spec: dict[str, Any], extra: int, workdir: Path) -> tuple[int, int]:
    """(calling thread's, every thread's instructions) of `variant`'s process making `extra`
    calls after its warm-up, under callgrind."""
    out = workdir / f"callgrind-{variant.key}-{'stream' if spec['stream'] else 'plain'}-{extra}"
    out.mkdir(parents=True)
    path = out / "spec.json"
    path.write_text(json.dumps({**spec, "variant": variant.runner, "metrics": variant.metrics}))
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out}/callgrind.out.%p",
         variant.python, "-m", "bench.peer_runner", str(path), "count", str(extra)],
        capture_output=True, text=True, cwd=ROOT, env=_child_env(variant.env), timeout=3600)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("==")]
        raise RuntimeError(f"{variant.key}: {(lines or [f'exit {done.returncode}'])[-1][:300]}")
    return instructions._totals(out)


def _digest(paths: Iterable[Path]) -> str:
    found = hashlib.sha256()
    for path in sorted(paths):
        found.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return found.hexdigest()


def _count_key(variant: Variant, spec: dict[str, Any], extra: int) -> str:
    """What a count depends on: the variant, its interpreter (a peer's venv is named by its
    pins), the spec, the runner's code, and for ours cafe's and cafe_otel's code too."""
    code = [ROOT / "bench" / name for name in ("peer_runner.py", "apis.py", "nothing.py", "overhead.py")]
    if variant.runner in ("ours", "bare_live"):
        code += [*(ROOT / "cafe").rglob("*.py"), *(ROOT / "cafe_otel").rglob("*.py")]
    what = [variant.key, variant.runner, variant.metrics, variant.python, list(variant.env), spec, extra,
            _digest(code)]
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:24]


def count_variants(variants: list[Variant], spec: dict[str, Any], workdir: Path, calls: int = COUNT_CALLS,
                   parallel: int = COUNT_PARALLEL) -> tuple[dict[str, Counted], dict[str, str]]:
    """Each variant's instructions a call (its process with `calls` calls after the warm-up,
    minus its process with only the warm-up), and the variants that could not be counted.
    A count is kept under the cache by what it depends on (`_count_key`): a count is the
    same every time, and the peers' take most of an hour."""
    from concurrent.futures import ThreadPoolExecutor

    kept = cache_dir() / "counts"
    runs = [(variant, extra) for variant in variants for extra in (0, calls)]

    def one(run: tuple[Variant, int]) -> tuple[int, int] | str:
        place = kept / f"{_count_key(run[0], spec, run[1])}.json"
        if place.is_file():
            caller, process = json.loads(place.read_text())
            return caller, process
        try:
            found = _counted_run(run[0], spec, run[1], workdir)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
            return str(error)
        kept.mkdir(parents=True, exist_ok=True)
        place.write_text(json.dumps(list(found)))
        return found

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        totals = dict(zip([(v.key, extra) for v, extra in runs], pool.map(one, runs), strict=True))
    counts: dict[str, Counted] = {}
    failed: dict[str, str] = {}
    for variant in variants:
        base, whole = totals[variant.key, 0], totals[variant.key, calls]
        if isinstance(base, str) or isinstance(whole, str):
            failed[variant.key] = base if isinstance(base, str) else str(whole)
            continue
        counts[variant.key] = Counted((whole[0] - base[0]) / calls, (whole[1] - base[1]) / calls)
    return counts, failed


ANTHROPIC_SDK_LABEL = "the anthropic SDK's own spans (its open_telemetry client option)"
FLOOR_LABEL = "floor (one SDK span with the GenAI attributes around the call, no instrumentation)"


def _label(key: str) -> str:
    peer = next((p for p in PEERS if p.name == key.removesuffix("+metrics")), None)
    name = (peer.label if peer else "ours (cafe_otel's instrumentor)" if key.startswith("ours")
            else FLOOR_LABEL if key == "floor" else ANTHROPIC_SDK_LABEL if key == "anthropic_sdk" else key)
    if key.endswith("+metrics"):
        return name + ", spans + metrics"
    return name + (", spans only" if key.startswith("ours") else "")


def _counted_figures(variants: list[Variant], spec: dict[str, Any], blocked: dict[str, str], smoke: bool,
                     stream: bool) -> list[Figure]:
    """The verdict's figures: each variant's instructions a call, minus the bare call's, by
    callgrind (load does not change them); ours against every peer and the official one."""
    what = "chat call"  # run_one names the API's and the streamed call's rows
    official = "official_anthropic" if spec.get("api") == "anthropic" else "official"
    sdk = "anthropic" if spec.get("api") == "anthropic" else "openai"
    verdict_rows = [("ours", official), ("ours+metrics", f"{official}+metrics")]
    why = ("smoke run" if smoke else "valgrind is not installed (apt-get install valgrind)"
           if not instructions.available() else "")
    if why:
        return [Figure(9, f"{_label(ours)}: added instructions per {what}", None, "k instr",
                       TELEMETRY_TARGET, None, f"not counted: {why}") for ours, _ in verdict_rows]
    with tempfile.TemporaryDirectory(prefix="cafe-bench-peers-count-") as tmp:
        counts, failed = count_variants(variants, {**spec, "warmup": COUNT_WARMUP}, Path(tmp))
    if "bare" not in counts:
        raise RuntimeError(f"the bare call could not be counted: {failed.get('bare')}")
    bare = counts["bare"]
    how = (f"callgrind, (instructions after {COUNT_WARMUP + COUNT_CALLS} calls - after {COUNT_WARMUP}) / "
           f"{COUNT_CALLS}, a process a variant, PYTHONHASHSEED=0")
    figures = [Figure(9, f"bare {sdk} SDK {what}, mock transport: instructions a call", bare.process / 1e3,
                      "k instr", "", None, f"{how}; calling thread {bare.caller / 1e3:,.0f}k")]
    added = {key: (found.process - bare.process, found.caller - bare.caller)
             for key, found in counts.items() if key != "bare"}
    for variant in variants:
        if variant.key in ("bare", "ours", "ours+metrics"):
            continue
        if variant.key not in added:
            figures.append(Figure(9, f"{_label(variant.key)}: added instructions per {what}", None, "k instr",
                                  note=f"not counted: {failed.get(variant.key, 'no count')}"))
            continue
        process, caller = added[variant.key]
        figures.append(Figure(9, f"{_label(variant.key)}: added instructions per {what}", process / 1e3, "k instr",
                              note=f"whole process; {process / bare.process:.1%} of the bare call; calling thread "
                                   f"{caller / 1e3:,.0f}k"))
    for peer in PEERS:
        if peer.name in blocked and spec.get("api", "chat") in peer.apis:
            figures.append(Figure(9, f"{_label(peer.name)}: added instructions per {what}", None, "k instr",
                                  note=f"blocked: {blocked[peer.name]}"))
    for ours, official in verdict_rows:
        title = f"{_label(ours)}: added instructions per {what}"
        if ours not in {v.key for v in variants}:
            continue
        if ours not in added:
            figures.append(Figure(9, title, None, "k instr", TELEMETRY_TARGET, None,
                                  f"blocked: {failed.get(ours, 'not counted')}"))
            continue
        process, caller = added[ours]
        # Each peer with metrics is compared with ours with metrics; one that records none
        # (OpenInference, the anthropic SDK's own) with both. The floor is no rival: it is what
        # making one span costs, instrumenting nothing.
        records_none = {v.key for v in variants if f"{v.key}+metrics" not in {w.key for w in variants}}
        rivals = {key: value for key, value in added.items() if not key.startswith("ours") and key != "floor"
                  and (key.endswith("+metrics") == ours.endswith("+metrics") or key in records_none)}
        reference = added.get(official)
        beaten = [key for key, value in rivals.items() if value[0] <= process]
        ratio = process / reference[0] if reference and reference[0] > 0 else None
        caller_ratio = caller / reference[1] if reference and reference[1] > 0 else None
        floor = added.get("floor")
        # Issue 34's targets: no peer adds less, at most twice what one bare SDK span adds, and
        # the calling thread at most a quarter of the official instrumentation's.
        met = (None if caller_ratio is None or floor is None
               else not beaten and process <= 2 * max(floor[0], 0) and caller_ratio <= 0.25)
        note = ("whole process (the export worker's check and export included); "
                + (f"{ratio:.2f}x what {official} adds ({reference[0] / 1e3:,.0f}k); " if ratio is not None
                   else f"{official} not counted; ")
                + f"calling thread {caller / 1e3:,.0f}k"
                + (f" ({caller_ratio:.2f}x {official}'s {reference[1] / 1e3:,.0f}k)" if caller_ratio is not None
                   and reference else ""))
        if floor and reference and reference[0] > 0:
            note += (f"; the floor, one bare SDK span, adds {floor[0] / 1e3:,.0f}k over every thread "
                     f"({floor[0] / reference[0]:.2f}x {official})")
        if beaten:
            note += f"; not below {', '.join(beaten)}"
        figures.append(Figure(9, title, process / 1e3, "k instr", TELEMETRY_TARGET, met, note))
    return figures


def _added(paired: Paired, key: str) -> tuple[float, float, float, float]:
    """(median added µs, median ratio, lowest and highest added µs) over the rounds."""
    added = sorted((v - b) * 1e6 for v, b in zip(paired.samples[key], paired.samples["bare"], strict=True))
    return median(added), paired.ratio(key, "bare"), added[0], added[-1]


def _figures(paired, walls, fastest, results, failed, blocked, variants, rounds, per, calls, smoke,
             ours_metrics, api="chat") -> list[Figure]:
    keys = {v.key for v in variants}
    bare_us = paired.median("bare") * 1e6
    how = (f"CPU time a call; {rounds} rounds of a fresh process a variant, {per} samples of {calls} calls "
           f"each, handed out in turn, order rotating")
    rounds_us = ", ".join(f"{v * 1e6:.0f}" for v in paired.samples["bare"])
    sdk = results["bare"][0]["sdk"].split()[0]
    figures = [Figure(9, f"bare {sdk} SDK chat call, mock transport", bare_us, "µs", "",
                      note=f"{how}; per round {rounds_us} µs; fastest samples {fastest.median('bare') * 1e6:.0f} µs; "
                           f"wall clock {walls.median('bare') * 1e6:.0f} µs; {results['bare'][0]['sdk']}")]

    def peer_rows(suffix: str) -> dict[str, float]:
        shown = {}
        for peer in PEERS:
            key = peer.name + suffix
            if (suffix and api not in peer.records_metrics) or api not in peer.apis:
                continue
            if peer.name in blocked or key in failed or key not in keys:
                reason = ("skipped: not run in --smoke (no peer venvs are made)" if smoke else
                          f"blocked: {blocked.get(peer.name) or failed.get(key, 'not run')}")
                figures.append(Figure(9, f"{peer.label}{' + metrics' if suffix else ''}: added per call",
                                      None, "µs", note=reason))
                continue
            added, ratio, low, high = _added(paired, key)
            first = results[key][0]
            spans = first["spans"] / first["calls"]
            figures.append(Figure(
                9, f"{peer.label}{' + metrics' if suffix else ''}: added per call", added, "µs", "",
                note=f"{ratio:.2f}x the bare call; range {low:.0f}-{high:.0f} µs; by fastest samples "
                     f"{_added(fastest, key)[0]:.0f} µs; {first['version']}, "
                     f"{spans:g} span a call" + (f", {first['metric_points']} metric points" if suffix else "")))
            shown[key] = added
        return shown

    def ours_row(key: str, title: str, peers: dict[str, float]) -> None:
        added, ratio, low, high = _added(paired, key)
        first = results[key][0]
        beaten = [k for k, v in peers.items() if v <= added]
        verdict = None if not peers else not beaten
        spans = first["spans"] / first["calls"]
        official = peers.get(("official_anthropic" if api == "anthropic" else "official") + key.removeprefix("ours"))
        note = (f"{ratio:.2f}x the bare call; range {low:.0f}-{high:.0f} µs; by fastest samples "
                f"{_added(fastest, key)[0]:.0f} µs; "
                + (f"{added / official:.2f} of what the official one adds; " if official and official > 0 else "")
                + f"cafe-otel {first['version']}, {spans:g} span a call"
                + (f", {first['metric_points']} metric points" if first.get("metric_points") else ""))
        if beaten:
            note += f"; not below {', '.join(beaten)}"
        figures.append(Figure(9, title, added, "µs", "least of all" if peers else "", verdict, note))

    spans_only = peer_rows("")
    ours_row("ours", "ours (cafe_otel's instrumentor), spans only: added per call", spans_only)
    with_metrics = peer_rows("+metrics")
    with_metrics.update({k: v for k, v in spans_only.items() if k == "openinference"})  # it records none
    if "ours+metrics" in failed:
        figures.append(Figure(9, "ours, spans + metrics: added per call", None, "µs", "least of all", None,
                              f"blocked: {failed['ours+metrics']}"))
    elif ours_metrics and "ours+metrics" in keys:
        ours_row("ours+metrics", "ours, spans + metrics: added per call", with_metrics)
    else:
        figures.append(Figure(9, "ours, spans + metrics: added per call", None, "µs", "least of all", None,
                              "not measured: this cafe_otel records no metrics yet (run(metrics=True) "
                              "once cafe_otel._metrics.listener exists; it is picked up by itself)"))
    return figures
