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
import struct
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest

INSTALL_HINT = "apt-get update && apt-get install -y chromium"
QUIET_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions",
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


def visit(url: str, workdir: Path, name: str, *, budget_ms: int = 5000, timeout: float = 90.0,
          window: tuple[int, int] = (1280, 900)) -> Visit:
    """Open `url`; return its rendered DOM, a screenshot and the net log."""
    binary = chromium_binary()
    workdir.mkdir(parents=True, exist_ok=True)
    shot, net = workdir / f"{name}.png", workdir / f"{name}.netlog.json"

    def run(*extra: str) -> str:
        profile = workdir / f"{name}-profile-{len(extra)}"
        done = subprocess.run(
            [binary, *QUIET_FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
             f"--log-net-log={net}", f"--window-size={window[0]},{window[1]}", *extra, url],
            capture_output=True, timeout=timeout, check=False,
        )
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
        return done.stdout.decode("utf-8", errors="replace")

    run(f"--screenshot={shot}")
    dom = run("--dump-dom")
    return Visit(dom, shot, net)


@dataclass
class Screenshot:
    """A decoded PNG screenshot, a row of RGB or RGBA bytes a line."""

    width: int
    height: int
    rows: list[bytes]
    channels: int

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        at = x * self.channels
        red, green, blue = self.rows[y][at:at + 3]
        return red, green, blue

    def blocks(self, colour: tuple[int, int, int]) -> list[tuple[int, int, int, int]]:
        """Every block of pixels of exactly `colour` as (left, top, right, bottom), inclusive:
        runs of it on one row, joined with the runs overlapping them on the row above."""
        pattern, channels = bytes(colour), self.channels
        found: list[list[int]] = []
        above: list[list[int]] = []
        for y, row in enumerate(self.rows):
            runs: list[tuple[int, int]] = []
            at = row.find(pattern)
            while at >= 0:
                if at % channels == 0:
                    x = at // channels
                    if runs and runs[-1][1] == x - 1:
                        runs[-1] = (runs[-1][0], x)
                    else:
                        runs.append((x, x))
                at = row.find(pattern, at + 1)
            here = []
            for left, right in runs:
                block = next((b for b in above if b[0] <= right and left <= b[2]), None)
                if block is None:
                    block = [left, y, right, y]
                    found.append(block)
                block[0], block[2], block[3] = min(block[0], left), max(block[2], right), y
                here.append(block)
            above = here
        return [(b[0], b[1], b[2], b[3]) for b in found]


def _unfiltered(kind: int, line: bytearray, previous: bytes, channels: int) -> bytearray:
    # PNG's per-row filters (RFC 2083, 6.3), undone one kind at a time.
    if kind == 1:
        for i in range(channels, len(line)):
            line[i] = (line[i] + line[i - channels]) & 0xFF
    elif kind == 2:
        line = bytearray((a + b) & 0xFF for a, b in zip(line, previous, strict=True))
    elif kind == 3:
        for i in range(len(line)):
            line[i] = (line[i] + ((line[i - channels] if i >= channels else 0) + previous[i]) // 2) & 0xFF
    elif kind == 4:
        for i in range(len(line)):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            up_left = previous[i - channels] if i >= channels else 0
            guess = left + up - up_left
            to_left, to_up, to_up_left = abs(guess - left), abs(guess - up), abs(guess - up_left)
            if to_left <= to_up and to_left <= to_up_left:
                line[i] = (line[i] + left) & 0xFF
            elif to_up <= to_up_left:
                line[i] = (line[i] + up) & 0xFF
            else:
                line[i] = (line[i] + up_left) & 0xFF
    return line


def read_png(path: Path) -> Screenshot:
    """An 8-bit RGB or RGBA PNG, as Chromium writes its screenshots."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    at, chunks, header = 8, [], b""
    while at < len(data):
        (length,), kind = struct.unpack(">I", data[at:at + 4]), data[at + 4:at + 8]
        if kind == b"IHDR":
            header = data[at + 8:at + 8 + length]
        elif kind == b"IDAT":
            chunks.append(data[at + 8:at + 8 + length])
        at += 12 + length
    width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour_type in (2, 6) and interlace == 0, (depth, colour_type, interlace)
    channels = 3 if colour_type == 2 else 4
    raw, stride = zlib.decompress(b"".join(chunks)), width * channels
    rows: list[bytes] = []
    previous = bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        line = _unfiltered(raw[start], bytearray(raw[start + 1:start + 1 + stride]), previous, channels)
        previous = bytes(line)
        rows.append(previous)
    return Screenshot(width, height, rows, channels)
