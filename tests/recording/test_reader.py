"""Reading a recording (cafe/recording/reader.py): what makes a file a recording, the model of
each call, the ranges of times and settings, and how a wrong line is named."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from cafe import Tracer
from cafe.cli import main
from cafe.cli.plugins import installed_plugins
from cafe.counter import ScriptedClient, make_responder, record_shift
from cafe.recording import MalformedLine, RecordMode, load_recording
from cafe.recording.output import UnsafeOutput, write_output
from cafe.recording.writer import check_target, holds_recording
from tests.recording.helpers import CUSTOMER_TEXT, call, dump, end, header, request, response, run_cli

# Whether a file holds a recording is judged from its header read up to the line limit the
# reader itself reads, so a recording with a long header (a long script: every customer line
# is in it) is one: no output replaces it, and `--record-mode all` re-records it.

LINES = 300_000  # "a", four bytes each in the header: a first line of 1.2 MB


@pytest.fixture(scope="module")
def long_header(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("long") / "shift.jsonl"
    record_shift(ScriptedClient(), ["a"] * LINES, path, responder=make_responder([("approve", None)]),
                 tracer=Tracer(), max_turns=2)
    assert len(path.read_bytes().split(b"\n", 1)[0]) > 1024 * 1024
    return path


def test_a_recording_with_a_long_header_is_one(long_header: Path) -> None:
    assert holds_recording(long_header)
    check_target(long_header, RecordMode.ALL)  # re-recording it is allowed


def test_no_output_replaces_a_recording_with_a_long_header(long_header: Path, tmp_path: Path) -> None:
    before = long_header.read_bytes()
    with pytest.raises(UnsafeOutput, match="holds a cafe recording"):
        write_output(long_header, b"spans")
    seed = Path(__file__).resolve().parents[1] / "recordings" / "seed-shift.jsonl"
    err = io.StringIO()
    code = main(["export", str(seed), "--out", str(long_header)], environ={}, out=io.StringIO(), err=err)
    assert code == 38 and "holds a cafe recording" in err.getvalue()
    assert long_header.read_bytes() == before


# A call line whose number is wrong is named with the number found, and a number of
# thousands of digits (which the strict decoder reads) is described by its size.

@pytest.mark.parametrize("number", [10**4000, -(10**30), 2**64 + 1])
def test_a_huge_call_number_is_described_by_its_size(tmp_path: Path, number: int) -> None:
    path = tmp_path / "shift.jsonl"
    path.write_bytes(dump(header(), call(1, call=number), end(1)))
    with pytest.raises(MalformedLine) as caught:
        load_recording(path)
    message = str(caught.value)
    assert "call:" in message and "digits" in message and len(message) < 300


def test_a_small_wrong_call_number_is_still_shown(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    path.write_bytes(dump(header(), call(1, call=3), end(1)))
    with pytest.raises(MalformedLine, match=r"expected call 1 .*found call 3"):
        load_recording(path)


# Each recorded call knows its model (the line's, else the request's, the response's, the
# header's), and the spans of an export take it; out-of-range times and header settings are
# malformed lines, named by line and field.

PLAIN_RESPONSE = {k: v for k, v in response().items() if k != "model"}


def _plain(tmp_path: Path, **line) -> Path:
    path = tmp_path / "plain.jsonl"
    path.write_bytes(dump({"request": request(), "response": PLAIN_RESPONSE, **line}))
    return path


def test_a_plain_lines_model_is_the_calls_model(tmp_path: Path):
    recording = load_recording(_plain(tmp_path, model="other-harness-model"))
    assert recording.calls[0].model == "other-harness-model" == recording.model


def test_the_request_model_counts_when_the_line_has_none(tmp_path: Path):
    path = tmp_path / "plain.jsonl"
    path.write_bytes(dump({"request": {**request(), "model": "asked-for"}, "response": PLAIN_RESPONSE}))
    assert load_recording(path).calls[0].model == "asked-for"


def test_model_precedence_line_request_response_header(tmp_path: Path):
    path = tmp_path / "v1.jsonl"
    path.write_bytes(dump(
        header(model="from-header"),
        call(1, model="from-line", request={**request(), "model": "from-request"}),
        call(2, request={**request(), "model": "from-request"}),
        call(3, response={**response(), "model": "from-response"}),
        call(4, response=PLAIN_RESPONSE),
        end(4),
    ))
    assert [c.model for c in load_recording(path).calls] == ["from-line", "from-request", "from-response",
                                                             "from-header"]


def test_a_plain_recording_exports_with_its_model(tmp_path: Path):
    path = _plain(tmp_path, model="other-harness-model")
    out, err = io.StringIO(), io.StringIO()
    code = main(["export", str(path), "--out", str(tmp_path / "p.otlp")], environ={}, out=out, err=err,
                load_plugins=installed_plugins)
    assert code == 0, err.getvalue()
    assert b"chat other-harness-model" in (tmp_path / "p.otlp").read_bytes()


BAD_TIMINGS = [
    ({"start_unix_nano": -1, "duration_ns": 1}, "timing.start_unix_nano"),
    ({"start_unix_nano": 2**64, "duration_ns": 1}, "timing.start_unix_nano"),
    ({"start_unix_nano": 1, "duration_ns": -5}, "timing.duration_ns"),
    ({"start_unix_nano": 1, "duration_ns": 10**30}, "timing.duration_ns"),
    ({"start_unix_nano": True, "duration_ns": 1}, "timing.start_unix_nano"),
    ({"start_unix_nano": 1.5, "duration_ns": 1}, "timing.start_unix_nano"),
    ({"start_unix_nano": 2**63 - 2, "duration_ns": 10}, "timing.duration_ns"),
]


@pytest.mark.parametrize(("timing", "field"), BAD_TIMINGS)
def test_out_of_range_timings_are_malformed(tmp_path: Path, timing: dict, field: str):
    path = tmp_path / "t.jsonl"
    path.write_bytes(dump(header(), call(1, timing=timing), end(1)))
    with pytest.raises(MalformedLine) as caught:
        load_recording(path)
    assert (caught.value.line, caught.value.field) == (2, field)
    code, _, err = run_cli("replay", str(path))
    assert code == 33 and err.count("\n") == 1 and f":2: {field}:" in err


BAD_HEADERS = [
    ({"decisions": [["maybe"]]}, "decisions[0][0]"),
    ({"decisions": [[True]]}, "decisions[0][0]"),
    ({"decisions": [["edit", [1, 2]]]}, "decisions[0][1]"),
    ({"decisions": [["approve", {"x": 1}]]}, "decisions[0][1]"),
    ({"clock_origin_unix_nano": -3}, "clock_origin_unix_nano"),
    ({"clock_origin_unix_nano": 10**40}, "clock_origin_unix_nano"),
    ({"seed": 2**80}, "seed"),
    ({"seed": True}, "seed"),
    ({"max_turns": 0}, "max_turns"),
    ({"max_turns": 1.0}, "max_turns"),
    ({"max_repairs": -1}, "max_repairs"),
    ({"temperature": "hot"}, "temperature"),
    ({"temperature": 1e300}, "temperature"),
]


@pytest.mark.parametrize(("changes", "field"), BAD_HEADERS)
def test_out_of_range_header_fields_are_malformed(tmp_path: Path, changes: dict, field: str):
    path = tmp_path / "h.jsonl"
    path.write_bytes(dump(header(**changes), call(1), end(1)))
    code, _, err = run_cli("replay", str(path))
    assert code == 33, err
    assert err.count("\n") == 1 and f":1: {field}:" in err


def test_each_plain_call_exports_with_its_own_model_the_line_before_the_response(tmp_path: Path):
    """Two calls, each line naming its model, each response another: the spans take the lines'."""
    path = tmp_path / "two.jsonl"
    responses = [{**PLAIN_RESPONSE, "model": f"served-{n}"} for n in (1, 2)]
    path.write_bytes(dump(*({"model": f"asked-{n}", "request": request(), "response": responses[n - 1]}
                            for n in (1, 2))))
    out, err = io.StringIO(), io.StringIO()
    code = main(["export", str(path), "--out", str(tmp_path / "two.otlp")], environ={}, out=out, err=err,
                load_plugins=installed_plugins)
    assert code == 0, err.getvalue()
    written = (tmp_path / "two.otlp").read_bytes()
    assert b"chat asked-1" in written and b"chat asked-2" in written
    assert b"chat served-" not in written


# Version 3 is what a wire recorder leaves in PATH.partial when a call ended before an earlier
# one: its call lines are in the order the calls ended, each numbered by its start. It is
# read in start order; a call that never ended has no line, and a number is held once.

def _exchange() -> dict[str, object]:
    return {"method": "POST", "target": "/v1/chat/completions", "outcome": "completed", "status": 200,
            "request_headers": {}, "response_headers": {}, "body": None, "stream": None, "failure": None,
            "request_body": None}


def _unordered(tmp_path: Path, *numbers: object) -> Path:
    path = tmp_path / "agent.jsonl.partial"
    lines = [call(n if isinstance(n, int) else 1, call=n, request={"model": "m", "n": n}, response=None,
                  exchange=_exchange()) for n in numbers]
    path.write_bytes(dump(header(version=3, script=None, decisions=None), *lines))
    return path


def test_an_unordered_recording_is_read_in_start_order_with_the_calls_that_never_ended_missing(
        tmp_path: Path) -> None:
    loaded = load_recording(_unordered(tmp_path, 4, 2, 5))
    assert loaded.header.version == 3
    assert [(c.index, c.line, c.request["n"]) for c in loaded.calls] == [(2, 3, 2), (4, 2, 4), (5, 4, 5)]


@pytest.mark.parametrize(("numbers", "found"), [((2, 2), "call 2 again"), ((1, 0), "call 0"),
                                                 ((1, "2"), "a string of 1 characters")])
def test_an_unordered_recording_holds_each_call_number_once(tmp_path: Path, numbers: tuple[object, ...],
                                                             found: str) -> None:
    with pytest.raises(MalformedLine) as caught:
        load_recording(_unordered(tmp_path, *numbers))
    assert caught.value.line == 3 and caught.value.field == "call" and caught.value.found == found


def _extending(tmp_path: Path, version: int = 4, **extends: object) -> Path:
    """A recording whose second call extends the first's messages by one, its `extends`
    changed by `extends`."""
    first = request()
    whole = {"call": 1, "array": "messages", "count": 2}
    reference = {**whole, "sha256": _digest_of(first, 2)}
    reference.update(extends)
    second = call(2, request={"messages": [{"role": "user", "content": "And a croissant."}]}, extends=reference)
    path = tmp_path / "extending.jsonl"
    path.write_bytes(dump(header(version=version), call(1, request=first), second, end(2)))
    return path


def _digest_of(request_: dict[str, object], count: int) -> str:
    from cafe.recording.format import EMPTY_CHAIN, chained, reference_digest

    chain = EMPTY_CHAIN
    items = request_["messages"]
    assert isinstance(items, list)
    for item in items[:count]:
        chain = chained(chain, item)
    return reference_digest({key: value for key, value in request_.items() if key != "messages"}, chain)


def test_a_call_that_extends_an_earlier_one_reads_as_the_whole_request(tmp_path: Path) -> None:
    second = load_recording(_extending(tmp_path)).calls[1].request
    added = {"role": "user", "content": "And a croissant."}
    assert second == {**request(), "messages": [*request()["messages"], added]}


def test_a_call_remade_with_replace_keeps_its_whole_request_and_writes_it_whole(tmp_path: Path) -> None:
    import dataclasses

    loaded = load_recording(_extending(tmp_path)).calls[1]
    remade = dataclasses.replace(loaded, timing=None)
    assert loaded.reference is not None and remade.reference is None
    assert remade.request == loaded.request  # not the earlier call's messages twice
    line = remade.to_json()
    assert "extends" not in line and line["request"] == loaded.request


@pytest.mark.parametrize(("version", "extends", "field"), [
    (1, {}, "extends"),  # version 1 holds every request whole
    (4, {"call": 2}, "extends.call"),  # itself, not an earlier call
    (4, {"call": 7}, "extends.call"),
    (4, {"call": "1"}, "extends.call"),
    (4, {"count": 3}, "extends.count"),  # more messages than call 1 sent
    (4, {"count": -1}, "extends.count"),
    (4, {"array": "tools"}, "extends.array"),  # call 1's tools is null, not an array
    (4, {"sha256": "f" * 64}, "extends.sha256"),  # call 1's line was changed, or it is another file's
    (4, {"sha256": "not hex"}, "extends.sha256"),
])
def test_a_reference_that_does_not_hold_is_malformed_naming_its_line_and_field(
        tmp_path: Path, version: int, extends: dict[str, object], field: str) -> None:
    path = _extending(tmp_path, version, **extends)
    before = path.read_bytes()
    with pytest.raises(MalformedLine) as caught:
        load_recording(path)
    assert caught.value.line == 3 and caught.value.field == field
    assert CUSTOMER_TEXT not in str(caught.value) and "\n" not in str(caught.value)
    code, _, err = run_cli("replay", str(path))
    assert code == MalformedLine.exit_code and err.count("\n") == 1 and CUSTOMER_TEXT not in err
    assert path.read_bytes() == before


def test_an_earlier_line_edited_after_recording_is_refused_by_the_line_that_extends_it(tmp_path: Path) -> None:
    path = _extending(tmp_path)
    path.write_bytes(path.read_bytes().replace(b"You are a barista.", b"You are a pirate."))
    with pytest.raises(MalformedLine) as caught:
        load_recording(path)
    assert caught.value.line == 3 and caught.value.field == "extends.sha256"
