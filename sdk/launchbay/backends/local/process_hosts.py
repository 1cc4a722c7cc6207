"""The ``local_process`` host runner: every host of the request is a process group on this machine.

The job's life (staging, failure triage, outputs, Ctrl-C) is
:class:`launchbay.backends.local.control.LocalBackend`'s. This module only starts,
watches and stops the hosts (:class:`ProcessHosts`, a
:class:`~launchbay.backends.local.hosts.HostRunner`): one runtime per host, ``python -m
launchbay.runtime.train`` in a new session (its own process group), with::

    SAGEMAKER_BASE_DIR=<job dir>/<host>     LAUNCHBAY_LOCAL_PROCESS=1  LAUNCHBAY_STANDINS=1
    LAUNCHBAY_HOST_ADDRESSES={"algo-1": "127.0.0.1", ...}
    LAUNCHBAY_HOSTS_FILE=<job dir>/hosts    (/etc/hosts + "127.0.0.1 algo-N"; each
        host's runtime makes it its /etc/hosts, see launchbay.runtime._hostnames)
    LAUNCHBAY_MASTER_PORT=<a free loopback port block, one per job>
    LAUNCHBAY_SHARED_DIR=<job dir>/shared   LAUNCHBAY_GRACE_SECONDS=<grace>
    TRAINING_JOB_NAME, TRAINING_JOB_ARN, PYTHONUNBUFFERED=1
    TMPDIR=TMP=TEMP=<a fresh directory per host, removed with the job>
    (+ OMPI_ALLOW_RUN_AS_ROOT[_CONFIRM]=1 when running as root)

on top of the caller's environment and the request's ``Environment``. Stopping
a host is SIGTERM to its process group, SIGKILL after the grace period.

Nothing is left running: each host's process group, the processes below it
and any process whose environment names the job directory are killed at the
end of the job and, for jobs still running, at interpreter exit (each host also
gets SIGTERM when the thread that started it dies). The job directory is kept
for inspection.

Nothing is left in the caller's ``$TMPDIR`` either: each host gets its own
temporary directory (``launchbay-<job>-<host>-*``, short, because OpenMPI puts
Unix sockets in it) where torchelastic, OpenMPI, torch's compile caches and the
script's own ``tempfile`` calls write; it is removed when the job ends.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Mapping
from typing import Any

import launchbay
from launchbay._capacity import cpusets_of
from launchbay.backends.local.endpoints import client_endpoints
from launchbay.backends.local.hosts import POLL, RUNTIME_MARGIN, HostHandles, prepare_hosts
from launchbay.backends.local.keras import legacy_keras_environment
from launchbay.backends.local.layout import JobLayout
from launchbay.backends.local.logs import join_readers, start_watcher
from launchbay.backends.local.record import LocalJob, job_arn
from launchbay.backends.plan import JobFields, JobPlan
from launchbay.runtime.for_client import (
    CLIENT_HOST,
    GATEWAY,
    HOLDER_ENV,
    MAX_HOSTS,
    descendants,
    host_address,
    namespace_problem,
    proxy_environment,
    readable,
    write_hosts_file,
)
from launchbay.runtime.names import ENV, HOST_CPUS_ENV, SETTING
from launchbay.runtime.settings import RuntimeSettings

__all__ = ["ProcessHosts", "free_port_block"]

logger = logging.getLogger("launchbay.backends.process")


def _port_free(port: int, address: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True


def free_port_block(count: int, address: str = "127.0.0.1") -> int:
    """The first of ``count`` consecutive TCP ports free on ``address`` (best effort).

    The default is loopback (this machine's hosts); ``""`` is every address of the
    machine (a Ray node, whose hosts are reached at the node's address).
    """
    port = 0
    for _ in range(64):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((address, 0))
            port = s.getsockname()[1]
        if port + count < 65536 and all(_port_free(port + i, address) for i in range(1, count)):
            return port
    return port


def _launchbay_path() -> str | None:
    """The directory to put on PYTHONPATH so a fresh interpreter finds this launchbay."""
    import site

    parent = os.path.dirname(os.path.dirname(os.path.abspath(launchbay.__file__)))
    site_dirs = {os.path.abspath(p) for p in site.getsitepackages()}
    with contextlib.suppress(AttributeError):
        site_dirs.add(os.path.abspath(site.getusersitepackages()))
    return None if parent in site_dirs else parent


# --------------------------------------------------------------------------- process control


def parent_death_signal() -> Any:
    """A ``preexec_fn`` giving the child SIGTERM when the thread that started it dies (Linux).

    Without it, a Python process killed by SIGKILL/SIGTERM (no atexit) would leave
    its hosts running in their own sessions. The libc function is resolved here,
    in the parent, so the child only makes one foreign call between fork and
    exec: no import, no lock, safe although this process has threads.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig, sigterm = 1, int(signal.SIGTERM)

    def preexec() -> None:
        prctl(pr_set_pdeathsig, sigterm, 0, 0, 0)

    return preexec


def host_descendants(roots: list[int]) -> set[int]:
    """Every process below ``roots`` (the runtime's process table: /proc, or ps)."""
    found: set[int] = set()
    for root in roots:
        found.update(descendants(root, include_zombies=True))
    return found


def _job_processes(job_dir: str) -> set[int]:
    """Processes whose environment places them in ``job_dir`` (Linux ``/proc``)."""
    markers = (
        f"SAGEMAKER_BASE_DIR={job_dir}{os.sep}".encode(),
        f"LAUNCHBAY_SHARED_DIR={job_dir}{os.sep}".encode(),
    )
    me = os.getpid()
    found: set[int] = set()
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = b"\0" + f.read()
        except OSError:
            continue
        if any(b"\0" + marker in environ for marker in markers):
            found.add(int(name))
    return found


def _is_runtime(pid: int) -> bool:
    """Whether ``pid`` is a host's runtime (``python -m launchbay.runtime.train``)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"\0launchbay.runtime.train" in f.read()
    except OSError:
        return False


def _kill(pids: set[int] | list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _still_running(proc: subprocess.Popen[bytes]) -> bool:
    """Whether ``proc`` has not exited yet (what a host's log watcher asks)."""
    return proc.poll() is None


# --------------------------------------------------------------------------- the backend


class ProcessHosts:
    """Runs each host of a local job as a process group (a :class:`~launchbay.backends.local.hosts.HostRunner`)."""

    def check_can_run(self, plan: JobPlan) -> None:
        """Refuse a bad ``LAUNCHBAY_HOST_NETWORK`` before anything starts."""
        network_setting(plan)

    def check_name(self, name: str, job_dir: str) -> None:
        """Process groups are not named after the job: no other job's hosts can clash."""

    def host_view(self, plan: JobPlan) -> JobFields:
        """The hosts' trees are the job directory's own: the plan as it is."""
        return plan

    def prepare(self, job: LocalJob) -> None:
        prepare_hosts(job)

    def start(self, job: LocalJob) -> HostHandles:
        """One runtime per host in its own process group, and a watcher of its log file."""
        layout = job.layout
        network = _JobNetwork.start(job)
        if network is not None:
            _NETWORKS[layout.job_dir] = network
        env = self._host_environment(job, network)
        if network is None:
            # Hosts on this machine's network share its /dev/shm (a host of a job network has
            # its own): Open MPI's segments go to a directory of the job's, removed with it.
            shm = self._job_shm_dir(job)
            if shm is not None:
                for name in _OMPI_SHM_DIRS:
                    env.setdefault(name, shm)
        preexec = parent_death_signal()
        cpus = cpusets_of(len(job.hosts))  # each host's share of this machine's CPUs
        procs: dict[str, subprocess.Popen[bytes]] = {}
        watchers: list[threading.Thread] = []
        try:
            for index, host in enumerate(job.hosts):
                tmp = self._host_tmpdir(job, host)
                host_env = dict(
                    env, SAGEMAKER_BASE_DIR=layout.host_dir(host), TMPDIR=tmp, TMP=tmp, TEMP=tmp
                )
                share = cpus[index]
                if share is not None:
                    host_env[HOST_CPUS_ENV] = share
                if job.gpus is not None:  # this host's share of the GPUs (launchbay/_capacity.py)
                    host_env["CUDA_VISIBLE_DEVICES"] = ",".join(job.gpus[host])
                # The host writes its log file itself: every line is kept even if this
                # process dies (a killed driver, a closed notebook kernel).
                log_fd = os.open(
                    layout.log_file(host), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644
                )
                try:
                    proc = subprocess.Popen(
                        [sys.executable, "-m", "launchbay.runtime.train"],
                        cwd=layout.host_dir(host),
                        env=host_env,
                        stdin=subprocess.DEVNULL,
                        stdout=log_fd,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        preexec_fn=preexec,  # noqa: PLW1509 - see parent_death_signal
                    )
                finally:
                    os.close(log_fd)
                procs[host] = proc
                watchers.append(start_watcher(job, host, functools.partial(_still_running, proc)))
        except BaseException:
            # The job never gets these handles: the hosts started so far go now (teardown
            # then finds nothing of the job's left).
            for proc in procs.values():
                _killpg(proc.pid, signal.SIGKILL)
            raise
        return HostHandles(procs, tuple(watchers))

    def _host_tmpdir(self, job: LocalJob, host: str) -> str:
        """A fresh temporary directory for ``host``, in the caller's ``$TMPDIR``; removed with the job.

        Not under the job dir: OpenMPI puts Unix sockets (108-byte path limit) in it.
        """
        path = tempfile.mkdtemp(prefix=f"launchbay-{job.name[:24]}-{host}-")
        with open(os.path.join(job.layout.job_dir, _TMPDIRS_FILE), "a", encoding="utf-8") as f:
            f.write(path + "\n")
        return path

    def _job_shm_dir(self, job: LocalJob) -> str | None:
        """A fresh directory of the job's in ``/dev/shm`` (``launchbay-<job>-*``); removed with
        the job, as the hosts' temporary directories are. None where there is no ``/dev/shm``."""
        if not os.path.isdir(_SHM):
            return None
        try:
            path = tempfile.mkdtemp(prefix=f"launchbay-{job.name}-", dir=_SHM)
        except OSError:
            return None
        with open(os.path.join(job.layout.job_dir, _TMPDIRS_FILE), "a", encoding="utf-8") as f:
            f.write(path + "\n")
        return path

    def _host_environment(self, job: LocalJob, network: _JobNetwork | None) -> dict[str, str]:
        layout = job.layout
        # A job's namespaces are its own: values of another job's (inherited when launchbay
        # runs inside one of its hosts, or given in environment=) are dropped.
        env = _without_job_namespaces(os.environ)
        addresses = {h: "127.0.0.1" for h in job.hosts}
        if network is not None:
            addresses = {h: host_address(i) for i, h in enumerate(job.hosts)}
            env.update(proxy_environment(job.hosts))
        env.update(_without_job_namespaces(job.plan.environment))
        # Keras 2 for a Keras-2-era TensorFlow on this machine's newer one (the user's wins).
        env.update(legacy_keras_environment(job.plan.request, env))
        if network is not None:
            env[HOLDER_ENV] = str(network.switch_pid)
            env.update(client_endpoints(env, CLIENT_HOST))
        port = free_port_block(2 * len(job.hosts) + 2)
        hosts_file = os.path.join(layout.job_dir, "hosts")
        settings = RuntimeSettings(
            local_process=True,
            standins=True,
            host_addresses=addresses,
            hosts_file=write_hosts_file(
                hosts_file,
                job.hosts,
                addresses if network else None,
                {CLIENT_HOST: GATEWAY} if network else None,
            ),
            master_port=port,
            shared_dir=layout.shared_dir,
            grace_seconds=job.grace,
        )
        env.update(settings.to_environ())
        env.update(
            {
                "PYTHONUNBUFFERED": "1",
                "TRAINING_JOB_NAME": job.name,
                "TRAINING_JOB_ARN": job_arn(job.name, env),
            }
        )
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
            env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
        extra_path = _launchbay_path()
        if extra_path:
            current = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
            if extra_path not in current:
                env["PYTHONPATH"] = os.pathsep.join([extra_path, *current])
        return env

    def exit_codes(self, job: LocalJob) -> dict[str, int | None]:
        return {host: proc.poll() for host, proc in job.procs.items()}

    def running(self, job: LocalJob) -> list[str]:
        return [host for host, code in self.exit_codes(job).items() if code is None]

    def signal(self, job: LocalJob, hosts: list[str], sig: signal.Signals) -> None:
        """``sig`` to each host's process group; SIGKILL also to every process below it."""
        pids = [job.procs[h].pid for h in hosts]
        below = host_descendants(pids) if sig == signal.SIGKILL else set()
        for pid in pids:
            _killpg(pid, sig)
        _kill(below, sig)

    def reap(self, job: LocalJob, hosts: list[str]) -> None:
        for host in hosts:
            with contextlib.suppress(subprocess.TimeoutExpired):
                job.procs[host].wait(timeout=5)

    def teardown(self, job: LocalJob) -> None:
        """Make sure no process of the job is left, then let the log readers finish."""
        leftovers = _job_processes(job.layout.job_dir)
        if leftovers:
            logger.debug("Killing %d leftover process(es) of job %s", len(leftovers), job.name)
            _kill(leftovers, signal.SIGKILL)
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline and _job_processes(job.layout.job_dir):
                time.sleep(POLL)
        _remove_tmpdirs(job.layout.job_dir)
        _stop_network(job.layout.job_dir)
        join_readers(job.readers)

    def hard_kill(self, job: LocalJob) -> None:
        roots = [p.pid for p in job.procs.values() if p.poll() is None]
        below = host_descendants(roots)
        for pid in roots:
            _killpg(pid, signal.SIGKILL)
        _kill(below | _job_processes(job.layout.job_dir), signal.SIGKILL)
        _remove_tmpdirs(job.layout.job_dir)
        _stop_network(job.layout.job_dir)

    def stop_orphan_hosts(self, name: str, layout: JobLayout, grace: float) -> None:
        """Stop the hosts of a job whose client died: SIGTERM, SIGKILL after the grace period.

        A host's runtime gets SIGTERM by itself when the client dies (parent-death
        signal), forwards it to its ranks and records it in the shared directory's
        ``stop`` file; a second SIGTERM would make it kill at once, so the
        runtimes are signalled here only if no ``stop`` file appears within 2 s.
        """
        job_dir = layout.job_dir
        stop_file = os.path.join(job_dir, "shared", "stop")
        deadline = time.monotonic() + 2.0  # the runtimes' own SIGTERM may still be on its way
        while time.monotonic() < deadline and not os.path.exists(stop_file):
            if not _job_processes(job_dir):
                break
            time.sleep(POLL)
        if not os.path.exists(stop_file):
            _kill({pid for pid in _job_processes(job_dir) if _is_runtime(pid)}, signal.SIGTERM)
        deadline = time.monotonic() + grace + RUNTIME_MARGIN
        while time.monotonic() < deadline and _job_processes(job_dir):
            time.sleep(0.1)
        leftovers = _job_processes(job_dir)
        if leftovers:
            logger.warning("Killing %d process(es) left of job %s", len(leftovers), name)
            _kill(leftovers, signal.SIGKILL)
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline and _job_processes(job_dir):
                time.sleep(POLL)
        _remove_tmpdirs(job_dir)

    def hosts_left(self, job_dir: str) -> bool:
        return bool(_job_processes(job_dir))


# --------------------------------------------------------------------------- job networks

#: Set to ``shared`` (caller's environment or the job's ``environment=``) to run the
#: hosts on this machine's network instead of a network of their own.
NETWORK_SETTING = SETTING.HOST_NETWORK
_NETWORK_VALUES = ("own", "shared")
_NETWORK_START_SECONDS = 10.0
_NETWORKS: dict[str, _JobNetwork] = {}
_network_warned: list[str] = []


def network_setting(source: JobFields | Mapping[str, Any]) -> str:
    """``own`` or ``shared``: the job's ``environment=``, else the caller's, else ``own``.

    ``source`` is the job's plan (a bare request is derived the same way).
    """
    environment = JobFields.of(source).environment
    raw = str(environment.get(NETWORK_SETTING, os.environ.get(NETWORK_SETTING, "own")))
    setting = raw.strip().lower() or "own"
    if setting not in _NETWORK_VALUES:
        raise ValueError(
            f"Invalid {NETWORK_SETTING}={raw!r}. Accepted: own (each host its own network "
            "namespace, the default), shared (this machine's network)."
        )
    return setting


class _JobNetwork:
    """The job's switch and relay (``python -m launchbay.runtime._netns``), one per job."""

    def __init__(self, proc: subprocess.Popen[bytes], switch_pid: int):
        self.proc = proc
        self.switch_pid = switch_pid

    @classmethod
    def start(cls, job: LocalJob) -> _JobNetwork | None:
        """The job's network, or None (shared network) with one warning per process."""
        environment = job.plan.environment
        setting = network_setting(job.plan)
        names = str(environment.get(SETTING.HOST_NAMES, os.environ.get(SETTING.HOST_NAMES, "")))
        mode = names.strip().lower()
        if mode in ("nss_wrapper", "off"):
            _no_private_opt_ml(f"LAUNCHBAY_HOST_NAMES={mode} makes no mount namespace")
            return None
        if setting == "shared":
            return None  # asked for; the hosts still get their own /opt/ml
        if len(job.hosts) > MAX_HOSTS:
            _shared_network(f"more than {MAX_HOSTS} hosts")
            return None
        if not sys.platform.startswith("linux"):
            _shared_network(f"needs Linux (this is {sys.platform})")
            return None
        env = _without_job_namespaces(os.environ)
        extra_path = _launchbay_path()
        if extra_path:
            env["PYTHONPATH"] = os.pathsep.join(
                [extra_path, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
            )
        # The hosts in order (host_address(i) is the i-th) and their logs: the relay's lines
        # about a host (a target it could not reach, and why) go to that host's log.
        host_logs = [f"--host={h}={job.layout.log_file(h)}" for h in job.hosts]
        proc = subprocess.Popen(
            [sys.executable, "-m", "launchbay.runtime._netns", *host_logs],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # Ctrl-C is the job's to handle, not the switch's
        )
        assert proc.stdout is not None
        line = b""
        if readable([proc.stdout], _NETWORK_START_SECONDS):
            line = proc.stdout.readline()
        word, _, rest = line.decode(errors="replace").strip().partition(" ")
        if word == "ready" and rest.isdigit():
            return cls(proc, int(rest))
        _end(proc)
        _shared_network(rest or "the job's network did not start")
        return None


def _without_job_namespaces(environ: Mapping[str, Any]) -> dict[str, str]:
    """``environ`` without the variables that place a process in a job's namespaces."""
    return {str(k): str(v) for k, v in environ.items() if k not in ENV.JOB_ONLY}


def _no_private_opt_ml(reason: str) -> None:
    if reason not in _network_warned:
        _network_warned.append(reason)
        warnings.warn(
            f"The hosts of this local_process job get no /opt/ml of their own ({reason}): "
            "a script that writes to a literal /opt/ml path writes to this machine's "
            "/opt/ml, shared by every host and left out of model.tar.gz and output.tar.gz. "
            "Use the SM_* paths (SM_MODEL_DIR, SM_OUTPUT_DATA_DIR), or Docker mode "
            "(instance_type='local'); docs/local.md.",
            stacklevel=3,
        )


def _shared_network(reason: str) -> None:
    problem = namespace_problem()
    if problem is not None:
        _no_private_opt_ml(problem)
    if reason not in _network_warned:
        _network_warned.append(reason)
        warnings.warn(
            f"The hosts of this local_process job share this machine's network ({reason}): "
            "they cannot each bind the same port, and algo-N all resolve to 127.0.0.1. "
            "Scripts that do (a group of their own on 127.0.0.1:29500 on every host, "
            "TF_CONFIG workers at algo-N:7777) need root or unprivileged user namespaces "
            "here, or Docker mode (instance_type='local'); docs/local.md.",
            stacklevel=2,
        )


def _end(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        if proc.stdin is not None:
            proc.stdin.close()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def _stop_network(job_dir: str) -> None:
    network = _NETWORKS.pop(job_dir, None)
    if network is not None:
        _end(network.proc)


#: The per-host temporary directories of a job (and its /dev/shm directory), one per line,
#: in its job dir.
_TMPDIRS_FILE = "tmpdirs.txt"
_SHM = "/dev/shm"
#: Where Open MPI 4 (vader) and 5 (sm) put their shared-memory files.
_OMPI_SHM_DIRS = ("OMPI_MCA_btl_vader_backing_directory", "OMPI_MCA_btl_sm_backing_directory")


def _remove_tmpdirs(job_dir: str) -> None:
    """Remove the job's per-host temporary directories (listed in its job dir)."""
    listing = os.path.join(job_dir, _TMPDIRS_FILE)
    try:
        with open(listing, encoding="utf-8") as f:
            paths = [line.strip() for line in f if line.strip()]
    except OSError:
        return
    for path in paths:
        if os.path.basename(path).startswith("launchbay-"):
            shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.unlink(listing)
