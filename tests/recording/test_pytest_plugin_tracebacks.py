"""The pytest plugin never lets a traceback carry the recorded conversation: whatever goes wrong
in cafe's code during a recording test (a page that cannot be drawn, an error raised through the
harness), the test fails with one line, even under
`--showlocals`, and that line holds no customer text and no secret."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

CUSTOMER = "Priya-at-table-nine wants a flat white"
SECRET = "sk-proj-" + "Tb7Wq2Lm9Xc4Vn8Rz1Ks5Dp3"

KEYED_MODULE = '''
from cafe.clients.canned import CannedClient
import pytest

VALUE = {value!r}


@pytest.fixture
def cafe_model_client():
    return CannedClient([{{"content": "Coming up."}}])


def test_order(cafe_recording):
    note = {{"table[9]": VALUE, "said": {customer!r}}}
    messages = [{{"role": "user", "content": {customer!r}, "metadata": note}}]
    cafe_recording.chat(messages)
'''

THROUGH_MODULE = '''
import pytest

from cafe.clients.canned import CannedClient

SAID = {said!r}


class ClosedTill:
    model, provider = "m", "test"

    def chat(self, messages, tools=None, temperature=0.0, tool_choice=None):
        raise RuntimeError("the till is closed")


@pytest.fixture
def cafe_model_client():
    return {client}


def test_order(cafe_recording):
    messages = [{{"role": "user", "content": SAID}}]
    cafe_recording.chat(messages{extra})
'''


def _assert_one_clean_line(output: str) -> None:
    assert CUSTOMER not in output and "Priya" not in output
    assert SECRET not in output and SECRET[8:] not in output
    assert "Traceback" not in output and "def " not in output  # no frame is rendered


BROKEN_PAGE = """
import pytest

import cafe.view


@pytest.fixture(autouse=True)
def broken_page(monkeypatch):
    # Stands for a page the recorded conversation makes impossible to draw: a recorded key that
    # trips the page's highlight, say. The error carries what the recording holds.
    def broken(recording, failed):
        request = recording.calls[0].request
        raise ValueError(f"cannot draw {request}")

    monkeypatch.setattr(cafe.view, "mismatch_page", broken)
"""


@pytest.mark.parametrize("broken", [False, True], ids=["keyed", "broken page"])
@pytest.mark.parametrize("flag", ["-l", "--showlocals"])
def test_a_failed_replay_with_a_report_fails_the_test_in_one_line(pytester: pytest.Pytester, flag: str,
                                                                  broken: bool) -> None:
    # A recorded key holding `[`, whose path the page highlights.
    pytester.makepyfile(test_orders=KEYED_MODULE.format(value="first", customer=CUSTOMER))
    pytester.runpytest().assert_outcomes(passed=1)
    pytester.makepyfile(test_orders=KEYED_MODULE.format(value="second", customer=CUSTOMER))
    if broken:
        pytester.makeconftest(BROKEN_PAGE)
    reports = pytester.path / "reports"
    reports.mkdir()
    result = pytester.runpytest(flag, f"--cafe-report-dir={reports}")
    result.assert_outcomes(failed=1)
    output = result.stdout.str() + result.stderr.str()
    _assert_one_clean_line(output)
    assert "cafe: " in output and "call 1" in output
    assert ("no report: the page could not be drawn (ValueError)" in output) is broken


def test_an_error_raised_through_cafes_code_while_recording_fails_the_test_in_one_line(
        pytester: pytest.Pytester) -> None:
    # The model client raises inside the recording client, whose frames hold the conversation.
    pytester.makepyfile(test_orders=THROUGH_MODULE.format(said=f"{CUSTOMER} {SECRET}", client="ClosedTill()",
                                                          extra=""))
    result = pytester.runpytest("--showlocals")
    result.assert_outcomes(failed=1)
    output = result.stdout.str() + result.stderr.str()
    _assert_one_clean_line(output)
    assert "RuntimeError" in output


def test_a_named_error_raised_while_replaying_fails_the_test_in_one_line(pytester: pytest.Pytester) -> None:
    # A request holding a value JSON has no form for: the replay's NotJSON, from deep in its frames.
    canned = 'CannedClient([{"content": "Coming up."}])'
    said = f"{CUSTOMER} {SECRET}"
    pytester.makepyfile(test_orders=THROUGH_MODULE.format(said=said, client=canned, extra=""))
    pytester.runpytest().assert_outcomes(passed=1)
    pytester.makepyfile(test_orders=THROUGH_MODULE.format(said=said, client=canned,
                                                          extra=', tools=[{"type": "function", "x": {1, 2}}]'))
    result = pytester.runpytest("-l", "--cafe-record-mode=none")
    result.assert_outcomes(failed=1)
    output = result.stdout.str() + result.stderr.str()
    _assert_one_clean_line(output)
    assert "cafe: " in output
