"""The network refused while a test replays: every way out of the process over an IP
socket, connections opened before the test included; loopback only for the hosts the marker
names."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn

import pytest

from cafe._pytest.failures import NetworkGuard


def is_loopback(host: Any) -> bool:
    """A host that names this machine's loopback interface: `localhost`, 127.0.0.0/8, ::1
    (an IPv4-mapped one too), or None (getaddrinfo's "this host", which looks nothing up)."""
    if host is None:
        return True
    if isinstance(host, (bytes, bytearray)):
        host = bytes(host).decode("ascii", "replace")
    text = str(host).strip().lower()
    if text in ("localhost", "localhost."):
        return True
    try:
        address = ipaddress.ip_address(text.strip("[]").split("%")[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _host_key(host: Any) -> str:
    """A host as the allowlist compares it: text, lower case, without IPv6 brackets."""
    if isinstance(host, (bytes, bytearray)):
        host = bytes(host).decode("ascii", "replace")
    return str(host).strip().lower().strip("[]")


def _addresses_in(lookup: str, found: Any) -> list[str]:
    """The addresses a name lookup returned (`getaddrinfo` entries, `gethostbyname`'s one,
    `gethostbyname_ex`'s list), so that a connection to one of them is the allowed host's."""
    if lookup == "getaddrinfo":
        return [str(entry[4][0]) for entry in found]
    if lookup == "gethostbyname":
        return [str(found)]
    if lookup in ("gethostbyname_ex", "gethostbyaddr"):
        return [str(address) for address in found[2]]
    return []


def _target(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return "a network address"


def _host_of(address: Any) -> Any:
    return address[0] if isinstance(address, tuple) and address else address


def allowed_hosts(path: Path, options: Mapping[str, Any]) -> frozenset[str]:
    """The marker's `allow_hosts`: the hosts (names or addresses) a replaying test may still
    reach, such as a local server it starts itself; none unless it names them."""
    hosts = options.get("allow_hosts", ())
    listed = isinstance(hosts, list | tuple | set | frozenset)
    if not listed or not all(isinstance(host, str) and host for host in hosts):
        pytest.fail(f"cafe: {path}: allow_hosts: expected a list of host names or addresses, "
                    'e.g. allow_hosts=["127.0.0.1"]', pytrace=False)
    return frozenset(hosts)


_IP_FAMILIES = (socket.AF_INET, socket.AF_INET6)
_SENDS = ("send", "sendall", "sendfile")  # socket.socket's ways to send on its connection
_TLS_SENDS = ("send", "sendall", "write")  # ssl.SSLSocket's own, which encrypt before they send


@contextlib.contextmanager
def network_refused(path: Path, allow_hosts: Collection[str] = ()) -> Iterator[NetworkGuard]:
    """Refuse every way out of the process over an IP socket for the test's duration:
    connections (`connect`, `connect_ex`, `create_connection`), name lookups (`getaddrinfo`,
    `gethostbyname`, `gethostbyname_ex`, `gethostbyaddr`, `getnameinfo`), datagrams sent to
    an address (`sendto`, `sendmsg`), and bytes sent on a connection that is already open,
    however long before the test it was opened (a module's `http.client` connection, a
    `requests.Session`'s pool): `send`, `sendall`, `sendmsg`, `sendfile` and `os.sendfile`
    on a socket, `send`, `sendall` and `write` on a TLS socket. asyncio's transports send
    through these. Local Unix sockets are allowed, and the hosts of `allow_hosts` (the
    marker's option: names or addresses; a lookup of an allowed name allows the addresses it
    gives). The guard yielded keeps the first refusal."""
    import ssl
    import stat

    from cafe.recording.errors import NetworkRefused

    guard = NetworkGuard()
    allowed = {_host_key(host) for host in allow_hosts}
    loopback_remedy = ("; name it in @pytest.mark.cafe_recording(allow_hosts=[\"127.0.0.1\"]) to let the test "
                       "reach a server it started on this machine")

    def refuse(target: str, attempt: str, host: Any) -> NoReturn:
        remedy = loopback_remedy if is_loopback(host) else ""
        refused = NetworkRefused(path, target, attempt=attempt, remedy=remedy)
        if guard.failure is None:
            guard.failure = refused
        raise refused

    def allowed_host(host: Any) -> bool:
        return host is not None and _host_key(host) in allowed

    def allowed_socket(sock: socket.socket, address: Any) -> bool:
        if getattr(socket, "AF_UNIX", None) is not None and sock.family == socket.AF_UNIX:
            return True
        return sock.family in _IP_FAMILIES and allowed_host(_host_of(address))

    def check_peer(sock: socket.socket) -> None:
        """Refuse bytes sent on an IP connection to a host the test may not reach."""
        if sock.family not in _IP_FAMILIES:
            return
        try:
            peer = sock.getpeername()
        except OSError:  # not connected (or closed): the send itself fails, as it would
            return
        if not allowed_host(_host_of(peer)):
            refuse(_target(peer), "a send on a connection to", _host_of(peer))

    originals: dict[tuple[Any, str], tuple[Any, bool]] = {}

    def patch(owner: Any, name: str, replacement: Any) -> None:
        originals[(owner, name)] = (getattr(owner, name), name in vars(owner))
        setattr(owner, name, replacement)

    def real(owner: Any, name: str) -> Any:
        return originals[(owner, name)][0]

    def connect(self: socket.socket, address: Any) -> None:
        if not allowed_socket(self, address):
            refuse(_target(address), "a connection to", _host_of(address))
        return real(socket.socket, "connect")(self, address)  # type: ignore[no-any-return]

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not allowed_socket(self, address):
            refuse(_target(address), "a connection to", _host_of(address))
        return real(socket.socket, "connect_ex")(self, address)  # type: ignore[no-any-return]

    def sendto(self: socket.socket, data: Any, *rest: Any) -> int:
        address = rest[-1] if rest else None
        if not allowed_socket(self, address):
            refuse(_target(address), "a datagram to", _host_of(address))
        return real(socket.socket, "sendto")(self, data, *rest)  # type: ignore[no-any-return]

    def sendmsg(self: socket.socket, buffers: Any, *rest: Any, **named: Any) -> int:
        address = named.get("address", rest[2] if len(rest) > 2 else None)
        if address is None:
            check_peer(self)
        elif not allowed_socket(self, address):
            refuse(_target(address), "a message to", _host_of(address))
        return real(socket.socket, "sendmsg")(self, buffers, *rest, **named)  # type: ignore[no-any-return]

    def on_connection(owner: type[socket.socket], name: str) -> Any:
        def send(self: socket.socket, *args: Any, **kwargs: Any) -> Any:
            check_peer(self)
            return real(owner, name)(self, *args, **kwargs)
        send.__name__ = send.__qualname__ = name
        return send

    def os_sendfile(out_fd: Any, in_fd: Any, *args: Any, **kwargs: Any) -> int:
        try:
            is_socket = stat.S_ISSOCK(os.fstat(out_fd).st_mode)
        except (OSError, TypeError, ValueError):  # not a descriptor: os.sendfile says so itself
            is_socket = False
        if is_socket:
            # A socket object over the descriptor to ask its peer: made under a default timeout
            # it turns the descriptor non-blocking, which is put back as its owner had it.
            blocking = os.get_blocking(out_fd)
            sock = socket.socket(fileno=out_fd)
            try:
                check_peer(sock)
            finally:
                sock.detach()  # the descriptor stays its owner's, open
                if os.get_blocking(out_fd) != blocking:
                    os.set_blocking(out_fd, blocking)
        return real(os, "sendfile")(out_fd, in_fd, *args, **kwargs)  # type: ignore[no-any-return]

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        if not allowed_host(_host_of(address)):
            refuse(_target(address), "a connection to", _host_of(address))
        return real(socket, "create_connection")(address, *args, **kwargs)  # type: ignore[no-any-return]

    def lookup(name: str) -> Any:
        def looked_up(host: Any, *args: Any, **kwargs: Any) -> Any:
            if not allowed_host(host):
                refuse(str(host) if not isinstance(host, bytes) else host.decode("ascii", "replace"),
                       "a name lookup of", host)
            found = real(socket, name)(host, *args, **kwargs)
            allowed.update(_host_key(address) for address in _addresses_in(name, found))
            return found
        return looked_up

    def getnameinfo(address: Any, flags: int) -> Any:
        if not allowed_host(_host_of(address)):
            refuse(_target(address), "a name lookup of", _host_of(address))
        return real(socket, "getnameinfo")(address, flags)

    # Patching a C type's methods: typeshed's signatures cannot be met by a wrapper.
    try:
        patch(socket.socket, "connect", connect)
        patch(socket.socket, "connect_ex", connect_ex)
        patch(socket.socket, "sendto", sendto)
        if hasattr(socket.socket, "sendmsg"):
            patch(socket.socket, "sendmsg", sendmsg)
        for name in _SENDS:
            patch(socket.socket, name, on_connection(socket.socket, name))
        for name in _TLS_SENDS:
            patch(ssl.SSLSocket, name, on_connection(ssl.SSLSocket, name))
        if hasattr(os, "sendfile"):
            patch(os, "sendfile", os_sendfile)
        patch(socket, "create_connection", create_connection)
        for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr"):
            patch(socket, name, lookup(name))
        patch(socket, "getnameinfo", getnameinfo)
        yield guard
    finally:
        for (owner, name), (original, own) in reversed(list(originals.items())):
            if own:
                setattr(owner, name, original)
            else:  # it was inherited: the class is left as it was found
                delattr(owner, name)


