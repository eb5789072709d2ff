"""`cafe view`: a recorded shift as one private, self-contained HTML page."""

from __future__ import annotations

import html
import io
import json
import re
import stat
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cafe import Tracer
from cafe.cli import main
from cafe.counter import make_responder, record_shift
from cafe.counter.clients.scripted import ScriptedClient
from cafe.counter.clients.story import StoryClient
from cafe.counter.demo import DEFAULT_DECISIONS, DEFAULT_SCRIPT, STORY_DECISIONS, STORY_SCRIPT
from cafe.recording import load_recording
from tests.view.browser import read_png, visit

HOSTILE = '<script>document.title="pwned"</script><img src="http://127.0.0.1:9/leak.png"> & "quotes"'


class _Rows(HTMLParser):
    """The waterfall's rows as the page (or the browser's DOM) holds them."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, str]] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        found = {key: value or "" for key, value in attrs}
        if tag == "div" and "row" in found.get("class", "").split():
            self.rows.append(dict(found))
        elif tag == "div" and found.get("class") == "bar" and self.rows:
            self.rows[-1]["bar"] = found.get("style", "")


def rows_of(page: str) -> _Rows:
    parser = _Rows()
    parser.feed(page)
    return parser


def _style(style: str, name: str) -> float:
    for part in style.split(";"):
        key, _, value = part.partition(":")
        if key.strip() == name:
            return float(value.strip().rstrip("%"))
    raise AssertionError(f"no {name} in {style!r}")


def _width(style: str) -> float:
    return _style(style, "width")


def _record(path: Path, client, script, decisions) -> Path:
    record_shift(client, list(script), path, responder=make_responder(decisions), tracer=Tracer(),
                 decisions=list(decisions))
    return path


def _view(recording: Path, page: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["view", str(recording), "-o", str(page)], environ={}, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def _plain(source: Path, target: Path) -> Path:
    """The same calls as another harness would write them: `{request, response}` a line."""
    calls = load_recording(source).calls
    target.write_text("".join(json.dumps({"request": c.request, "response": c.response}) + "\n" for c in calls))
    return target


def _expected_tools(recording: Path) -> int:
    replies = [c.response["choices"][0]["message"] for c in load_recording(recording).calls]
    return sum(len(reply.get("tool_calls") or []) for reply in replies)


def test_page_is_private_and_never_overwrites(tmp_path):
    recording = _record(tmp_path / "shift.jsonl", ScriptedClient(), DEFAULT_SCRIPT, DEFAULT_DECISIONS)
    page = tmp_path / "shift.html"
    code, out, _ = _view(recording, page)
    assert code == 0 and "mode 0600" in out
    assert stat.S_IMODE(page.stat().st_mode) == 0o600
    assert "PRIVATE" in page.read_text()
    before = page.read_bytes()
    code, _, err = _view(recording, page)
    assert code == 38 and err.count("\n") == 1 and "never overwritten" in err
    assert page.read_bytes() == before
    code, _, err = _view(recording, recording)  # the recording itself is never the output
    assert code == 38 and load_recording(recording).calls


def test_rows_follow_the_recorded_timeline(tmp_path):
    recording = _record(tmp_path / "story.jsonl", StoryClient(), STORY_SCRIPT, STORY_DECISIONS)
    page = tmp_path / "story.html"
    assert _view(recording, page)[0] == 0
    rows = rows_of(page.read_text()).rows
    calls = load_recording(recording).calls
    assert [r["data-kind"] for r in rows].count("chat") == len(calls)
    assert [r["data-kind"] for r in rows].count("tool") == _expected_tools(recording)
    chats = [r for r in rows if r["data-kind"] == "chat"]
    assert [int(r["data-start-ns"]) for r in chats] == [c.timing.start_unix_nano for c in calls]
    assert [int(r["data-duration-ns"]) for r in chats] == [c.timing.duration_ns for c in calls]


def test_hostile_text_is_shown_as_text(tmp_path):
    recording = _record(tmp_path / "h.jsonl", ScriptedClient(), [HOSTILE, "A latte, please."], DEFAULT_DECISIONS)
    page = tmp_path / "h.html"
    assert _view(recording, page)[0] == 0
    parsed = rows_of(page.read_text())
    assert "script" not in parsed.tags and "img" not in parsed.tags
    assert "&lt;script&gt;" in page.read_text()


@pytest.mark.parametrize("shape", ["built-in", "plain"])
def test_browser_shows_every_span_in_time_order_with_widths_from_durations(tmp_path, shape):
    recording = _record(tmp_path / "shift.jsonl", StoryClient(), STORY_SCRIPT, STORY_DECISIONS)
    if shape == "plain":
        recording = _plain(recording, tmp_path / "plain.jsonl")
    page = tmp_path / f"{shape}.html"
    assert _view(recording, page)[0] == 0

    seen = visit(page.as_uri(), tmp_path / "browser", shape)

    assert seen.screenshot.stat().st_size > 0
    rows = rows_of(seen.dom).rows
    calls = load_recording(recording).calls
    kinds = [r["data-kind"] for r in rows]
    assert kinds[0] == "shift"
    assert kinds.count("chat") == len(calls) and kinds.count("tool") == _expected_tools(recording)
    starts = [int(r["data-start-ns"]) for r in rows]
    assert starts == sorted(starts), "spans out of time order"
    scale_start, scale_ns = (int(v) for v in re.search(
        r'class="waterfall" data-scale-start-ns="(\d+)" data-scale-ns="(\d+)"', seen.dom).groups())
    chats = [r for r in rows if r["data-kind"] == "chat"]
    assert scale_start == int(chats[0]["data-start-ns"])  # the scale starts at the first call
    for row, call in zip(chats, calls, strict=True):
        duration = call.timing.duration_ns if call.timing else 1_000_000  # plain: the synthetic 1 ms
        assert _width(row["bar"]) == pytest.approx(duration / scale_ns * 100, abs=0.001)
        left = (int(row["data-start-ns"]) - scale_start) / scale_ns * 100
        assert _style(row["bar"], "left") == pytest.approx(left, abs=0.001)
    assert 'data-stop-reason="consent_violation"' in seen.dom or shape == "plain"
    assert "synthetic timeline" in seen.dom if shape == "plain" else "recorded timeline" in seen.dom
    assert "title>pwned" not in seen.dom
    assert seen.requested_urls() == []


def test_browser_runs_no_recorded_markup(tmp_path):
    recording = _record(tmp_path / "h.jsonl", ScriptedClient(), [HOSTILE, "A latte, please."], DEFAULT_DECISIONS)
    page = tmp_path / "h.html"
    assert _view(recording, page)[0] == 0
    seen = visit(page.as_uri(), tmp_path / "browser", "hostile")
    assert "<title>pwned" not in seen.dom and "<img" not in seen.dom
    assert seen.requested_urls() == []


def test_the_net_log_check_sees_a_page_that_does_fetch(tmp_path):
    page = tmp_path / "fetches.html"
    page.write_text('<html><body><img src="http://127.0.0.1:9/pixel.png"></body></html>')
    assert visit(page.as_uri(), tmp_path / "browser", "fetches").requested_urls() == ["http://127.0.0.1:9/pixel.png"]


SYSTEM_PROMPT = {"role": "system", "content": "You are the counter assistant at a small café. " * 8}


def _reply(message: dict, reason: str = "stop") -> dict:
    return {"model": "their-model", "choices": [{"index": 0, "message": message, "finish_reason": reason}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3}}


def _independent_pairs(lines: int):
    """Two calls a customer line, each pair a conversation of its own: a tool call, its answer."""
    for k in range(lines):
        user = {"role": "user", "content": f"customer line {k}: a latte please"}
        tool_call = {"id": f"c{k}", "type": "function",
                     "function": {"name": "price_check", "arguments": '{"item": "latte"}'}}
        asked = {"role": "assistant", "content": None, "tool_calls": [tool_call]}
        yield {"request": {"messages": [SYSTEM_PROMPT, user]}, "response": _reply(asked, "tool_calls")}
        answer = {"role": "tool", "tool_call_id": f"c{k}", "content": '{"price_eur": 3.2}'}
        yield {"request": {"messages": [SYSTEM_PROMPT, user, asked, answer]},
               "response": _reply({"role": "assistant", "content": f"answer {k}"})}


def _sliding_window(calls: int, size: int = 4):
    """One long conversation of which each call sends the system prompt and the last `size` messages."""
    conversation: list[dict] = []
    for k in range(calls):
        conversation.append({"role": "user", "content": f"customer line {k}: a latte please"})
        yield {"request": {"messages": [SYSTEM_PROMPT, *conversation[-size:]]},
               "response": _reply({"role": "assistant", "content": f"answer {k}"})}
        conversation.append({"role": "assistant", "content": f"answer {k}"})


@pytest.mark.parametrize("shape", ["independent", "sliding window"])
def test_every_calls_input_is_on_the_page(tmp_path, shape):
    lines = list(_independent_pairs(20) if shape == "independent" else _sliding_window(40))
    recording = tmp_path / "theirs.jsonl"
    recording.write_text("".join(json.dumps(line) + "\n" for line in lines))
    page = tmp_path / "page.html"
    assert _view(recording, page)[0] == 0
    text = page.read_text()
    customer_lines = {m["content"] for line in lines for m in line["request"]["messages"] if m["role"] == "user"}
    assert all(html.escape(content) in text for content in customer_lines)
    inputs = dict(re.findall(r'<details id="input-(\d+)">(.*?)</details>', text, re.S))
    assert len(inputs) == len(lines)
    for index, line in enumerate(lines, start=1):
        shown = inputs[str(index)]
        continues = re.search(r"continues call (\d+)", shown)
        # A call that continues the previous one shows what it adds; any other, its whole input.
        earlier = lines[int(continues.group(1)) - 1] if continues else None
        start = len(earlier["request"]["messages"]) + 1 if earlier else 0
        for message in line["request"]["messages"][start:]:
            if message["role"] == "user":
                assert html.escape(message["content"]) in shown, (index, message["content"])
        if continues is None and index > 1:
            assert '<a href="#input-1">the input of call 1</a>' in shown  # the long system prompt, linked
    if shape == "independent":  # the second call of each pair continues the first: nothing shown twice
        assert all(text.count(html.escape(content) + "\n") == 1 for content in customer_lines)
        assert text.count("continues call") == len(lines) // 2
    else:  # only call 2 extends call 1: from call 3 on, the window drops its oldest message
        assert re.findall(r"input of call (\d+): continues", text) == ["2"]


def test_content_in_parts_and_a_refusal_are_shown_as_their_text(tmp_path):
    parts = [{"type": "text", "text": "a latte, please"}, {"type": "image_url", "image_url": {"url": "x.png"}}]
    price = [{"type": "text", "text": "3.20"}]
    lines = [
        {"request": {"messages": [{"role": "user", "content": parts}]},
         "response": _reply({"role": "assistant", "content": None, "refusal": "I cannot take that order"})},
        {"request": {"messages": [{"role": "user", "content": parts},
                                  {"role": "assistant", "content": None, "refusal": "I cannot take that order"},
                                  {"role": "tool", "tool_call_id": "c1", "content": price}]},
         "response": _reply({"role": "assistant", "content": "answer"})},
    ]
    recording = tmp_path / "theirs.jsonl"
    recording.write_text("".join(json.dumps(line) + "\n" for line in lines))
    page = tmp_path / "page.html"
    assert _view(recording, page)[0] == 0
    inputs = dict(re.findall(r'<details id="input-(\d+)">(.*?)</details>', page.read_text(), re.S))
    assert "user: a latte, please\n" in inputs["1"]  # the text, not a list's repr
    assert html.escape('{"type":"uri","modality":"image","uri":"x.png"}') in inputs["1"]  # the conventions' part
    assert "assistant: I cannot take that order" in inputs["1"]  # the reply that refused
    assert "tool[c1]: 3.20" in inputs["2"]


CHAT_BLUE, TOOL_GREEN, SHIFT_GREY = (37, 99, 235), (16, 185, 129), (107, 114, 128)
MIN_BAR_PX = 6


def _bars(shot, colour):
    """The bars of `colour` in a screenshot (left, top, right, bottom), a bar at least 8 px tall."""
    return sorted((b for b in shot.blocks(colour) if b[3] - b[1] >= 8), key=lambda b: b[1])


def test_browser_draws_the_waterfall_from_the_first_call_on_an_axis_with_visible_bars(tmp_path):
    recording = _record(tmp_path / "story.jsonl", StoryClient(), STORY_SCRIPT, STORY_DECISIONS)
    page = tmp_path / "story.html"
    assert _view(recording, page)[0] == 0
    seen = visit(page.as_uri(), tmp_path / "browser", "waterfall", window=(1280, 1200))
    calls = load_recording(recording).calls
    shift_start = load_recording(recording).header.clock_origin_unix_nano
    setup = re.search(r'class="line setup" data-setup-ns="(\d+)"', seen.dom)
    assert setup and int(setup.group(1)) == calls[0].timing.start_unix_nano - shift_start > 0
    ticks = re.findall(r'<div class="tick(?: end)?" style="left:([\d.]+)%"><span>([^<]*)</span>', seen.dom)
    assert len(ticks) >= 3 and ticks[0] == ("0.0000", "0") and all(label.startswith("+") for _, label in ticks[1:])
    assert [float(left) for left, _ in ticks] == sorted(float(left) for left, _ in ticks)

    shot = read_png(seen.screenshot)
    shift_bar = max(_bars(shot, SHIFT_GREY), key=lambda b: b[2] - b[0])  # the widest: text is grey too
    chats, tools = _bars(shot, CHAT_BLUE), _bars(shot, TOOL_GREEN)
    assert len(chats) == len(calls) and len(tools) == _expected_tools(recording) - 1  # one tool failed: red
    lane = shift_bar[2] - shift_bar[0]
    assert abs(chats[0][0] - shift_bar[0]) <= 2  # the first call is drawn where the scale starts
    assert chats[-1][2] > shift_bar[0] + lane / 2  # and the calls spread over the lane
    assert all(right - left + 1 >= MIN_BAR_PX for left, _, right, _ in chats + tools)
    assert 'title="check_allergens ok: its time is not recorded; placed after call 1"' in seen.dom
    assert seen.requested_urls() == []


def test_a_call_no_reading_knows_is_drawn_as_its_method_path_and_status_never_as_a_chat(tmp_path):
    import openai

    import cafe.wire as wire
    from tests.wire.openai_server import OpenAIServer

    recording, page = tmp_path / "speech.jsonl", tmp_path / "speech.html"
    with OpenAIServer.running() as server, wire.record(recording):
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test-view-0123456789", max_retries=0)
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Read the menu."}])
        client.audio.speech.create(model="tts-1", voice="alloy", input="Today's special is a flat white.")
    assert _view(recording, page)[0] == 0
    shown = page.read_text()
    rows = rows_of(shown).rows
    assert [(row["data-kind"], row["data-name"]) for row in rows[1:]] == [
        ("chat", "chat gpt-4o"), ("call", "POST /v1/audio/speech")]
    assert "call 2 · " in shown and " · status 200 · an API cafe does not read" in shown
    assert 'id="input-2"' not in shown  # nothing read from it is shown as an empty conversation
