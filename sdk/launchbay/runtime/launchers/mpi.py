"""The MPI launchers: ``mpirun`` over SSH (SageMaker, containers), or on one machine.

**Over SSH** (the toolkit's way). The master (first distribution host) starts
sshd, waits until every worker's sshd answers, then runs::

    mpirun --host algo-1:P,algo-2:P -np T --allow-run-as-root --display-map --tag-output
        -mca btl_tcp_if_include eth0 -mca oob_tcp_if_include eth0 -mca plm_rsh_no_tree_spawn 1
        -bind-to none -map-by slot -mca pml ob1 -mca btl ^openib
        -mca orte_abort_on_non_zero_status 1 -mca btl_vader_single_copy_mechanism none
        -x NCCL_MIN_NRINGS=4 -x NCCL_SOCKET_IFNAME=eth0 -x NCCL_DEBUG=INFO
        -x LD_LIBRARY_PATH -x PATH <custom_mpi_options> [EFA -x ...] -x SM_... ...
        python -m mpi4py -m launchbay.runtime._bootstrap train.py --arg value

(``--host algo-1,algo-2`` with one process per host). ``python -m mpi4py``
makes an uncaught exception abort every rank. Workers start sshd, wait for the
MPI daemon (orted/prted) to appear and to finish, then for the master's status
file ``/tmp/done.<master>`` (written over ssh, holding the exit status), and
exit. Every wait has a timeout (``LAUNCHBAY_STARTUP_TIMEOUT`` to come up, 60 s
of an unreachable master), unlike the toolkit's unbounded waits. Each host
writes its own environment to ``<ranks dir>/host-env.json``, which the bootstrap
loads, so remote ranks see their own host's SM_CURRENT_HOST (the toolkit
forwards the master's). The toolkit's ``LD_PRELOAD`` gethostname shim is not used.

**On a Ray cluster** (``LAUNCHBAY_RAY=1``): no SSH either. The master's ``mpirun``
reaches the other hosts through ``OMPI_MCA_plm_rsh_agent``, which the Ray backend
sets to a launch agent that asks the host's actor to start ``orted`` on its node
(``launchbay.backends.ray.rsh``). Host trees differ from node to node, so
``LAUNCHBAY_HOST_ENV_FILE`` is given relative to ``$SAGEMAKER_BASE_DIR``: each
rank's bootstrap finds its own host's environment under the tree its ``orted``
was started in. Workers wait for ``<tree>/output/mpi-done`` (the master's exit
status), which the master writes through the same agent when mpirun ends.

**On one machine** (``LAUNCHBAY_LOCAL_PROCESS=1``): no SSH. Only the master
host's runtime starts one ``mpirun -np hosts*P --oversubscribe`` on localhost;
each rank's bootstrap becomes a rank of host ``hosts[rank // P]`` using the
environment that host's runtime published in ``<shared>/mpi/env/<host>.json``.
Other hosts' runtimes publish their environment, pump their own ranks' output,
and wait for ``<shared>/mpi/done.json`` (the master's exit status) while the
master's heartbeat (``<shared>/mpi/heartbeat``) stays fresh.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import os
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from launchbay.runtime import _procs, _records
from launchbay.runtime._shared import SharedDir
from launchbay.runtime.errors import TrainingSetupError
from launchbay.runtime.launchers import torchrun
from launchbay.runtime.launchers.base import (
    BOOTSTRAP_MODULE,
    LaunchContext,
    LaunchPlan,
    ProcessSpec,
    python_target,
    shell_command,
)
from launchbay.runtime.launchers.torchrun import EFA_NCCL_INSTANCES, EFA_RDMA_INSTANCES
from launchbay.runtime.names import HP

__all__ = [
    "STATUS_FILE_PREFIX",
    "HOST_ENV_FILE",
    "parse_custom_mpi_options",
    "rank_command",
    "mpirun_ssh_argv",
    "smddp_argv",
    "mpirun_local_argv",
    "num_processes",
    "build",
    "build_smddp",
    "build_smddp_local",
    "tcp_reachable",
]

STATUS_FILE_PREFIX = "/tmp/done."
#: Where a host of an MPI job over SSH publishes its rank environment, in its ranks dir.
HOST_ENV_FILE = "host-env.json"
MPI_OPTIONS = HP.MPI_CUSTOM_OPTIONS
SMDDP_OPTIONS = HP.SMDDP_CUSTOM_MPI_OPTIONS
SSHD = "/usr/sbin/sshd"
HEARTBEAT_STALE_SECONDS = 30.0
MASTER_UNREACHABLE_SECONDS = 60.0
STATUS_FILE_WAIT_SECONDS = 60.0
FORWARDED = (
    "PYTHONPATH",
    "PYTHONUNBUFFERED",
    "CURRENT_HOST",
    "SAGEMAKER_JOB_NAME",
    "SAGEMAKER_REGION",
    "SMDEBUG_CONFIG_FILE_PATH",
    "MASTER_ADDR",
    "MASTER_PORT",
    "LAUNCHBAY_RANKS_DIR",
    "LAUNCHBAY_HOST_ENV_FILE",
    "LAUNCHBAY_SMDDP",
    "LAUNCHBAY_STANDINS",
)


def parse_custom_mpi_options(options: str) -> tuple[str, list[str]]:
    """``(NCCL_DEBUG value, other options)`` from ``custom_mpi_options`` (the toolkit's parse)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--NCCL_DEBUG", default="INFO", type=str)
    known, rest = parser.parse_known_args((options or "").split())
    return known.NCCL_DEBUG, rest


def num_processes(ctx: LaunchContext) -> int:
    """``sagemaker_mpi_num_processes`` if given, else processes per host x hosts."""
    configured = ctx.env.additional_framework_parameters.get(HP.MPI_NUM_PROCESSES)
    if configured:
        return int(configured)
    return ctx.env.processes_per_host() * len(ctx.env.distribution_hosts)


def rank_command(ctx: LaunchContext, *, mpi4py: bool = True) -> list[str]:
    """What each rank runs: ``python -m mpi4py -m <bootstrap> <target>`` (or ``--exec`` for commands)."""
    if ctx.entry.is_python:
        prefix = [ctx.python, "-m", "mpi4py"] if mpi4py else [ctx.python]
        return prefix + ["-m", BOOTSTRAP_MODULE, *python_target(ctx.entry, ctx.args)]
    return [ctx.python, "-m", BOOTSTRAP_MODULE, "--exec", *shell_command(ctx.entry, ctx.args)]


def _path_vars(rank_env: dict[str, str]) -> list[str]:
    """``-x LD_LIBRARY_PATH -x PATH`` (LD_LIBRARY_PATH only when set, to spare mpirun's warning)."""
    names = [n for n in ("LD_LIBRARY_PATH", "PATH") if n in rank_env or n == "PATH"]
    return [part for n in names for part in ("-x", n)]


def _forwarded_names(rank_env: dict[str, str]) -> list[str]:
    names = sorted(k for k in rank_env if k.startswith("SM_"))
    return names + [k for k in FORWARDED if k in rank_env]


def mpirun_ssh_argv(
    ctx: LaunchContext, rank_env: dict[str, str], options_key: str = MPI_OPTIONS
) -> list[str]:
    """The master's mpirun line over SSH (the toolkit's options)."""
    env = ctx.env
    ppn = env.processes_per_host()
    addresses = [ctx.settings.address(h) for h in env.distribution_hosts]
    host_list = addresses if ppn == 1 else [f"{a}:{ppn}" for a in addresses]
    iface = str(env.network_interface_name)
    nccl_debug, custom = parse_custom_mpi_options(
        str(env.additional_framework_parameters.get(options_key, ""))
    )
    argv = [
        "mpirun", "--host", ",".join(host_list), "-np", str(num_processes(ctx)),
        "--allow-run-as-root", "--display-map", "--tag-output",
        "-mca", "btl_tcp_if_include", iface,
        "-mca", "oob_tcp_if_include", iface,
        "-mca", "plm_rsh_no_tree_spawn", "1",
        "-bind-to", "none", "-map-by", "slot",
        "-mca", "pml", "ob1", "-mca", "btl", "^openib",
        "-mca", "orte_abort_on_non_zero_status", "1",
        "-mca", "btl_vader_single_copy_mechanism", "none",
        "-x", "NCCL_MIN_NRINGS=4",
        "-x", f"NCCL_SOCKET_IFNAME={iface}",
        "-x", f"NCCL_DEBUG={nccl_debug}",
    ]  # fmt: skip
    argv += _path_vars(rank_env)
    argv += custom
    if env.current_instance_type in EFA_NCCL_INSTANCES:
        argv += ["-x", "FI_PROVIDER=efa", "-x", "NCCL_PROTO=simple"]
    if env.current_instance_type in EFA_RDMA_INSTANCES:
        argv += ["-x", "FI_EFA_USE_DEVICE_RDMA=1"]
    for credential in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        if credential in rank_env:
            argv += ["-x", credential]
    for name in _forwarded_names(rank_env):
        argv += ["-x", name]
    return argv + rank_command(ctx)


def smddp_argv(ctx: LaunchContext, rank_env: dict[str, str]) -> list[str]:
    """The toolkit's smdistributed-dataparallel mpirun line (SageMaker GPU hosts with smddprun)."""
    env = ctx.env
    hosts = env.distribution_hosts
    ppn = env.processes_per_host()
    iface = str(env.network_interface_name)
    addresses = [ctx.settings.address(h) for h in hosts]
    multi = len(hosts) > 1
    host_list = [f"{a}:{ppn}" for a in addresses] if multi else addresses
    nccl_debug, custom = parse_custom_mpi_options(
        str(env.additional_framework_parameters.get(HP.SMDDP_CUSTOM_MPI_OPTIONS, ""))
    )
    instance_type = (
        env.additional_framework_parameters.get(HP.INSTANCE_TYPE) or env.current_instance_type
    )
    flag = "SMDATAPARALLEL_USE_HOMOGENEOUS=1" if multi else "SMDATAPARALLEL_USE_SINGLENODE=1"
    argv = [
        "mpirun", "--host", ",".join(host_list), "-np", str(ppn * len(hosts)),
        "--allow-run-as-root", "--tag-output", "--oversubscribe",
        "-mca", "btl_tcp_if_include", iface,
        "-mca", "oob_tcp_if_include", iface,
        "-mca", "plm_rsh_no_tree_spawn", "1",
        "-mca", "pml", "ob1", "-mca", "btl", "^openib",
        "-mca", "orte_abort_on_non_zero_status", "1",
        "-mca", "btl_vader_single_copy_mechanism", "none",
        "-mca", "plm_rsh_num_concurrent", str(len(hosts)),
        "-x", f"NCCL_SOCKET_IFNAME={iface}",
        "-x", f"NCCL_DEBUG={nccl_debug}",
    ]  # fmt: skip
    argv += _path_vars(rank_env)
    argv += ["-x", flag, "-x", "FI_PROVIDER=efa", "-x", "RDMAV_FORK_SAFE=1"]
    argv += custom
    if instance_type in EFA_NCCL_INSTANCES:
        argv += ["-x", "NCCL_PROTO=simple"]
    if instance_type in EFA_RDMA_INSTANCES:
        argv += ["-x", "FI_EFA_USE_DEVICE_RDMA=1"]
    if multi:
        argv += [
            "-x", f"SMDATAPARALLEL_SERVER_ADDR={ctx.settings.address(env.master_hostname)}",
            "-x", "SMDATAPARALLEL_SERVER_PORT=7592",
            "-x", f"SAGEMAKER_INSTANCE_TYPE={instance_type}",
        ]  # fmt: skip
    for name in _forwarded_names(rank_env):
        argv += ["-x", name]
    return argv + ["smddprun"] + rank_command(ctx)


def mpirun_local_argv(ctx: LaunchContext, options_key: str = MPI_OPTIONS) -> list[str]:
    """One mpirun for every rank of every host, on this machine (no SSH, no ``--host``)."""
    _, custom = parse_custom_mpi_options(
        str(ctx.env.additional_framework_parameters.get(options_key, ""))
    )
    argv = [
        "mpirun", "-np", str(num_processes(ctx)),
        "--allow-run-as-root", "--oversubscribe",
        "-bind-to", "none", "-map-by", "slot",
        "-mca", "pml", "ob1", "-mca", "btl", "^openib",
        "-mca", "orte_abort_on_non_zero_status", "1",
        "-mca", "btl_vader_single_copy_mechanism", "none",
    ]  # fmt: skip
    return argv + custom + rank_command(ctx)


# --------------------------------------------------------------------------- helpers


def tcp_reachable(address: str, port: int, timeout: float = 1.0) -> bool:
    """Whether something accepts TCP connections at ``address:port``."""
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return True
    except OSError:
        return False


def _write_json(path: str, obj: dict[str, object]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    _records.write_record(path, obj)


def _require_mpi(ctx: LaunchContext) -> None:
    if shutil.which("mpirun", path=ctx.base_env.get("PATH")) is None:
        raise TrainingSetupError(
            "MPI distribution needs 'mpirun' on PATH; install OpenMPI (e.g. apt-get install "
            "openmpi-bin) or choose another distribution."
        )
    if ctx.entry.is_python and importlib.util.find_spec("mpi4py") is None:
        raise TrainingSetupError(
            "MPI distribution runs Python entry points with 'python -m mpi4py'; install mpi4py "
            "(pip install mpi4py) in the training environment."
        )


def _host_plan(
    ctx: LaunchContext,
    launcher: str,
    processes: list[ProcessSpec],
    ranks: tuple[int, int, int],
    host_env_file: str,
    rank_env: dict[str, str],
    *,
    fifo: bool = False,
) -> LaunchPlan:
    """This host's plan: ``ranks`` is (host index, processes per host, world size); the ranks'
    environment is written to ``host_env_file`` before they start and removed after."""
    index, ppn, total = ranks
    return LaunchPlan(
        launcher=launcher,
        processes=processes,
        world_size=total,
        host_ranks=_host_ranks(ctx, index, ppn, total),
        label_ranks=total > 1,
        fifo=fifo,
        before_start=[lambda: _write_host_env(host_env_file, rank_env, ctx.code_dir)],
        on_finish=[_forget_host_env(host_env_file)],
    )


def _host_ranks(ctx: LaunchContext, index: int, ppn: int, total: int) -> dict[int, int]:
    hosts = len(ctx.env.distribution_hosts)
    ranks = {r: r % ppn for r in range(total) if min(r // ppn, hosts - 1) == index}
    return ranks


def _rank_env(ctx: LaunchContext) -> dict[str, str]:
    env = dict(ctx.base_env)
    for name in ("LAUNCHBAY_RANK", "LAUNCHBAY_LOCAL_RANK"):
        env.pop(name, None)
    return env


class _Heartbeat:
    """Touches a file at most once per ``interval`` seconds."""

    def __init__(self, path: str, interval: float = 1.0):
        self.path = path
        self.interval = interval
        self._last = float("-inf")

    def __call__(self, now: float) -> None:
        if now - self._last >= self.interval:
            self._last = now
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(self.path, "a", encoding="utf-8"):
                pass
            os.utime(self.path)


@dataclass
class _FilesGate:
    """Ready once every file exists; a timeout is a setup error."""

    files: list[str]
    timeout: float
    what: str
    started: float | None = None

    def poll(self, now: float) -> bool:
        """True once every file exists."""
        if self.started is None:
            self.started = now
        if all(os.path.exists(f) for f in self.files):
            return True
        if now - self.started > self.timeout:
            missing = [f for f in self.files if not os.path.exists(f)]
            raise TrainingSetupError(
                f"Timed out after {self.timeout:.0f} s waiting for {self.what}: {missing}"
            )
        return False


@dataclass
class _ReachableGate:
    """Ready once every address accepts connections on ``port``."""

    addresses: list[str]
    port: int
    timeout: float
    started: float | None = None
    _checked: float = float("-inf")

    def poll(self, now: float) -> bool:
        """True once every address answers (checked at most once a second)."""
        if self.started is None:
            self.started = now
        if now - self._checked < 1.0:
            return False
        self._checked = now
        pending = [a for a in self.addresses if not tcp_reachable(a, self.port)]
        self.addresses = pending
        if not pending:
            return True
        if now - self.started > self.timeout:
            raise TrainingSetupError(
                f"Timed out after {self.timeout:.0f} s waiting for MPI workers' sshd on port "
                f"{self.port}: {pending}"
            )
        return False


@dataclass
class _FailingGate:
    """Waits for ``first`` (bounded), then fails with ``message``: a master that cannot start."""

    first: _ReachableGate
    message: str

    def poll(self, now: float) -> bool:
        """Never opens: raises once ``first`` is open or has timed out."""
        try:
            if not self.first.poll(now):
                return False
        except TrainingSetupError:
            pass
        raise TrainingSetupError(self.message)


class _LocalDoneWaiter:
    """A non-master host in local MPI mode: wait for the master's done file."""

    def __init__(
        self,
        done_file: str,
        heartbeat: str,
        startup_timeout: float,
        shared: SharedDir | None = None,
        master: str = "",
        what: str = "MPI",
    ):
        self.what = what
        self.done_file = done_file
        self.heartbeat = heartbeat
        self.startup_timeout = startup_timeout
        self.shared = shared
        self.master = master
        self.reason: str | None = None
        self._started: float | None = None

    def _master_failed(self) -> int | None:
        """The master's exit code if its runtime marked itself failed before reporting."""
        if self.shared is None or not self.master:
            return None
        mark = self.shared.host_marks().get(self.master)
        if not mark or mark.get("cause") != "failed" or not mark.get("error"):
            return None
        self.reason = (
            f"The {self.what} master {self.master} failed before starting the job, so this host "
            f"has no ranks to run: {mark['error']}"
        )
        code = mark.get("exit_code")
        return code if isinstance(code, int) and code > 0 else 1

    def poll(self, now: float) -> int | None:
        """The master's exit status once reported; 1 if the master failed, never came or went silent."""
        if self._started is None:
            self._started = now
        if os.path.exists(self.done_file):
            try:
                with open(self.done_file, encoding="utf-8") as f:
                    return int(json.load(f).get("exit_code", 1))
            except (OSError, ValueError, TypeError):
                return None
        failed = self._master_failed()
        if failed is not None:
            return failed
        try:
            age = time.time() - os.stat(self.heartbeat).st_mtime
        except OSError:
            if now - self._started > self.startup_timeout:
                self.reason = (
                    f"The {self.what} master did not start within {self.startup_timeout:.0f} s "
                    "(LAUNCHBAY_STARTUP_TIMEOUT)."
                )
                return 1
            return None
        if age > HEARTBEAT_STALE_SECONDS:
            self.reason = (
                f"The {self.what} master's runtime stopped responding ({age:.0f} s without "
                "heartbeat)."
            )
            return 1
        return None


def _daemon_running() -> bool:
    for pid in _procs.descendants():
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
                if f.read().strip() in ("orted", "prted"):
                    return True
        except OSError:
            continue
    return False


class _SshWorkerWaiter:
    """A worker host over SSH: wait for the MPI daemon to come and go, then the status file."""

    def __init__(
        self, master_address: str, status_file: str, ranks_dir: str, startup_timeout: float
    ):
        self.master_address = master_address
        self.status_file = status_file
        self.ranks_dir = ranks_dir
        self.startup_timeout = startup_timeout
        self.reason: str | None = None
        self._started: float | None = None
        self._seen_daemon = False
        self._daemon_gone: float | None = None
        self._last_check = float("-inf")
        self._unreachable_since: float | None = None

    def _status(self) -> int | None:
        try:
            with open(self.status_file, encoding="utf-8") as f:
                text = f.read().strip()
        except OSError:
            return None
        code = int(text) if text.lstrip("-").isdigit() else 0
        if code:
            try:
                with open(self.status_file + ".reason", encoding="utf-8") as f:
                    why = f.read(2000).strip()
            except OSError:
                why = ""
            if why:
                self.reason = (
                    f"The MPI master {self.master_address} failed before starting the job, "
                    f"so this host has no ranks to run: {why}"
                )
        return code

    def _local_failure(self) -> int:
        _, ends = _records.read_records(self.ranks_dir)
        return 1 if any(r.get("exit_code") for r in ends.values()) else 0

    def poll(self, now: float) -> int | None:
        """The master's status once written; bounded waits for the daemon and the master."""
        if self._started is None:
            self._started = now
        if now - self._last_check < 0.5:
            return None
        self._last_check = now
        status = self._status()
        if status is not None:
            return status
        running = _daemon_running()
        if running:
            self._seen_daemon = True
            self._daemon_gone = None
        elif self._seen_daemon and self._daemon_gone is None:
            self._daemon_gone = now
        if self._daemon_gone is not None and now - self._daemon_gone > STATUS_FILE_WAIT_SECONDS:
            return self._local_failure()
        if not self._seen_daemon and now - self._started > self.startup_timeout:
            self.reason = f"No MPI job reached this host within {self.startup_timeout:.0f} s."
            return 1
        if not running:
            if tcp_reachable(self.master_address, 22):
                self._unreachable_since = None
            elif self._unreachable_since is None:
                self._unreachable_since = now
            elif now - self._unreachable_since > MASTER_UNREACHABLE_SECONDS:
                self.reason = f"The MPI master {self.master_address} became unreachable."
                return self._local_failure() or (0 if self._seen_daemon else 1)
        return None


def _notify_workers(
    addresses: list[str], status_file: str, exit_code: int, reason: str | None = None
) -> None:
    """Write the status file on every worker over ssh, then give them up to 30 s to exit.

    With ``reason`` (the master failed before mpirun ran), ``<status file>.reason``
    is written first, so the worker can say why the job ended.
    """
    ssh = shutil.which("ssh") or "/usr/bin/ssh"
    command = f"printf %s {int(exit_code)} > {status_file}"
    if reason:
        command = f"printf %s {shlex.quote(reason)} > {status_file}.reason; {command}"
    for address in addresses:
        for _attempt in range(5):
            result = subprocess.run(
                [ssh, "-o", "StrictHostKeyChecking=no", address, command],
                capture_output=True,
                timeout=30,
                check=False,
            )  # fmt: skip
            if result.returncode == 0:
                break
            time.sleep(1)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(tcp_reachable(a, 22) for a in addresses):
        time.sleep(1)


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def _write_host_env(path: str, env: dict[str, str], cwd: str) -> None:
    """Publish a host's rank environment, readable by its owner only (0600 in 0700).

    The environment holds the job's secrets (AWS credentials, every ``environment=``
    value): the file is made with mode 0600 from the start (never widened by a
    umask, never readable between create and chmod), in a directory of mode 0700,
    and it is removed when the host's part of the job ends
    (:func:`_forget_host_env`).
    """
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    tmp = f"{path}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"env": env, "cwd": cwd}, f)
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


def _forget_host_env(path: str) -> Callable[[int], None]:
    """An end-of-job hook that removes a published host environment (it holds secrets)."""
    return lambda _code: _remove(path)


# --------------------------------------------------------------------------- builders


def _build_local(
    ctx: LaunchContext,
    *,
    launcher: str = "mpi",
    options_key: str = MPI_OPTIONS,
    master: Callable[[dict[str, str]], ProcessSpec] | None = None,
    local_var: str = "LAUNCHBAY_MPI_LOCAL",
    total: int | None = None,
    what: str = "MPI",
) -> LaunchPlan:
    """One launch for every rank of every local host, started by the master host.

    ``master`` makes the launching process from its environment (default:
    ``mpirun``); ``local_var`` names the JSON (processes per host, hosts, the
    directory of host environments) with which each rank's bootstrap becomes a
    rank of its own host.
    """
    settings = ctx.settings
    if not settings.shared_dir:
        raise TrainingSetupError(
            f"{what} in local_process mode needs LAUNCHBAY_SHARED_DIR (a directory every host "
            "of the job can read and write)."
        )
    env = ctx.env
    hosts = env.distribution_hosts
    ppn = env.processes_per_host()
    total = num_processes(ctx) if total is None else total
    index = hosts.index(env.current_host)
    mpi_dir = os.path.join(settings.shared_dir, "mpi")
    env_dir = os.path.join(mpi_dir, "env")
    heartbeat = os.path.join(mpi_dir, "heartbeat")
    done_file = os.path.join(mpi_dir, "done.json")
    rank_env = _rank_env(ctx)
    rank_env["LAUNCHBAY_IO_DIR"] = ctx.io_dir
    host_env_file = os.path.join(env_dir, f"{env.current_host}.json")
    plan = _host_plan(ctx, launcher, [], (index, ppn, total), host_env_file, rank_env, fifo=True)
    if env.is_master:
        launch_env = dict(rank_env)
        launch_env[local_var] = json.dumps({"ppn": ppn, "hosts": hosts, "env_dir": env_dir})
        if master is None:
            _require_mpi(ctx)
            launch_env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
            process = ProcessSpec(
                name="mpirun",
                argv=mpirun_local_argv(ctx, options_key),
                env=launch_env,
                cwd=ctx.code_dir,
            )
        else:
            process = master(launch_env)
        plan.before_start.insert(0, lambda: _remove(done_file))
        plan.processes.append(process)
        plan.gate = _FilesGate(
            [os.path.join(env_dir, f"{h}.json") for h in hosts],
            settings.startup_timeout,
            f"every host of the {what} job to publish its environment",
        )
        plan.periodic.append(_Heartbeat(heartbeat))
        plan.on_finish.append(lambda code: _write_json(done_file, {"exit_code": code}))
    else:
        plan.waiter = _LocalDoneWaiter(
            done_file,
            heartbeat,
            settings.startup_timeout,
            SharedDir(settings.shared_dir, env.current_host),
            env.master_hostname,
            what,
        )
        plan.stop_via_shared_dir = True
    return plan


def build_torchrun_local(ctx: LaunchContext) -> LaunchPlan:
    """torch_distributed over several ``local_process`` hosts: one torchrun for all of them.

    One torchrun agent per host (what SageMaker runs) costs every extra host a
    process importing torch (about 1.5 s of CPU) on the one machine: 8 hosts ran
    1.35x as long as a plain torchrun of the same world. So the master host runs
    one ``torchrun --nnodes 1 --nproc_per_node <hosts x processes>``, and each
    rank's bootstrap becomes a rank of its own host (``$LAUNCHBAY_TORCH_LOCAL``):
    that host's environment, directory and log, and the ``LOCAL_RANK``,
    ``LOCAL_WORLD_SIZE``, ``GROUP_RANK`` and ``GROUP_WORLD_SIZE`` a torchrun per
    host would give it. ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and
    ``MASTER_PORT`` are torchrun's, as on SageMaker.
    """
    ppn = ctx.env.processes_per_host()
    total = ppn * len(ctx.env.distribution_hosts)
    local = dataclasses.replace(ctx, base_env=torchrun.host_env(ctx))

    def master(launch_env: dict[str, str]) -> ProcessSpec:
        if ppn == 1:
            # torchrun sets OMP_NUM_THREADS=1, with a banner, for 2+ ranks on a node; a
            # torchrun per host of one rank would not: no banner, and the ranks drop it
            # again (see _bootstrap._become_torch_local_rank).
            launch_env = {"OMP_NUM_THREADS": "1", **launch_env}
        return ProcessSpec(
            name="torchrun",
            argv=torchrun.torchrun_argv(ctx, single_node_of=total),
            env=launch_env,
            cwd=ctx.code_dir,
        )

    return _build_local(
        local,
        launcher="torch_distributed",
        master=master,
        local_var="LAUNCHBAY_TORCH_LOCAL",
        total=total,
        what="torchrun",
    )


def _build_ssh(
    ctx: LaunchContext, *, smddp: bool, launcher: str = "mpi", options_key: str = MPI_OPTIONS
) -> LaunchPlan:
    env = ctx.env
    hosts = env.distribution_hosts
    ppn = env.processes_per_host()
    total = ppn * len(hosts) if smddp else num_processes(ctx)
    index = hosts.index(env.current_host)
    host_env_file = os.path.join(ctx.ranks_dir, HOST_ENV_FILE)
    rank_env = _rank_env(ctx)
    rank_env.pop("LAUNCHBAY_IO_DIR", None)
    # mpirun tags every write: unbuffered children would split lines mid-way
    # (the bootstrap makes the rank itself line-buffered).
    rank_env.pop("PYTHONUNBUFFERED", None)
    rank_env["LAUNCHBAY_HOST_ENV_FILE"] = host_env_file
    status_file = STATUS_FILE_PREFIX + env.master_hostname
    if not os.path.exists(SSHD):
        raise TrainingSetupError(
            f"MPI across hosts needs an SSH daemon at {SSHD}; install openssh-server in the "
            "image (with host keys and passwordless root login between the hosts)."
        )
    sshd = ProcessSpec(
        name="sshd", argv=[SSHD, "-D"], env=dict(ctx.base_env), cwd="/", role="service"
    )
    plan = _host_plan(
        ctx, "smdistributed" if smddp else launcher, [sshd], (index, ppn, total),
        host_env_file, rank_env,
    )  # fmt: skip
    workers = [ctx.settings.address(h) for h in hosts if h != env.master_hostname]
    if env.is_master:
        try:
            _require_mpi(ctx)
        except TrainingSetupError as exc:
            # Fail, but first tell the workers why (over ssh, once their sshd answers),
            # so they end at once instead of waiting out their startup timeout.
            message = str(exc)
            plan.gate = _FailingGate(
                _ReachableGate(list(workers), 22, min(ctx.settings.startup_timeout, 60.0)),
                message,
            )
            plan.on_finish.append(
                lambda code: _notify_workers(workers, status_file, code or 1, message)
            )
            return plan
        argv = smddp_argv(ctx, rank_env) if smddp else mpirun_ssh_argv(ctx, rank_env, options_key)
        plan.processes.append(
            ProcessSpec(name="mpirun", argv=argv, env=rank_env, cwd=ctx.code_dir, output="mpi-tags")
        )
        plan.gate = _ReachableGate(list(workers), 22, ctx.settings.startup_timeout)
        plan.on_finish.append(lambda code: _notify_workers(workers, status_file, code))
    else:
        plan.before_start.insert(0, lambda: _remove(status_file))
        plan.waiter = _SshWorkerWaiter(
            ctx.settings.address(env.master_hostname),
            status_file,
            ctx.ranks_dir,
            ctx.settings.startup_timeout,
        )
    return plan


#: A Ray worker host's copy of the master's exit status, under its own tree.
RAY_DONE_FILE = os.path.join("output", "mpi-done")


class _RayWorkerWaiter:
    """A worker host on a Ray cluster: wait for the master's exit status in this host's tree."""

    def __init__(self, done_file: str):
        self.done_file = done_file
        self.reason: str | None = None

    def poll(self, now: float) -> int | None:
        """The master's exit status once written (``None`` until then)."""
        try:
            with open(self.done_file, encoding="utf-8") as f:
                text = f.read().strip()
        except OSError:
            return None
        return int(text) if text.lstrip("-").isdigit() else None


def _notify_ray_workers(addresses: list[str], exit_code: int) -> None:
    """Write the master's exit status into every worker's tree through the launch agent."""
    agent = shlex.split(os.environ.get("OMPI_MCA_plm_rsh_agent", ""))
    command = f'printf %s {int(exit_code)} > "$SAGEMAKER_BASE_DIR/{RAY_DONE_FILE}"'
    for address in addresses:
        for _attempt in range(3):
            try:
                result = subprocess.run(
                    [*agent, address, command], capture_output=True, timeout=120, check=False
                )
            except (OSError, subprocess.TimeoutExpired):
                continue
            if result.returncode == 0:
                break
            time.sleep(1)


def _build_ray(
    ctx: LaunchContext, *, launcher: str = "mpi", options_key: str = MPI_OPTIONS
) -> LaunchPlan:
    """MPI across the hosts of a Ray job: mpirun on the master, ``orted`` started by actors."""
    env = ctx.env
    hosts = env.distribution_hosts
    ppn = env.processes_per_host()
    total = num_processes(ctx)
    index = hosts.index(env.current_host)
    base = env.paths.base_dir
    host_env_file = os.path.join(ctx.ranks_dir, HOST_ENV_FILE)
    rank_env = _rank_env(ctx)
    rank_env.pop("LAUNCHBAY_IO_DIR", None)
    rank_env.pop("PYTHONUNBUFFERED", None)  # see _build_ssh
    rank_env["LAUNCHBAY_HOST_ENV_FILE"] = os.path.relpath(host_env_file, base)
    plan = _host_plan(ctx, launcher, [], (index, ppn, total), host_env_file, rank_env)
    if env.is_master:
        _require_mpi(ctx)
        workers = [ctx.settings.address(h) for h in hosts if h != env.master_hostname]
        argv = mpirun_ssh_argv(ctx, rank_env, options_key)
        if all(ctx.settings.address(h).startswith("127.") for h in hosts):
            # The hosts are nodes of one machine (loopback aliases): one host name, one
            # /dev/shm, so shared-memory segments named by host and local rank would
            # clash between hosts. Ranks of one host then talk over TCP too.
            argv[argv.index("^openib")] = "^openib,vader"
        plan.processes.append(
            ProcessSpec(name="mpirun", argv=argv, env=rank_env, cwd=ctx.code_dir, output="mpi-tags")
        )
        plan.on_finish.append(lambda code: _notify_ray_workers(workers, code))
    else:
        done = os.path.join(base, RAY_DONE_FILE)
        plan.before_start.insert(0, lambda: _remove(done))
        plan.waiter = _RayWorkerWaiter(done)
    return plan


def build(ctx: LaunchContext) -> LaunchPlan:
    """The MPI plan for this host (local, on Ray or over SSH, master or worker)."""
    if ctx.settings.local_process:
        return _build_local(ctx)
    if ctx.settings.ray:
        return _build_ray(ctx)
    return _build_ssh(ctx, smddp=False)


def build_smddp(ctx: LaunchContext) -> LaunchPlan:
    """The smdistributed-dataparallel plan (SageMaker GPU hosts with smddprun)."""
    return _build_ssh(ctx, smddp=True)


def build_smddp_local(ctx: LaunchContext) -> LaunchPlan:
    """smdistributed dataparallel in a local job without ``smddprun``: the stand-in's MPI plan.

    (A PyTorch script in ``local_process`` mode is started by torchrun instead:
    :func:`launchbay.runtime.launchers.smddp.build_local` decides.) The ranks
    start as the MPI launcher starts them (one ``mpirun`` for the job, on
    this machine in ``local_process`` mode, over SSH between containers), one per
    GPU or ``processes_per_host`` per host. ``LAUNCHBAY_SMDDP=1`` makes each rank's
    bootstrap export ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``
    from MPI's numbering; ``MASTER_ADDR``/``MASTER_PORT`` (the first host, the job's
    port) are already in the rank environment, so ``init_process_group`` meets at
    the same place on every rank. The custom options are the dataparallel ones.
    """
    base_env = dict(ctx.base_env)
    base_env["LAUNCHBAY_SMDDP"] = "1"
    if ctx.settings.local_process:
        for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
            base_env.setdefault(name, torchrun.local_interface(base_env))
    local = dataclasses.replace(ctx, base_env=base_env)
    if ctx.settings.local_process:
        return _build_local(local, launcher="smdistributed", options_key=SMDDP_OPTIONS)
    if ctx.settings.ray:
        return _build_ray(local, launcher="smdistributed", options_key=SMDDP_OPTIONS)
    return _build_ssh(local, smddp=False, launcher="smdistributed", options_key=SMDDP_OPTIONS)
