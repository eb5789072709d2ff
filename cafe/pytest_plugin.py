"""cafe's pytest plugin: record a test's model calls once, replay them in CI.

Installed with cafe (entry point `pytest11: cafe_recording`). A test marked
`@pytest.mark.cafe_recording` that builds its own model clients has every call on the wire
recorded on its first run and replayed afterwards:

    @pytest.mark.cafe_recording
    def test_agent_orders_a_latte():
        reply = openai.OpenAI().chat.completions.create(...)

- The recording lives next to the test file, in `recordings/<module>/<test>.jsonl`, or
  where `@pytest.mark.cafe_recording(path=...)` says (relative to the test file).
  A test id that is not a safe file name (a parametrized `test_x[A latte, please.]`) is
  named by a readable slug of it and a short hash of the whole id; two tests of one
  session on one recording fail.
- With no recording, the test records one; it is written beside its final name and moved
  into place only when the test passes, so a failed test never leaves a half recording to
  be replayed.
- With a recording, the test replays it: responses are served in order, each request
  must match (`ReplayMismatch` otherwise; declare volatile fields with
  `@pytest.mark.cafe_recording(ignore=["messages.*.sent_at"])`), the network is refused
  for the whole test (connections, datagrams, name lookups, and sends on connections opened
  before it; loopback too unless the test names the hosts it may reach:
  `@pytest.mark.cafe_recording(allow_hosts=["127.0.0.1"])`), and when the test body ends
  every recorded call must have been made: a test that made fewer calls fails naming the
  first unused one. A refusal is the line the test fails with, whatever a library or the
  test's code raised around it.
- A marker option of the wrong type, or a recording whose directory cannot be made, fails
  the test in one line naming it.
- `--cafe-record-mode=once` (default; or the `cafe_record_mode` ini setting) records only
  when there is no recording; `all` re-records every time; `none` never records, so a
  missing recording fails the test.
- `--cafe-report-dir=DIR` (relative to where pytest starts) gets each failing replay's page.
  A setting that cannot be used (an unknown record mode, an empty report directory) is one
  usage line before any test runs.

A plugin built on this one (the café example's `cafe_recording` fixture,
`cafe.counter.pytest_plugin`) is registered from the `cafe.pytest_plugins` entry-point group
(one whose package is not there is left out), and declares its fixtures with
`cafe._pytest.options.extend`: a test that asks for one is recorded and replayed by it, not
by the marker.

pytest imports this module in every session on a machine where cafe is installed, used or
not, so it imports nothing of the harness at module level: the recording machinery is
loaded only when a marked test runs.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

import pytest

from cafe._pytest.failures import (
    CALL_PASSED,
    REPLAY,
    first_in_chain,
    kept_refusal,
    one_line,
    one_line_failure,
    one_line_through_cafe,
    report,
    through_cafe,
)
from cafe._pytest.options import RECORD_MODES as RECORD_MODES
from cafe._pytest.options import checked_settings, claim, record_mode, recording_fixtures, recording_path
from cafe._pytest.options import recording_name as recording_name

MARKER_HELP = ("cafe_recording(path=None, *, ignore=(), allow_truncated=False, allow_hosts=()): where this "
               "test's cafe recording lives (relative to the test file), which request fields replay ignores "
               "and which hosts a replaying test may still reach")


PLUGIN_GROUP = "cafe.pytest_plugins"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Register the plugins built on this one, before options are read (their own options are
    added as any plugin's are)."""
    from importlib.metadata import entry_points

    for entry in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        name = f"cafe-{entry.name}"
        if pluginmanager.has_plugin(name):
            continue
        try:
            plugin = entry.load()
        except ModuleNotFoundError as error:
            module = entry.value.split(":", 1)[0]
            if error.name is not None and (module == error.name or module.startswith(error.name + ".")):
                continue  # registered, but its package is not there (an example deleted)
            raise
        pluginmanager.register(plugin, name)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cafe", "cafe recordings")
    group.addoption(
        "--cafe-record-mode",
        choices=RECORD_MODES,
        default=None,
        help="once: record only when a test has no recording (default); all: re-record; "
             "none: never record (a missing recording fails the test)",
    )
    parser.addini("cafe_record_mode", "default for --cafe-record-mode", default="once")
    group.addoption(
        "--cafe-report-dir",
        default=None,
        metavar="DIR",
        help="on a failed replay, write a page of the mismatch to DIR/<folder>.<recording>.html (private: "
             "0600; DIR, relative to where pytest starts, is created 0700)",
    )


def pytest_configure(config: pytest.Config) -> None:
    checked_settings(config)
    config.addinivalue_line("markers", MARKER_HELP)


@pytest.fixture(autouse=True)
def _cafe_wire_recording(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test marked `cafe_recording` that builds its own model clients (it asks for no
    fixture that records it): its calls on the wire are recorded, then replayed (cafe.wire)."""
    marker = request.node.get_closest_marker("cafe_recording")
    if marker is None or not recording_fixtures(request.config).isdisjoint(request.fixturenames):
        yield
        return
    from cafe._pytest.marked import marked_test

    path = recording_path(request)
    claim(request, path)
    yield from marked_test(request, path, record_mode(request.config), dict(marker.kwargs))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    replay = item.stash.get(REPLAY, None)
    if replay is None:
        # Not a replaying test (most, in a session that does not use cafe): nothing to check
        # but whether the body passed, which a recording needs to be kept.
        if recording_fixtures(item.config).isdisjoint(getattr(item, "fixturenames", ())):
            result = yield
        else:
            result = yield from one_line_through_cafe("recording")
        item.stash[CALL_PASSED] = True
        return result
    from cafe.recording.errors import ReplayError

    failure: ReplayError | None = None
    through = None
    try:
        result = yield
    except (KeyboardInterrupt, pytest.exit.Exception):
        raise
    except BaseException as error:
        # The replay's refusal is what the test reports, whatever came of it: raised as it is,
        # wrapped in a library's error (an SDK's APIConnectionError, a retry wrapper's), or
        # caught by the test's code, which then failed, skipped or exited some other way.
        failure = first_in_chain(error, ReplayError) or kept_refusal(item, replay)
        if failure is None:
            if not isinstance(error, Exception) or not through_cafe(error):
                raise
            through = one_line(error, "replaying")
    if through is not None:
        # One line, not a traceback: the frames' arguments would print the conversation.
        raise one_line_failure(through) from None
    if failure is None:
        # A test that caught a refused wire request and passed made fewer calls than it meant.
        failure = getattr(replay, "failure", None)
    if failure is None and replay.unused:
        try:
            replay.assert_exhausted()
        except ReplayError as error:
            failure = error
    if failure is not None:
        raise one_line_failure(f"cafe: {failure}{report(item, replay, failure)}") from None
    item.stash[CALL_PASSED] = True
    return result
