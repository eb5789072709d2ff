"""Offline by default: every test here has its socket connects refused (and recorded), except
the tests marked `local_server`, which may connect to the loopback interface only."""

from __future__ import annotations

import ipaddress
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

LOCAL_SERVER = "local_server"


class NetworkRefused(ConnectionRefusedError):
    """Raised instead of connecting: this test is offline."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{LOCAL_SERVER}: the test talks to a test server it started on 127.0.0.1 (loopback only)",
    )


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(session, config, items):  # type: ignore[no-untyped-def]
    """Hypothesis caches the constants of local modules while tests are collected, in
    ./.hypothesis by default: keep that cache in a temporary directory as well."""
    from .helpers import hypothesis_home

    home = Path(tempfile.mkdtemp(prefix="cafe-tests-hypothesis-"))
    try:
        with hypothesis_home(home):
            return (yield)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _is_loopback(host: object) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def network_attempts(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[list]:
    """Refuse connects and name lookups; yield the list of refused attempts. A test that
    provokes one on purpose clears the list, any other attempt fails the test."""
    loopback_allowed = request.node.get_closest_marker(LOCAL_SERVER) is not None
    refused: list[object] = []
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def check(sock: socket.socket, address: object) -> None:
        inet = sock.family in (socket.AF_INET, socket.AF_INET6)
        host = address[0] if isinstance(address, tuple) else address
        if loopback_allowed and inet and _is_loopback(host):
            return
        refused.append(address)
        raise NetworkRefused(f"network refused in an offline test: connect to {address!r}")

    def connect(self: socket.socket, address: object) -> None:
        check(self, address)
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: object) -> int:
        check(self, address)
        return real_connect_ex(self, address)

    def getaddrinfo(host, *args, **kwargs):  # type: ignore[no-untyped-def]
        if host is not None and not _is_loopback(host):
            refused.append(host)
            raise socket.gaierror(socket.EAI_NONAME, f"name lookup refused in an offline test: {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield refused
    if refused:
        pytest.fail(f"the test tried to reach the network: {refused!r}", pytrace=False)
