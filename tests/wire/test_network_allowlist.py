"""While a marked test replays, the network is refused, loopback included; a test that
starts a local server of its own names it: `@pytest.mark.cafe_recording(allow_hosts=[...])`."""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import requests  # noqa: F401  (imported once for the session: pytester's runs each re-import what they import)

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


# --- connections opened before the test ----------------------------------------------------
# A module's `http.client` connection, a `requests.Session`'s pool, a socket, a TLS socket and
# asyncio's transports, all connected at import: while the test replays, nothing they send
# leaves the process, unless the test allows the host; a Unix socket still works.

OPEN_BEFORE_MODULE = '''
import asyncio
import contextlib
import http.client
import os
import socket
import ssl

import pytest
import requests

HOST = "127.0.0.1"
PORT, TLS_PORT, UDP_PORT = (int(os.environ[name]) for name in ("LOCAL_PORT", "LOCAL_TLS_PORT", "LOCAL_UDP_PORT"))
PROMPT = {prompt!r}
PROMPT_FILE = os.environ["LOCAL_PROMPT_FILE"]
REQUEST = b"POST /v1/chat/completions HTTP/1.1\\r\\nContent-Length: %d\\r\\n\\r\\n%s" % (len(PROMPT), PROMPT)

CONNECTION = http.client.HTTPConnection(HOST, PORT, timeout=10)
CONNECTION.connect()
ALLOWED_CONNECTION = http.client.HTTPConnection(HOST, PORT, timeout=10)
ALLOWED_CONNECTION.connect()
SESSION = requests.Session()
assert SESSION.get(f"http://{{HOST}}:{{PORT}}/warm", timeout=10).content == b"ok"  # its pool keeps the connection
RAW = socket.create_connection((HOST, PORT), timeout=10)
UDP = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
UDP.connect((HOST, UDP_PORT))
TLS = ssl.create_default_context(cafile=os.environ["LOCAL_CA"]).wrap_socket(
    socket.create_connection((HOST, TLS_PORT), timeout=10), server_hostname=HOST)
LOOP = asyncio.new_event_loop()
READER, WRITER = LOOP.run_until_complete(asyncio.open_connection(HOST, PORT))
ASYNC_RAW = socket.create_connection((HOST, PORT), timeout=10)
ASYNC_RAW.setblocking(False)
UNIX_A, UNIX_B = socket.socketpair()


def _ended(raw):
    # The server's answers sit unread here: closing now would send a reset, which makes the
    # server drop what it has not read yet. Ending our side first, and closing once the server
    # has read to that end and closed its own, loses nothing.
    with contextlib.suppress(OSError):
        raw.setblocking(True)
        raw.settimeout(10)
        raw.shutdown(socket.SHUT_WR)
        while raw.recv(65536):
            pass


def teardown_module():
    for raw in (RAW, ASYNC_RAW):
        _ended(raw)
    for closing in (CONNECTION, ALLOWED_CONNECTION, SESSION, RAW, UDP, TLS, ASYNC_RAW, UNIX_A, UNIX_B, WRITER):
        closing.close()
    with contextlib.suppress(Exception):  # a refused transport ended with its refusal
        LOOP.run_until_complete(WRITER.wait_closed())
    LOOP.close()


def post(path="/v1/chat/completions", body=PROMPT, connection=CONNECTION):
    connection.request("POST", path, body=body, headers={{"Content-Type": "application/json"}})
    return connection.getresponse().read()


@pytest.mark.cafe_recording
def test_http_client():
    assert post() == b"ok"


@pytest.mark.cafe_recording
def test_requests_session():
    assert SESSION.post(f"http://{{HOST}}:{{PORT}}/v1/chat/completions", data=PROMPT, timeout=10).content == b"ok"


@pytest.mark.cafe_recording
@pytest.mark.parametrize("send", ["send", "sendall", "sendmsg", "sendfile", "os.sendfile"])
def test_socket(send):
    with open(PROMPT_FILE, "rb") as prompt:
        {{"send": lambda: RAW.send(REQUEST), "sendall": lambda: RAW.sendall(REQUEST),
         "sendmsg": lambda: RAW.sendmsg([REQUEST]), "sendfile": lambda: RAW.sendfile(prompt),
         "os.sendfile": lambda: os.sendfile(RAW.fileno(), prompt.fileno(), 0, len(PROMPT))}}[send]()


@pytest.mark.cafe_recording
def test_connected_datagram_socket():
    UDP.send(PROMPT)


@pytest.mark.cafe_recording
@pytest.mark.parametrize("send", ["send", "sendall", "write"])
def test_tls_socket(send):
    getattr(TLS, send)(REQUEST)


@pytest.mark.cafe_recording
def test_asyncio_transport():
    WRITER.write(REQUEST)
    LOOP.run_until_complete(WRITER.drain())


@pytest.mark.cafe_recording
@pytest.mark.parametrize("send", ["sock_sendall", "sock_sendfile"])
def test_asyncio_socket(send):
    with open(PROMPT_FILE, "rb") as prompt:
        sending = LOOP.sock_sendall(ASYNC_RAW, REQUEST) if send == "sock_sendall" else LOOP.sock_sendfile(
            ASYNC_RAW, prompt, fallback=False)
        LOOP.run_until_complete(sending)


@pytest.mark.cafe_recording(allow_hosts=["127.0.0.1"])
def test_allowed_host():
    assert post(body=b"allowed order", connection=ALLOWED_CONNECTION) == b"ok"


@pytest.mark.cafe_recording
def test_unix_socket():
    UNIX_A.sendall(PROMPT)
    assert UNIX_B.recv(len(PROMPT)) == PROMPT
'''

PROMPT = b'{"messages": [{"role": "user", "content": "A latte for table 4-7-1, please."}]}'
REFUSED_TESTS = {"test_http_client": "PORT", "test_requests_session": "PORT", "test_connected_datagram_socket": "UDP",
                 "test_asyncio_transport": "PORT",
                 **{f"test_socket[{send}]": "PORT" for send in ("send", "sendall", "sendmsg", "sendfile",
                                                               "os.sendfile")},
                 **{f"test_tls_socket[{send}]": "TLS" for send in ("send", "sendall", "write")},
                 **{f"test_asyncio_socket[{send}]": "PORT" for send in ("sock_sendall", "sock_sendfile")}}


def _wait_for(condition: Callable[[], bool], at_most_s: float = 30.0) -> None:
    """Until `condition` holds, or `at_most_s` has passed (the assertion after it then fails)."""
    deadline = time.monotonic() + at_most_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)


class _Listener:
    """A TCP server on 127.0.0.1 (TLS with `context`) that keeps every byte it receives and
    answers each whole HTTP request with 200 `ok`, keeping the connection open."""

    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        self._context = context
        self._lock = threading.Lock()
        self._connections: list[bytearray] = []
        self._stop = threading.Event()
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.05)
        self.port = int(self._server.getsockname()[1])
        self._threads = [threading.Thread(target=self._accept, daemon=True)]

    @property
    def received(self) -> bytes:
        with self._lock:
            return b"".join(self._connections)

    def clear(self) -> None:
        with self._lock:
            self._connections.clear()

    def __enter__(self) -> _Listener:
        self._threads[0].start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        for thread in list(self._threads):
            thread.join(5)
        self._server.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._server.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._serve, args=(connection,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, connection: socket.socket) -> None:
        with contextlib.suppress(OSError), connection:
            connection.settimeout(10)
            if self._context is not None:
                connection = self._context.wrap_socket(connection, server_side=True)
            connection.settimeout(0.05)
            pending = b""
            heard = bytearray()
            with self._lock:
                self._connections.append(heard)
            while not self._stop.is_set():
                try:
                    data = connection.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    return
                with self._lock:
                    heard += data
                pending = self._answer(connection, pending + data)

    @staticmethod
    def _answer(connection: socket.socket, pending: bytes) -> bytes:
        while b"\r\n\r\n" in pending:
            head, _, rest = pending.partition(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            if len(rest) < length:
                break
            pending = rest[length:]
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
        return pending


class _DatagramListener:
    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self.port = int(self._socket.getsockname()[1])

    def received(self) -> bytes:
        """Every datagram waiting, without waiting for more."""
        self._socket.setblocking(False)
        found = []
        with contextlib.suppress(BlockingIOError):
            while True:
                found.append(self._socket.recv(65536))
        return b"".join(found)

    def close(self) -> None:
        self._socket.close()


def _tls_context(directory: Path) -> tuple[ssl.SSLContext, Path]:
    """A server context with a certificate for 127.0.0.1 made by the openssl command, and
    the certificate, which the client trusts."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a TLS certificate")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=60)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context, cert


def _failure_lines(output: str) -> dict[str, str]:
    """Each failed test's `cafe: ` line, by the test's name in its report's heading."""
    found, current = {}, None
    for line in output.splitlines():
        heading = re.fullmatch(r"_{3,} (\S+) _{3,}", line)
        if heading is not None:
            current = heading.group(1)
        elif current is not None and line.startswith("cafe: "):
            found.setdefault(current, line)
    return found


def test_a_connection_opened_before_a_replaying_test_sends_nothing_unless_its_host_is_allowed(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytester.makepyfile(test_open_before=OPEN_BEFORE_MODULE.format(prompt=PROMPT))
    prompt_file = tmp_path / "prompt.json"
    prompt_file.write_bytes(PROMPT)
    context, cert = _tls_context(tmp_path)
    datagrams = _DatagramListener()
    with _Listener() as plain, _Listener(context) as tls, contextlib.closing(datagrams):
        ports = {"PORT": plain.port, "TLS": tls.port, "UDP": datagrams.port}
        for name, value in {"LOCAL_PORT": plain.port, "LOCAL_TLS_PORT": tls.port, "LOCAL_UDP_PORT": datagrams.port,
                            "LOCAL_CA": cert, "LOCAL_PROMPT_FILE": prompt_file}.items():
            monkeypatch.setenv(name, str(value))
        pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=16)  # records: nothing refused
        # Each way of sending reaches its server while nothing is replayed (a server's thread
        # may read what was sent after the sender is done: bounded wait for it).
        _wait_for(lambda: plain.received.count(PROMPT) >= 10 and tls.received.count(PROMPT) >= 3)
        assert plain.received.count(PROMPT) == 10 and tls.received.count(PROMPT) == 3
        assert datagrams.received() == PROMPT
        plain.clear()
        tls.clear()
        replayed = pytester.runpytest("-p", "no:cacheprovider")
        replayed.assert_outcomes(passed=2, failed=14)
        # The server heard the module's warm-up and the allowed test's request, nothing else.
        _wait_for(lambda: b"allowed order" in plain.received + tls.received)
        received = plain.received + tls.received + datagrams.received()
    assert PROMPT not in received and b"latte" not in received
    assert received.count(b"allowed order") == 1
    lines = _failure_lines(replayed.stdout.str())
    assert set(lines) == set(REFUSED_TESTS)
    for test, server in REFUSED_TESTS.items():
        assert lines[test].endswith(
            f"network access is refused while replaying this recording (a send on a connection to "
            f"127.0.0.1:{ports[server]} was attempted); name it in @pytest.mark.cafe_recording("
            'allow_hosts=["127.0.0.1"]) to let the test reach a server it started on this machine'), test
