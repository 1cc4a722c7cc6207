"""The node side of a Ray job: one :class:`HostAgent` (a Ray actor) per host, on that host's node.

:class:`~launchbay.backends.ray.hosts.RayHosts` (the client) places one
agent per host through a placement group; each agent then does on its node
what :class:`~launchbay.backends.local.process_hosts.ProcessHosts` does on
this machine:

* makes the host's tree in a fresh node-local directory
  (``$TMPDIR/launchbay-ray-<job>-<host>-*/<host>``), the host's ``/opt/ml``;
* unpacks the host's ``input/config/*.json`` the client wrote, stages the
  channels on the node (``s3://`` through the node's S3 cache and credentials,
  ``file://`` from a path every node sees) and restores the checkpoints;
* starts ``python -m launchbay.runtime.train`` in its own process group with a
  parent-death signal (the runtime ends with the agent), its output in a
  node-local log file the client reads through :meth:`HostAgent.poll`;
* signals the host's process group, and packs the host's ``model/``,
  ``output/`` and checkpoint files into a node-local tar with ``local_process``'s
  rules (:meth:`HostAgent.collect`) that the client reads in bounded chunks
  (:meth:`HostAgent.read_collected`), so the client's job directory gets them
  wherever the node is;
* removes everything it made (:meth:`HostAgent.cleanup`).

Nothing here imports Ray at module level: the agent's methods run inside a
Ray worker, and :mod:`launchbay.backends.ray.hosts` wraps the class with
``ray.remote`` when a Ray job starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import io
import json
import os
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import launchbay
from launchbay.backends.local.layout import JobLayout
from launchbay.backends.local.outputs import add_entry
from launchbay.backends.local.process_hosts import (
    free_port_block,
    host_descendants,
    parent_death_signal,
)
from launchbay.backends.local.staging import LocalStager
from launchbay.backends.plan import JobFields
from launchbay.runtime.archive import safe_extract
from launchbay.runtime.for_client import TreeEntry, is_alive, scan_tree, write_hosts_file
from launchbay.runtime.settings import RuntimeSettings

__all__ = ["HostAgent", "interface_of", "pack_outputs", "pack_tree", "unpack_tree"]

#: Most bytes of a host's output one :meth:`HostAgent.poll` returns.
CHUNK = 1 << 20
#: Most bytes of a host's packed files one :meth:`HostAgent.read_collected` returns: under
#: Ray's limit for results returned inline (100 KiB), so chunks never go through the object
#: store, whose pages a client that reads them would keep mapped.
FILES_CHUNK = 96 << 10
#: The node-local file a host's files are packed into (beside its tree, never in it).
COLLECTED = "collected.tar"
#: The launch agent mpirun runs to reach another host (through that host's actor).
RSH_MODULE = "launchbay.backends.ray.rsh"
#: The prefix of every agent's node-local directory, and the file naming its agent's pid.
PREFIX = "launchbay-ray-"
PID_FILE = "agent.pid"
#: What of a host's tree is never sent back (the client wrote or staged it).
_NOT_COLLECTED = ("input", "code")


def interface_of(address: str) -> str | None:
    """The name of this machine's network interface that holds IPv4 ``address`` (Linux), or None."""
    if address.startswith("127."):
        return "lo"
    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(
                    s.fileno(), siocgifaddr, struct.pack("256s", name.encode()[:15])
                )
            except OSError:
                continue
            if socket.inet_ntoa(packed[20:24]) == address:
                return name
    return None


def pack_tree(root: str, names: Sequence[str] | None = None, skip: Sequence[str] = ()) -> bytes:
    """``root``'s entries (``names``, else all but ``skip``) as uncompressed tar bytes.

    For the small trees the client sends (a host's ``input/config``); links are
    kept as links, never followed, and the receiver extracts with the one safe
    extraction (:func:`unpack_tree`).
    """
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        entries = names if names is not None else sorted(os.listdir(root))
        for name in entries:
            path = os.path.join(root, name)
            if name in skip or not os.path.lexists(path):
                continue
            tar.add(path, arcname=name)
    return buffer.getvalue()


def unpack_tree(data: bytes, root: str) -> None:
    """Extract tar bytes made by :func:`pack_tree` under ``root`` (nothing may leave it)."""
    safe_extract(io.BytesIO(data), root, what="the host's configuration")


def pack_outputs(tree: str, archive: str, skip: Sequence[str] = ()) -> list[tuple[str, str]]:
    """Write ``tree``'s entries but ``skip`` to the tar file ``archive``, as ``local_process`` packs them.

    Each directory is scanned with :func:`~launchbay.runtime.for_client.scan_tree`,
    the rules ``local_process`` publishes outputs with: regular files with their
    data; a link whose target resolves inside its directory (relative, or absolute
    through the host's ``/opt/ml/<dir>`` or the tree's own path) as a relative
    link; a link that leaves it, a link loop, a FIFO, a socket or a device left
    out. A directory that is itself a link is not followed. Returns what was left
    out, ``(path below tree, why)``, for the client to name in warnings.
    """
    skipped: list[tuple[str, str]] = []
    with tarfile.open(archive, mode="w") as tar:
        for name in sorted(os.listdir(tree)):
            if name in skip:
                continue
            path = os.path.join(tree, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat.S_ISREG(mode):
                entries = [TreeEntry(name, path, "file", base=tree)]
            else:
                scan = scan_tree(path, [f"/opt/ml/{name}"], base=tree)
                skipped.extend(
                    (name if rel == "." else f"{name}/{rel}", why) for rel, why in scan.skipped
                )
                entries = [dataclasses.replace(e, rel=f"{name}/{e.rel}") for e in scan.entries]
            for entry in entries:
                if not add_entry(tar, entry):
                    skipped.append((entry.rel, "no longer a regular file reached without a link"))
    return skipped


def sweep(parent: str | None = None) -> list[str]:
    """Remove the node-local directories of agents that are gone; the paths removed.

    An agent removes its own directory at the end of its job (:meth:`HostAgent.cleanup`);
    one killed with its client (Ray ends the actors of a driver that died) cannot, so
    the next agent on the node removes what such agents left.
    """
    parent = parent or tempfile.gettempdir()
    removed: list[str] = []
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    for name in names:
        path = os.path.join(parent, name)
        if not name.startswith(PREFIX):
            continue
        try:
            with open(os.path.join(path, PID_FILE), encoding="utf-8") as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if not is_alive(pid):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _launchbay_path() -> str:
    """The directory that holds the ``launchbay`` package this node runs."""
    return os.path.dirname(os.path.dirname(os.path.abspath(launchbay.__file__)))


class HostAgent:
    """One host of a Ray job, on its node (a Ray actor; see the module docstring)."""

    def __init__(self, job_name: str, host: str) -> None:
        self.job_name = job_name
        self.host = host
        sweep()
        self.root = tempfile.mkdtemp(prefix=f"{PREFIX}{job_name[:24]}-{host}-")
        with open(os.path.join(self.root, PID_FILE), "w", encoding="utf-8") as f:
            f.write(str(os.getpid()))
        self.tree = os.path.join(self.root, host)
        self.log_path = os.path.join(self.root, "host.log")
        self.tmp = os.path.join(self.root, "tmp")
        os.makedirs(self.tmp, exist_ok=True)
        with open(self.log_path, "wb"):
            pass
        self.proc: subprocess.Popen[bytes] | None = None
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        #: The runtime's environment (what commands started for mpirun get too).
        self.env: dict[str, str] = {}
        #: Commands a launch agent asked for (``orted`` of an MPI job), by id.
        self.commands: dict[int, subprocess.Popen[bytes]] = {}

    # -- where the host is -----------------------------------------------------------
    def where(self) -> dict[str, Any]:
        """The node this host runs on: Ray node id, address, host name, the agent's pid."""
        import ray  # inside a Ray worker: Ray is there

        return {
            "node_id": ray.get_runtime_context().get_node_id(),
            "address": ray.util.get_node_ip_address(),
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "root": self.root,
        }

    def free_port_block(self, count: int) -> int:
        """A block of ``count`` ports free on this node (the job's master port and TF's ports)."""
        return free_port_block(count, address="")

    # -- the host's tree ---------------------------------------------------------------
    def setup(self, hosts: Sequence[str], plan: JobFields, config: bytes) -> None:
        """Make the host's tree: its config files, its channels and its checkpoints, staged here."""
        unpack_tree(config, self.tree)
        stager = LocalStager(None)
        # Channels are staged for every host (links only), so that a ShardedByS3Key
        # channel gives this host its own share; only this host's tree is kept.
        everyone = JobLayout(self.root, tuple(hosts))
        for other in hosts:
            os.makedirs(everyone.host_dir(other), exist_ok=True)
        stager.stage_channels(plan, everyone)
        for other in hosts:
            if other != self.host:
                shutil.rmtree(everyone.host_dir(other), ignore_errors=True)
        stager.restore_checkpoints(plan, JobLayout(self.root, (self.host,)))

    def _settle_network(self, address: str, env: dict[str, str]) -> None:
        """Talk on the interface that holds the node's address (the contract's and gloo/NCCL's)."""
        iface = interface_of(address)
        if iface is None:
            return
        for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
            env.setdefault(name, iface)
        config = os.path.join(self.tree, "input", "config", "resourceconfig.json")
        try:
            with open(config, encoding="utf-8") as f:
                resource = json.load(f)
            resource["network_interface_name"] = iface
            with open(config, "w", encoding="utf-8") as f:
                json.dump(resource, f)
        except (OSError, ValueError):
            pass

    # -- the runtime ---------------------------------------------------------------------
    def start(
        self, hosts: Sequence[str], settings: RuntimeSettings, environment: Mapping[str, str]
    ) -> int:
        """Start the host's runtime; returns its pid.

        ``environment`` (the request's ``Environment`` and the job's names) goes on
        top of the node's own environment, then ``settings``' variables with this
        node's hosts file.
        """
        hosts_file = write_hosts_file(
            os.path.join(self.root, "hosts"), hosts, dict(settings.host_addresses)
        )
        settings = dataclasses.replace(settings, hosts_file=hosts_file)
        env = dict(os.environ)
        env.update(environment)
        env.update(settings.to_environ())
        env.update(
            {
                "SAGEMAKER_BASE_DIR": self.tree,
                "TMPDIR": self.tmp,
                "TMP": self.tmp,
                "TEMP": self.tmp,
                "PYTHONUNBUFFERED": "1",
            }
        )
        self._settle_network(settings.address(self.host), env)
        import ray  # inside a Ray worker: Ray is there

        # mpirun on the master reaches the other hosts through their actors (backends/ray/rsh.py).
        env.setdefault("RAY_ADDRESS", ray.get_runtime_context().gcs_address)
        env.setdefault("OMPI_MCA_plm_rsh_agent", f"{sys.executable} -m {RSH_MODULE}")
        path = _launchbay_path()
        current = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        if path not in current:
            env["PYTHONPATH"] = os.pathsep.join([path, *current])
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
            env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
        self.env = env
        # The runtime is started, and waited for, by a thread of its own that lives as
        # long as it does: its parent-death signal fires when that thread ends.
        thread = threading.Thread(target=self._run, args=(env,), daemon=True)
        thread.start()
        self._started.wait(60)
        if self._start_error is not None:
            raise self._start_error
        assert self.proc is not None
        return self.proc.pid

    def _run(self, env: dict[str, str]) -> None:
        try:
            log_fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND)
            try:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "launchbay.runtime.train"],
                    cwd=self.tree,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log_fd,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=parent_death_signal(),  # noqa: PLW1509 - see process_hosts
                )
            finally:
                os.close(log_fd)
        except BaseException as exc:  # handed to start()
            self._start_error = exc
            self._started.set()
            return
        self._started.set()
        self.proc.wait()

    def poll(self, offset: int, wait: float) -> tuple[bytes, int | None]:
        """The host's output from ``offset`` (at most :data:`CHUNK` bytes) and its exit code.

        Waits up to ``wait`` seconds for something new. The exit code comes only
        with the last of the output (``None`` while it runs or output is left).
        """
        deadline = time.monotonic() + wait
        while True:
            code = self.proc.poll() if self.proc is not None else None
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                data = f.read(CHUNK)
            if data or code is not None or time.monotonic() >= deadline:
                return data, (code if len(data) < CHUNK else None)
            time.sleep(0.05)

    # -- commands of a launch agent (mpirun's orted on this node) --------------------------
    def run_command(self, command: str) -> int:
        """Start ``sh -c command`` here with the host's environment; returns its id."""
        number = len(self.commands) + 1
        log_path = os.path.join(self.root, f"command-{number}.log")
        started = threading.Event()

        def run() -> None:
            with open(log_path, "wb") as log:
                proc = subprocess.Popen(
                    ["/bin/sh", "-c", command],
                    cwd=self.tree,
                    env=self.env or dict(os.environ),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=parent_death_signal(),  # noqa: PLW1509 - see process_hosts
                )
            self.commands[number] = proc
            started.set()
            proc.wait()

        threading.Thread(target=run, daemon=True).start()
        started.wait(30)
        return number

    def command_poll(self, number: int, offset: int, wait: float) -> tuple[bytes, int | None]:
        """A command's output from ``offset`` and its exit code (as :meth:`poll`)."""
        proc = self.commands[number]
        log_path = os.path.join(self.root, f"command-{number}.log")
        deadline = time.monotonic() + wait
        while True:
            code = proc.poll()
            with open(log_path, "rb") as f:
                f.seek(offset)
                data = f.read(CHUNK)
            if data or code is not None or time.monotonic() >= deadline:
                return data, (code if len(data) < CHUNK else None)
            time.sleep(0.05)

    def _groups(self) -> list[subprocess.Popen[bytes]]:
        procs = [] if self.proc is None else [self.proc]
        return procs + list(self.commands.values())

    def signal(self, sig: int) -> None:
        """``sig`` to the host's process groups; SIGKILL also to every process below them."""
        for proc in self._groups():
            self._signal(proc, sig)

    def _signal(self, proc: subprocess.Popen[bytes], sig: int) -> None:
        if proc.poll() is not None:
            return
        below = host_descendants([proc.pid]) if sig == signal.SIGKILL else set()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        for pid in below:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def collect(self) -> dict[str, Any]:
        """Pack the host's tree but its inputs and code (model, output, checkpoints ...) on the node.

        The archive is a node-local file (:func:`pack_outputs`, the rules
        ``local_process`` publishes with); the client reads it in bounded chunks
        (:meth:`read_collected`), so no host's files are ever whole in memory,
        here, in the object store or in the client. Returns its ``size`` and
        what was ``skipped`` (``[path, why]``).
        """
        archive = os.path.join(self.root, COLLECTED)
        if not os.path.isdir(self.tree):
            return {"size": 0, "skipped": []}
        skipped = pack_outputs(self.tree, archive, skip=_NOT_COLLECTED)
        return {"size": os.path.getsize(archive), "skipped": [list(s) for s in skipped]}

    def read_collected(self, offset: int, size: int = FILES_CHUNK) -> bytes:
        """At most ``min(size, FILES_CHUNK)`` bytes of the archive :meth:`collect` wrote, from ``offset``."""
        with open(os.path.join(self.root, COLLECTED), "rb") as f:
            f.seek(offset)
            return f.read(max(0, min(size, FILES_CHUNK)))

    def cleanup(self) -> list[int]:
        """Kill what is left of the host and remove its node-local directory; the pids killed."""
        killed: list[int] = []
        for proc in self._groups():
            below = host_descendants([proc.pid])
            if proc.poll() is None:
                below.add(proc.pid)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
            for pid in below:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        shutil.rmtree(self.root, ignore_errors=True)
        return killed
