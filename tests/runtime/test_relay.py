"""The job network's relay (:mod:`launchbay.runtime._relay`) on this machine's loopback.

The relay as a job's hosts meet it is tested through real ``local_process`` jobs
(tests/integration/test_local_process_host_boundaries.py); here its answers to a
``CONNECT`` that cannot be made and to what is not a request, without namespaces.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from launchbay.runtime import _relay

GATEWAY = "10.213.0.254"


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A relay on 127.0.0.1 that knows the test's own address as host ``algo-1``."""
    log = tmp_path / "algo-1.log"
    handler = _relay.HostLogs({"algo-1": str(log)})
    _relay.logger.addHandler(handler)
    listener = socket.create_server(("127.0.0.1", 0))
    thread = threading.Thread(
        target=_relay.serve, args=(listener, GATEWAY, {"127.0.0.1": "algo-1"}), daemon=True
    )
    thread.start()
    try:
        yield listener.getsockname()[1], log
    finally:
        # shutdown wakes the relay's accept(); closing alone would leave it waiting on an fd
        # number that the next test's socket may reuse.
        listener.shutdown(socket.SHUT_RDWR)
        thread.join(timeout=30)
        listener.close()
        _relay.logger.removeHandler(handler)
        assert not thread.is_alive()


def _ask(port: int, head: bytes) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head)
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
    return answer.decode()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_tunnel_that_cannot_be_made_names_the_host_the_target_and_the_cause(relay):
    port, log = relay
    closed = _closed_port()
    target = f"host.docker.internal:{closed}"
    answer = _ask(port, f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    status, _, body = answer.partition("\r\n\r\n")
    assert status.startswith("HTTP/1.1 502 Bad Gateway"), answer
    assert body == (
        f"launchbay relay: algo-1 (127.0.0.1) could not reach {target}: "
        f"connection refused: nothing listens on port {closed} there\n"
    )
    assert log.read_text() == f"[launchbay] WARNING {body.removeprefix('launchbay ')}"


def test_a_loopback_target_is_refused_and_logged(relay):
    port, log = relay
    answer = _ask(port, b"GET http://localhost:8080/ HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert answer.startswith("HTTP/1.1 403 Forbidden"), answer
    assert "algo-1 (127.0.0.1) could not reach localhost:8080: localhost is the host's own" in (
        answer
    )
    assert "could not reach localhost:8080" in log.read_text()


def test_what_is_not_a_request_gets_a_400_and_no_log_line(relay):
    port, log = relay
    assert _ask(port, b"nonsense\r\n\r\n").startswith("HTTP/1.1 400 Bad Request")
    assert not log.exists()


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (TimeoutError("timed out"), "timed out: no answer within 30 s"),
        (OSError(errno.ENETUNREACH, "Network is unreachable"), "network unreachable"),
        (OSError(errno.EHOSTUNREACH, "No route to host"), "host unreachable"),
    ],
)
def test_each_cause_has_its_words(error, cause):
    assert _relay.describe_failure(error, 443).startswith(cause)


def test_a_log_line_about_no_known_host_is_dropped(tmp_path):
    handler = _relay.HostLogs({"algo-1": str(tmp_path / "algo-1.log")})
    handler.handle(logging.makeLogRecord({"msg": "x", "levelname": "WARNING", "host": "algo-9"}))
    assert not (tmp_path / "algo-1.log").exists()


def test_readiness_is_seen_on_descriptors_numbered_past_select_s_limit():
    """``select`` refuses descriptors numbered 1024 or more; a long notebook's process has
    them (CI's Docker worker did, and every local job it started then failed). The relay,
    the checkpoint watch and the network switch's start wait with ``readable`` instead."""
    import select

    from launchbay.runtime.for_client import readable

    read_end, write_end = os.pipe()
    high = os.dup2(read_end, 1500)
    try:
        with pytest.raises(ValueError):
            select.select([high], [], [], 0)
        assert readable([high], 0.05) == []
        os.write(write_end, b"x")
        assert readable([high], 5) == [high]
        with os.fdopen(os.dup(high), "rb", buffering=0) as f:
            assert readable([f], 5) == [f]  # a file object comes back as itself
        os.close(write_end)
        write_end = -1
        os.read(high, 1)
        assert readable([high], 5) == [high]  # the other end hung up: reading says so
    finally:
        for fd in (read_end, high, write_end):
            if fd >= 0:
                os.close(fd)
