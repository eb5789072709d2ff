"""Headless Chromium (Debian's `chromium`) for the tests that look at a page.

`CAFE_CHROMIUM` names the binary (default: `chromium` on PATH). A missing browser skips
the test with the command that installs it, or fails it when CAFE_E2E_STRICT=1 (CI).
Every run gets a fresh profile under the test's temp dir and the flags that keep Chromium
off the network on its own account, and writes a net log: `requested_urls` reads it back.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

INSTALL_HINT = "apt-get update && apt-get install -y chromium"
QUIET_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--window-size=1280,900",
    # No name resolves but loopback: whatever Chromium or a page asks for stays on this machine.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
)
BROWSER_INITIATED = "not an origin"  # the net log's initiator of the browser's own requests


def chromium_binary() -> str:
    name = os.environ.get("CAFE_CHROMIUM", "chromium")
    found = shutil.which(name)
    if found:
        return found
    message = f"headless Chromium not found ({name!r}); install it: {INSTALL_HINT}"
    if os.environ.get("CAFE_E2E_STRICT") == "1":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@dataclass
class Visit:
    dom: str
    screenshot: Path
    net_log: Path

    def requested_urls(self) -> list[str]:
        """Every URL the page asked for (not the browser on its own account), from the net log."""
        text = self.net_log.read_text(errors="replace")
        try:
            log = json.loads(text)
        except ValueError:  # a log cut short at exit still lists its events line by line
            log = json.loads(text.rstrip().rstrip(",") + "]}")
        start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
        urls = []
        for event in log.get("events", []):
            params = event.get("params") or {}
            url = params.get("url")
            if event.get("type") == start_job and url and params.get("initiator") != BROWSER_INITIATED:
                urls.append(str(url))
        return urls


def visit(url: str, workdir: Path, name: str, *, budget_ms: int = 5000, timeout: float = 90.0) -> Visit:
    """Open `url`; return its rendered DOM, a screenshot and the net log."""
    binary = chromium_binary()
    workdir.mkdir(parents=True, exist_ok=True)
    shot, net = workdir / f"{name}.png", workdir / f"{name}.netlog.json"

    def run(*extra: str) -> str:
        profile = workdir / f"{name}-profile-{len(extra)}"
        done = subprocess.run(
            [binary, *QUIET_FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
             f"--log-net-log={net}", *extra, url],
            capture_output=True, timeout=timeout, check=False,
        )
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
        return done.stdout.decode("utf-8", errors="replace")

    run(f"--screenshot={shot}")
    dom = run("--dump-dom")
    return Visit(dom, shot, net)
