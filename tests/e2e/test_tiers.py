"""Two tiers end to end: one agent (collector.yaml, load_balancing by trace id), two
gateways (gateway.yaml, tail sampling), Jaeger with Badger, all built binaries on 127.0.0.1.

One run of 200 shifts covers the issue's three acceptance stories in order, because each
is about what the same traces look like afterwards:
1. sampling: every failed shift (consent_violation, turn_cap) is in Jaeger and complete;
   of the shifts that ended well a fraction within a 99.9% binomial bound of the
   configured rate is kept; a sampled-out trace is absent entirely, never partial;
2. a gateway is SIGKILLed between shift 100 and 101 and brought back after 50 more: the
   agent's disk queue holds what it could not deliver meanwhile, and afterwards every
   kept trace is still complete;
3. Jaeger is restarted: every trace is still there (Badger on disk).
Two smaller tests: each keep policy (stop reason, error status, latency) at 0% for the
rest, and the DNS resolver overlay routing at run time.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import cafe
import cafe.counter
from cafe.counter.clients.base import Response
from otelstack import Collector, Gateway, Jaeger, wait_for
from otelstack.layout import RESOLVER_DNS

from .shifts import Shifts, run_shifts

pytestmark = pytest.mark.e2e

SHIFTS = 200
KILL_AFTER = 99  # index of the last shift before gateway-1 dies
RESTART_AFTER = 149  # index of the last shift while it is dead
SAMPLE_PERCENT = 10.0
# Short waits for a test (the shipped defaults are 60 s / 5 s): a shift takes milliseconds.
DECISION_WAIT = "10s"
AFTER_ROOT = "1s"
# No scripted shift is slow; the latency policy must not keep any of them.
SLOW_SHIFT_MS = 600_000
# Every wait below is bounded by this.
SETTLE = 60.0


def _fire(call_id: str) -> dict:
    return {"id": call_id, "type": "function",
            "function": {"name": "fire_ticket", "arguments": json.dumps({"items": ["latte"], "table": 4})}}


def _price_check(call_id: str) -> dict:
    return {"id": call_id, "type": "function",
            "function": {"name": "price_check", "arguments": json.dumps({"item": "latte"})}}


def consent_violation() -> cafe.counter.CannedClient:
    """Fires a ticket nobody approved: the executor refuses, the shift ends in consent_violation."""
    return cafe.counter.CannedClient([{"content": None, "tool_calls": [_fire("f1")]}])


def turn_cap() -> cafe.counter.CannedClient:
    """Asks for a price every turn and never answers: the shift ends at the turn cap
    (8 turns). No span of it has an error status, so only the stop-reason policy keeps it."""
    return cafe.counter.CannedClient([{"content": None, "tool_calls": [_price_check(f"p{n}")]} for n in range(12)])


def unknown_tool_then_answer() -> cafe.counter.CannedClient:
    """Calls a tool that does not exist (an error span), then answers: ends `answered`,
    so only the error-status policy can keep it."""
    bad = {"id": "u1", "type": "function", "function": {"name": "make_espresso", "arguments": "{}"}}
    return cafe.counter.CannedClient([{"content": None, "tool_calls": [bad]}, {"content": "Sorry, I cannot."},
                              {"content": "Have a good day."}])


class SlowClient(cafe.counter.ScriptedClient):
    """The scripted model, 0.4 s a call: a shift that ends well but slowly."""

    def chat(self, *args: Any, **kwargs: Any) -> Response:
        time.sleep(0.4)
        return super().chat(*args, **kwargs)


def client_for(i: int) -> object:
    if i % 10 == 3:
        return consent_violation()
    if i % 10 == 7:
        return turn_cap()
    return cafe.counter.ScriptedClient()


def binomial_bounds(n: int, p: float, confidence: float = 0.999) -> tuple[int, int]:
    """The smallest [low, high] with P(X < low) and P(X > high) each at most (1 - confidence)/2."""
    tail = (1 - confidence) / 2
    pmf = [math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]
    low, below = 0, 0.0
    while below + pmf[low] <= tail:
        below += pmf[low]
        low += 1
    high, above = n, 0.0
    while above + pmf[high] <= tail:
        above += pmf[high]
        high -= 1
    return low, high


@pytest.mark.parametrize(("n", "p"), [(160, 0.1), (50, 0.5), (1000, 0.02)])
def test_binomial_bounds_are_the_tightest_with_each_tail_at_most_half_a_permille(n: int, p: float) -> None:
    def pmf(k: int) -> float:
        return math.comb(n, k) * p**k * (1 - p) ** (n - k)

    low, high = binomial_bounds(n, p)
    below = sum(pmf(k) for k in range(low))
    above = sum(pmf(k) for k in range(high + 1, n + 1))
    assert below <= 0.0005 < below + pmf(low)
    assert above <= 0.0005 < above + pmf(high)
    assert low <= n * p <= high


def settled(what: str, read: Callable[[], object], timeout: float = SETTLE, quiet: float = 2.0) -> object:
    """Poll `read` until its value has not changed for `quiet` seconds; return it."""
    deadline = time.monotonic() + timeout
    last, since = read(), time.monotonic()
    while time.monotonic() - since < quiet:
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} still changing after {timeout:.0f}s (last: {last!r})")
        time.sleep(0.25)
        now = read()
        if now != last:
            last, since = now, time.monotonic()
    return last


def queued(collector: Collector | Gateway) -> float:
    return collector.metric("otelcol_exporter_queue_size")


def quiesce(agent: Collector, gateways: list[Gateway]) -> None:
    """Wait until the agent has handed on everything it took and every gateway has decided
    every trace it holds and delivered what it kept. A gateway killed before that loses
    what it holds in memory (docs/deployment.md): this test is about the agent's side."""
    settled("spans accepted by the agent", lambda: agent.metric("otelcol_receiver_accepted_spans"))
    wait_for("the agent's queue to drain", lambda: queued(agent) == 0 or None, SETTLE)
    for gateway in gateways:
        wait_for(f"{gateway.name} to decide every trace", lambda g=gateway: g.undecided() == 0 or None, SETTLE)
        # Kept spans wait up to the exporter's flush_timeout (1 s) for a batch; tail
        # sampling has no outgoing counter to compare with, so wait for the sent count to rest.
        settled(f"{gateway.name}'s sent spans", lambda g=gateway: g.metric("otelcol_exporter_sent_spans"), quiet=3.0)
        assert queued(gateway) == 0, f"{gateway.name} still has spans queued for Jaeger"


def jaeger_traces(jaeger: Jaeger, service: str) -> dict[str, list[str]]:
    """{trace id: sorted span ids, repeats included} of everything Jaeger holds for `service`."""
    found: dict[str, list[str]] = {}
    for trace in jaeger.traces(service, limit=2 * SHIFTS)[0]:
        found.setdefault(trace["traceID"].rjust(32, "0"), []).extend(s["spanID"] for s in trace["spans"])
    return {trace_id: sorted(ids) for trace_id, ids in found.items()}


def decided(gateways: list[Gateway], sampled: str) -> float:
    return sum(value for g in gateways
               for labels, value in g.samples("otelcol_processor_tail_sampling_global_count_traces_sampled")
               if labels.get("sampled") == sampled)


@pytest.fixture
def tiers(otelcol_bin: Path, tmp_path: Path, jaeger: Jaeger, procs: list) -> tuple[Collector, list[Gateway]]:
    gateways = [
        Gateway.create(otelcol_bin, tmp_path, jaeger.otlp_grpc, f"gateway-{n}", sample_percent=SAMPLE_PERCENT,
                       decision_wait=DECISION_WAIT, after_root=AFTER_ROOT, slow_shift_ms=SLOW_SHIFT_MS)
        for n in (1, 2)
    ]
    for gateway in gateways:
        procs.append(gateway)
        gateway.start()
    agent = Collector.create(otelcol_bin, tmp_path, upstream="unused:1", queue_dir=tmp_path / "agent-queue",
                             gateways=[g.otlp_grpc for g in gateways])
    procs.append(agent)
    agent.start()
    return agent, gateways


def test_two_tiers_keep_every_failed_shift_whole_through_a_gateway_crash_and_a_jaeger_restart(
    tiers: tuple[Collector, list[Gateway]], jaeger: Jaeger
) -> None:
    agent, gateways = tiers
    victim = gateways[0]
    outage: dict[str, float] = {}

    def between(i: int) -> None:
        if i == KILL_AFTER:
            quiesce(agent, gateways)
            outage["victim_new_traces"] = victim.metric("otelcol_processor_tail_sampling_new_trace_id_received")
            outage["victim_kept"] = decided([victim], "true")
            outage["accepted_before"] = agent.metric("otelcol_receiver_accepted_spans")
            victim.sigkill()
        elif i == RESTART_AFTER:
            # Let the SDK's last batch of the outage reach the agent, then read its queue.
            accepted = settled("spans accepted during the outage",
                               lambda: agent.metric("otelcol_receiver_accepted_spans"))
            outage["accepted_during"] = accepted - outage["accepted_before"]
            outage["queued"] = queued(agent)
            outage["failed_sends"] = sum(v for labels, v in agent.samples("otelcol_loadbalancer_backend_outcome")
                                         if labels.get("success") == "false")
            victim.start()

    shifts: Shifts = run_shifts(agent.otlp_grpc, "cafe-tiers", SHIFTS, client=client_for, between=between)
    assert shifts.account.dropped == 0, shifts.summary
    stops = [run.stop_reason for run in shifts.runs]
    failed = {shifts.trace_ids[i] for i, stop in enumerate(stops) if stop in ("consent_violation", "turn_cap")}
    assert [stops[i] for i in range(10)] == ["answered"] * 3 + ["consent_violation"] + ["answered"] * 3 + [
        "turn_cap"] + ["answered"] * 2, "the scripted mix changed: fix client_for"
    assert len(failed) == SHIFTS // 5
    span_count = {shifts.trace_ids[i]: len(t.nodes()) for i, t in enumerate(shifts.tracers)}

    # What the agent's queue held while gateway-1 was dead: every span it accepted since
    # the kill, on disk. Each request the agent sends mixes traces of both gateways (one
    # request holds up to 2048 spans, some 180 shifts) and stays queued until every
    # gateway took its part; gateway-2 got its part again on each retry (repeats that its
    # decision cache and Jaeger's span key absorb: checked below). The queue's size
    # counts the requests being retried too. The SDK saw no error: nothing dropped.
    assert outage["accepted_during"] > 0
    assert outage["queued"] == outage["accepted_during"], outage
    # The agent kept trying the dead gateway (and retrying forever is not a failure yet:
    # otelcol_exporter_send_failed_spans stays 0 until a retry gives up, which it never does).
    assert outage["failed_sends"] > 0, outage
    print(f"agent queue while gateway-1 was dead: {outage['queued']:.0f} spans queued of "
          f"{outage['accepted_during']:.0f} accepted since the kill")

    # Everything delivered: the agent's queue is empty again and both gateways decided all.
    quiesce(agent, gateways)
    # Each trace reached exactly one gateway: a split trace would count as new on both.
    new_traces = outage["victim_new_traces"] + sum(
        g.metric("otelcol_processor_tail_sampling_new_trace_id_received") for g in gateways)
    assert new_traces == SHIFTS, f"{new_traces:.0f} traces seen by the gateways for {SHIFTS} shifts"
    assert all(g.metric("otelcol_processor_tail_sampling_new_trace_id_received") > 0 for g in gateways)
    kept_by_gateways = outage["victim_kept"] + decided(gateways, "true")

    seen: dict[str, list[str]] = {}

    def whole() -> dict[str, list[str]] | None:
        seen.clear()
        seen.update(jaeger_traces(jaeger, shifts.service))
        if len(seen) < kept_by_gateways or any(len(ids) < span_count.get(t, 0) for t, ids in seen.items()):
            return None
        return seen

    try:
        wait_for(f"{kept_by_gateways:.0f} whole traces in Jaeger", whole, SETTLE, interval=1.0)
    except AssertionError as error:
        partial = {t: f"{len(ids)}/{span_count.get(t)}" for t, ids in seen.items() if len(ids) != span_count.get(t)}
        raise AssertionError(f"{error}; Jaeger has {len(seen)} traces, partial: {partial}") from None
    stored = settled("traces in Jaeger", lambda: jaeger_traces(jaeger, shifts.service), quiet=2.0)
    assert len(stored) == kept_by_gateways

    # 1. Every failed shift is there, complete: each span its shift made, nothing else.
    our_span_ids = {format(s, "016x") for s in shifts.span_ids}
    assert sorted(failed - set(stored)) == [], "a failed shift is missing from Jaeger"
    for trace_id, ids in stored.items():
        assert trace_id in span_count, f"a trace Jaeger holds was not made by these shifts: {trace_id}"
        assert len(set(ids)) == len(ids), f"trace {trace_id} has a span twice"
        assert len(ids) == span_count[trace_id] and set(ids) <= our_span_ids, (
            f"trace {trace_id} is partial or mixed: {len(ids)} of {span_count[trace_id]} spans")

    # The rest: kept at the configured rate, within a 99.9% binomial bound; the others absent.
    rest = [t for t in shifts.trace_ids if t not in failed]
    kept_rest = sum(1 for t in rest if t in stored)
    low, high = binomial_bounds(len(rest), SAMPLE_PERCENT / 100)
    assert low <= kept_rest <= high, f"kept {kept_rest} of {len(rest)} good shifts; 99.9% bound [{low}, {high}]"
    absent = [t for t in rest if t not in stored][:10]
    for trace_id in absent:  # asked by id, not only missing from a search: nothing at all
        assert jaeger.api_status(f"/api/traces/{trace_id}") == 404, trace_id

    # 3. Restart Jaeger: Badger kept every trace, span for span.
    jaeger.restart()
    after = wait_for("traces in Jaeger after its restart",
                     lambda: jaeger_traces(jaeger, shifts.service) or None, SETTLE)
    assert after == stored


def test_the_dns_resolver_overlay_routes_to_what_the_name_resolves_to(
    otelcol_bin: Path, tmp_path: Path, jaeger: Jaeger, procs: list
) -> None:
    """resolver-dns.yaml merged over collector.yaml at run time: the agent finds its one
    gateway through the resolver (an IP literal resolves to itself, so no DNS server is
    needed on a test machine) and every span of every shift arrives once."""
    gateway = Gateway.create(otelcol_bin, tmp_path, jaeger.otlp_grpc, "gateway-dns", sample_percent=100,
                             decision_wait=DECISION_WAIT, after_root=AFTER_ROOT, slow_shift_ms=SLOW_SHIFT_MS)
    procs.append(gateway)
    gateway.start()
    agent = Collector.create(
        otelcol_bin, tmp_path, upstream="unused:1", queue_dir=tmp_path / "agent-queue", gateways=["unused:1"],
        overlays=(RESOLVER_DNS,),
        extra_env={"CAFE_GATEWAY_DNS_NAME": "127.0.0.1", "CAFE_GATEWAY_PORT": str(gateway.ports["otlp_grpc"])},
    )
    procs.append(agent)
    agent.start()
    shifts = run_shifts(agent.otlp_grpc, "cafe-dns", 5)
    spans = jaeger.wait_for_spans("cafe-dns", shifts.spans, timeout=SETTLE)
    assert sorted(int(s["spanID"], 16) for s in spans) == sorted(shifts.span_ids)
    assert gateway.metric("otelcol_processor_tail_sampling_new_trace_id_received") == 5


def test_each_keep_policy_keeps_its_shifts_and_nothing_else_is_kept_at_zero_percent(
    otelcol_bin: Path, tmp_path: Path, jaeger: Jaeger, procs: list
) -> None:
    """At CAFE_SAMPLE_PERCENT=0 only the keep policies decide: a failed shift (stop reason),
    a shift with an error span that still ended well, and a slow one are kept whole; a
    fast shift that ended well is absent."""
    gateway = Gateway.create(otelcol_bin, tmp_path, jaeger.otlp_grpc, "gateway-policies", sample_percent=0,
                             decision_wait=DECISION_WAIT, after_root=AFTER_ROOT, slow_shift_ms=800)
    procs.append(gateway)
    gateway.start()
    agent = Collector.create(otelcol_bin, tmp_path, upstream="unused:1", queue_dir=tmp_path / "agent-queue",
                             gateways=[gateway.otlp_grpc])
    procs.append(agent)
    agent.start()
    kinds = [("slow", SlowClient), ("turn_cap", turn_cap), ("error", unknown_tool_then_answer),
             ("fast", cafe.counter.ScriptedClient), ("consent_violation", consent_violation)]
    shifts = run_shifts(agent.otlp_grpc, "cafe-policies", 2 * len(kinds), client=lambda i: kinds[i % len(kinds)][1]())
    kind = {shifts.trace_ids[i]: kinds[i % len(kinds)][0] for i in range(len(shifts.trace_ids))}
    stops = {kinds[i % len(kinds)][0]: run.stop_reason for i, run in enumerate(shifts.runs)}
    assert stops == {"slow": "answered", "turn_cap": "turn_cap", "error": "answered", "fast": "answered",
                     "consent_violation": "consent_violation"}
    span_count = {shifts.trace_ids[i]: len(t.nodes()) for i, t in enumerate(shifts.tracers)}

    quiesce(agent, [gateway])
    kept = {t for t, k in kind.items() if k != "fast"}
    stored = wait_for("the kept shifts in Jaeger",
                      lambda: (found := jaeger_traces(jaeger, shifts.service)) and set(found) >= kept
                      and all(len(found[t]) == span_count[t] for t in kept) and found, SETTLE, interval=1.0)
    assert sorted(kind[t] for t in stored) == sorted(k for k in kind.values() if k != "fast")
    for trace_id in kind:
        if kind[trace_id] == "fast":
            assert jaeger.api_status(f"/api/traces/{trace_id}") == 404


def test_the_agents_disk_queue_survives_its_own_sigkill_while_the_gateway_is_away(
    otelcol_bin: Path, tmp_path: Path, jaeger: Jaeger, procs: list
) -> None:
    """The load_balancing exporter's queue is the persistent one (file_storage, fsync'd):
    spans accepted while the only gateway is down stay on disk through a SIGKILL of the
    agent and are delivered, once each, when both are back."""
    gateway = Gateway.create(otelcol_bin, tmp_path, jaeger.otlp_grpc, "gateway-away", sample_percent=100,
                             decision_wait=DECISION_WAIT, after_root=AFTER_ROOT, slow_shift_ms=SLOW_SHIFT_MS)
    procs.append(gateway)
    agent = Collector.create(otelcol_bin, tmp_path, upstream="unused:1", queue_dir=tmp_path / "agent-queue",
                             gateways=[gateway.otlp_grpc])
    procs.append(agent)
    agent.start()  # the gateway is not started yet
    shifts = run_shifts(agent.otlp_grpc, "cafe-agent-crash", 10)
    assert shifts.account.dropped == 0, shifts.summary
    wait_for("every accepted span in the agent's queue",
             lambda: queued(agent) == agent.metric("otelcol_receiver_accepted_spans") == shifts.spans or None, SETTLE)
    agent.sigkill()
    gateway.start()
    agent.start()  # same queue directory and ports
    spans = jaeger.wait_for_spans(shifts.service, shifts.spans, timeout=SETTLE)
    assert sorted(int(s["spanID"], 16) for s in spans) == sorted(shifts.span_ids)
