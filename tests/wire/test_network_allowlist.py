"""While a marked test replays, the network is refused, loopback included; a test that
starts a local server of its own names it: `@pytest.mark.cafe_recording(allow_hosts=[...])`."""

from __future__ import annotations

import pytest

from tests.local_http import QuietHandler, serving

pytest_plugins = ["pytester"]

USER_MODULE = '''
import os
import urllib.request

import pytest

URL = os.environ["LOCAL_URL"]


def fetch(url):
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read()


@pytest.mark.cafe_recording
def test_not_allowed():
    assert fetch(URL) == b"ok"


@pytest.mark.cafe_recording(allow_hosts=["127.0.0.1"])
def test_address_allowed():
    assert fetch(URL) == b"ok"


@pytest.mark.cafe_recording(allow_hosts=["localhost"])
def test_name_allowed():
    assert fetch(URL.replace("127.0.0.1", "localhost")) == b"ok"


@pytest.mark.cafe_recording(allow_hosts=["localhost"])
def test_other_host_still_refused():
    assert fetch(URL) == b"ok"


@pytest.mark.cafe_recording(allow_hosts="127.0.0.1")
def test_a_string():
    pass
'''


class _Ok(QuietHandler):
    def do_GET(self) -> None:
        self.answer(200, b"ok", "text/plain")


def test_replay_refuses_loopback_unless_the_test_allows_its_host(pytester: pytest.Pytester,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_local=USER_MODULE)
    with serving(_Ok) as port:
        monkeypatch.setenv("LOCAL_URL", f"http://127.0.0.1:{port}/")
        first = pytester.runpytest("-p", "no:cacheprovider")  # records: nothing is refused yet
        first.assert_outcomes(passed=4, errors=1)
        replayed = pytester.runpytest("-p", "no:cacheprovider", "-rfE")
    replayed.assert_outcomes(passed=2, failed=2, errors=1)
    output = replayed.stdout.str()
    assert "FAILED test_local.py::test_not_allowed" in output
    assert "FAILED test_local.py::test_other_host_still_refused" in output
    # Counted in the failure reports only: the short summary repeats them, truncated or not
    # depending on the terminal width and on whether a CI variable is set.
    reports = [line for line in output.splitlines() if line.startswith("cafe: ")]
    assert sum("network access is refused while replaying this recording" in line for line in reports) == 2
    assert 'allow_hosts: expected a list of host names or addresses, e.g. allow_hosts=["127.0.0.1"]' in output
