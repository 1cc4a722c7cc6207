"""The job network's HTTP and HTTPS relay: how a ``local_process`` host reaches the outside.

A host of a job network (:mod:`launchbay.runtime._netns`) has no route out of its
namespaces. Its ``HTTP(S)_PROXY`` names this relay, which runs in the job's switch
process on this machine's network and connects for it: ``CONNECT host:port`` (HTTPS,
anything tunnelled) and plain ``GET http://host:port/...`` requests. The client
machine's own loopback is :data:`CLIENT_HOST` (Docker's name for the same); a host's
``127.0.0.1`` is its own and is refused here (``403``).

Bounds: :data:`MAX_CONNECTIONS` at once (then ``503``), :data:`HEAD_SECONDS` to send a
request's head, :data:`CONNECT_SECONDS` to reach the target, :data:`IDLE_SECONDS` of
silence both ways on a relayed connection.

When the relay cannot reach a target it says why, twice: in the answer's body (what
``pip``, ``requests`` or ``urllib`` show the script) and as one line in the asking
host's log (through the runtime's logger, see :class:`HostLogs`), each naming the host
that asked, the target ``host:port`` and the cause (the name does not resolve, the
connection was refused, it timed out, ...). Standard library only: this runs beside
the hosts.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import threading
from collections.abc import Mapping

from launchbay.runtime._linux import readable

__all__ = [
    "CLIENT_HOST",
    "CONNECT_SECONDS",
    "HEAD_SECONDS",
    "IDLE_SECONDS",
    "LOOPBACK_NAMES",
    "MAX_CONNECTIONS",
    "HostLogs",
    "describe_failure",
    "log_to_hosts",
    "serve",
]

#: The client machine as a host reaches it through the relay (Docker's name for the same).
#: A host's own ``127.0.0.1`` is its own loopback; the client's loopback is this name.
CLIENT_HOST = "host.docker.internal"
#: What a host never sends through the relay: its own loopback.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
#: The relay's bounds: connections at once, seconds to send a request's head, seconds to
#: reach a target, seconds a relayed connection may stay silent both ways.
MAX_CONNECTIONS = 256
HEAD_SECONDS = 30.0
CONNECT_SECONDS = 30.0
IDLE_SECONDS = 600.0

logger = logging.getLogger("launchbay.runtime.relay")

_BAD_GATEWAY = b"502 Bad Gateway"
_GATEWAY_TIMEOUT = b"504 Gateway Timeout"


class HostLogs(logging.Handler):
    """Writes each record to the log of the host it is about (``extra={"host": ...}``).

    The hosts' runtimes append their output to these files themselves; a line is
    appended here the same way (``O_APPEND``, one ``write``), in the runtime's format.
    Records about no known host are dropped.
    """

    def __init__(self, files: Mapping[str, str]):
        super().__init__(logging.INFO)
        self.files = dict(files)
        self.setFormatter(logging.Formatter("[launchbay] %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        path = self.files.get(str(getattr(record, "host", "")))
        if path is None:
            return
        try:
            line = (self.format(record) + "\n").encode(errors="replace")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except Exception:  # noqa: BLE001 - a log line must never stop the relay
            self.handleError(record)


def log_to_hosts(files: Mapping[str, str]) -> None:
    """Send the relay's log lines to the logs of the hosts they are about (host -> file)."""
    logger.addHandler(HostLogs(files))
    logger.setLevel(logging.INFO)
    logger.propagate = False


def describe_failure(exc: BaseException, port: int) -> str:
    """Why a connection to a target failed, in words a user acts on."""
    if isinstance(exc, socket.gaierror):
        if exc.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)):
            return f"DNS failure: the name does not resolve ({exc.strerror})"
        return f"DNS failure: the name could not be looked up ({exc.strerror})"
    if isinstance(exc, ConnectionRefusedError):
        return f"connection refused: nothing listens on port {port} there"
    if isinstance(exc, TimeoutError):
        return f"timed out: no answer within {CONNECT_SECONDS:g} s"
    if isinstance(exc, OSError) and exc.errno == errno.ENETUNREACH:
        return "network unreachable: this machine has no route there (no internet?)"
    if isinstance(exc, OSError) and exc.errno == errno.EHOSTUNREACH:
        return "host unreachable: no route to it from this machine"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


class _Refused(OSError):
    """A target the relay does not reach (a host's own loopback)."""


class _Unreachable(OSError):
    """The relay could not connect to a target; the message says why."""

    def __init__(self, status: bytes, message: str):
        super().__init__(message)
        self.status = status


class _Relay:
    """The relay's view of the job network: its gateway address and its hosts' addresses."""

    def __init__(self, gateway: str, hosts: Mapping[str, str]):
        self.gateway = gateway
        self.hosts = dict(hosts)

    def who(self, address: str) -> str:
        """``algo-1 (10.213.0.1)``: the host that asked, by its address on the job's bridge."""
        host = self.hosts.get(address)
        return f"{host} ({address})" if host else address

    def target(self, host: str) -> str:
        """Where the relay connects for ``host``: the client's loopback for :data:`CLIENT_HOST`.

        A loopback name is refused: a host's loopback is its own, never the client's
        (a client that sends it here ignored ``NO_PROXY``).
        """
        name = host.strip("[]").lower().rstrip(".")
        if name in (CLIENT_HOST, self.gateway):
            return "127.0.0.1"
        if name in LOOPBACK_NAMES or name.endswith(".localhost") or name.startswith("127."):
            raise _Refused(
                f"{host} is the host's own loopback; this machine is {CLIENT_HOST} (docs/local.md)"
            )
        return name

    def connect(self, host: str, port: int) -> socket.socket:
        """A connection to ``host:port`` for a host, or :class:`_Unreachable` saying why not."""
        address = self.target(host)
        try:
            upstream = socket.create_connection((address, port), timeout=CONNECT_SECONDS)
        except OSError as exc:
            status = _GATEWAY_TIMEOUT if isinstance(exc, TimeoutError) else _BAD_GATEWAY
            raise _Unreachable(status, describe_failure(exc, port)) from exc
        upstream.settimeout(None)
        return upstream

    def handle(self, client: socket.socket, peer: str) -> None:
        """One proxied connection: ``CONNECT host:port``, or a request for ``http://host:port/``."""
        target = "?"
        try:
            head = _read_head(client)
            line, _, rest = head.partition(b"\r\n")
            method, url, version = line.decode("latin-1").split(" ", 2)
            if method.upper() == "CONNECT":
                host, _, port = url.rpartition(":")
                target = url
                upstream = self.connect(host, int(port))
                first = b"HTTP/1.1 200 Connection established\r\n\r\n"
                _relay(client, upstream, first, rest.partition(b"\r\n\r\n")[2])
                return
            scheme, _, remainder = url.partition("://")
            if scheme.lower() != "http":
                _answer(client, b"400 Bad Request", f"launchbay relay: cannot relay {url!r}")
                return
            hostport, slash, path = remainder.partition("/")
            host, _, port = (
                hostport.rpartition(":") if ":" in hostport.strip("]") else (hostport, "", "80")
            )
            target = f"{host or hostport}:{port or 80}"
            upstream = self.connect(host or hostport, int(port or 80))
            headers, _, body = rest.partition(b"\r\n\r\n")
            kept = [
                h
                for h in headers.split(b"\r\n")
                if h
                and h.split(b":", 1)[0].strip().lower() not in (b"proxy-connection", b"connection")
            ]
            request = f"{method} {slash}{path} {version}\r\n".encode("latin-1")
            request += b"\r\n".join([*kept, b"Connection: close"]) + b"\r\n\r\n" + body
            _relay(client, upstream, b"", request)
        except _Refused as exc:
            self.fail(client, peer, target, b"403 Forbidden", str(exc))
        except _Unreachable as exc:
            self.fail(client, peer, target, exc.status, str(exc))
        except (OSError, ValueError):
            # No complete, well-formed request head (the asker may be gone already).
            _answer(client, b"400 Bad Request", "launchbay relay: incomplete or malformed request")

    def fail(
        self, client: socket.socket, peer: str, target: str, status: bytes, cause: str
    ) -> None:
        """Answer and log that ``peer``'s connection to ``target`` was not made, and why."""
        who = self.who(peer)
        message = f"relay: {who} could not reach {target}: {cause}"
        logger.warning(message, extra={"host": self.hosts.get(peer, "")})
        _answer(client, status, f"launchbay {message}\n")

    def serve(self, listener: socket.socket) -> None:
        """Accept connections: a thread each, at most :data:`MAX_CONNECTIONS` at once."""
        slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

        def handle(client: socket.socket, peer: str) -> None:
            try:
                self.handle(client, peer)
            finally:
                slots.release()

        while True:
            try:
                client, address = listener.accept()
            except OSError:
                return
            if not slots.acquire(blocking=False):
                _answer(
                    client, b"503 Service Unavailable", "too many connections through the relay"
                )
                continue
            peer = str(address[0]) if isinstance(address, tuple) else ""
            threading.Thread(target=handle, args=(client, peer), daemon=True).start()


def serve(listener: socket.socket, gateway: str, hosts: Mapping[str, str]) -> None:
    """Relay for the job's hosts on ``listener`` until it closes.

    ``gateway`` is the relay's own address on the job's bridge (a target that means the
    client machine, as :data:`CLIENT_HOST` does); ``hosts`` maps each host's address on
    the bridge to its name, for the answers and log lines that name the host that asked.
    """
    _Relay(gateway, hosts).serve(listener)


def _relay(a: socket.socket, b: socket.socket, to_a: bytes = b"", to_b: bytes = b"") -> None:
    """Send ``to_a`` and ``to_b``, then copy both ways until one side ends; close both."""
    sockets = [a, b]
    try:
        for s in sockets:  # a peer that stops reading cannot hold a send forever either
            s.settimeout(IDLE_SECONDS)
        if to_a:
            a.sendall(to_a)
        if to_b:
            b.sendall(to_b)
        while True:
            ready = readable(sockets, IDLE_SECONDS)
            if not ready:
                return
            for source in ready:
                data = source.recv(65536)
                if not data:
                    return
                (b if source is a else a).sendall(data)
    except OSError:
        return
    finally:
        for s in sockets:
            with contextlib.suppress(OSError):
                s.close()


def _read_head(client: socket.socket) -> bytes:
    client.settimeout(HEAD_SECONDS)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = client.recv(4096)
        if not chunk or len(head) > 65536:
            raise OSError("incomplete request")
        head += chunk
    return head


def _answer(client: socket.socket, status: bytes, text: str) -> None:
    """A short answer of the relay's own, then close."""
    body = text.encode()
    with contextlib.suppress(OSError):
        client.settimeout(5)
        client.sendall(
            b"HTTP/1.1 "
            + status
            + b"\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
    with contextlib.suppress(OSError):
        client.close()
