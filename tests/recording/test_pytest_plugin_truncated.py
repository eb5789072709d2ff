"""The pytest plugin on a recording whose last line was cut short: its failure names the
marker option a test uses, not the command line's --allow-truncated, and the marker works."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

TEST_MODULE = """
import pytest

from cafe.clients.canned import CannedClient


@pytest.fixture
def cafe_model_client():
    return CannedClient([{{"content": "one"}}, {{"content": "two"}}])


{marker}
def test_order(cafe_recording):
    cafe_recording.chat([{{"role": "user", "content": "hello"}}])
"""


def test_a_truncated_recording_fails_naming_the_marker_then_replays_with_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_orders=TEST_MODULE.format(marker=""))
    pytester.runpytest().assert_outcomes(passed=1)
    recording = pytester.path / "recordings" / "test_orders" / "test_order.jsonl"
    with recording.open("a", encoding="utf-8") as out:
        out.write('{"kind": "call", "cut sho')  # a crash mid-write

    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    output = result.stdout.str()
    assert "mark the test @pytest.mark.cafe_recording(allow_truncated=True)" in output
    assert "1 complete call(s)" in output
    assert "--allow-truncated" not in output

    pytester.makepyfile(test_orders=TEST_MODULE.format(marker="@pytest.mark.cafe_recording(allow_truncated=True)"))
    pytester.runpytest().assert_outcomes(passed=1)
