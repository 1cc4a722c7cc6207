"""Warm hosts for local Docker jobs, as SageMaker's warm pools (issue 36 item 2).

A job whose request has ``ResourceConfig.KeepAlivePeriodInSeconds`` (SDK v2's
``keep_alive_period_in_seconds``) leaves its hosts' start cost behind for that
long: the pool's network and, for each host, a container already started for
the next job. The next job with the same configuration (the image by its engine
id, the instance type and count, network isolation, the mounts' places, the
pip cache, ``~/.sagemaker/config.yaml``'s container options) that also asks for a
keep-alive period takes them instead of making its own.

What is kept, and why each job still gets a fresh host:

* The network ``launchbay-pool-<key>`` (aliases ``algo-1`` ...), made once.
* Per host, a container made and started ahead, waiting in a small Python
  waiter (:data:`WAITER`) on a FIFO mounted read-only at :data:`CONTROL_DIR`. A
  job's ``start`` moves the job's host trees (config, code, channels, model,
  output, checkpoints) into the pool's mounted folders and writes the job's
  environment and command to the FIFO; the waiter ``exec``\\ s ``train`` with them
  (PID 1 is ``docker-init``, as in a cold container). The environment, credentials
  included, goes through the FIFO, never to disk. After the job the container is
  removed and its files are moved back into the job directory before the outputs
  are collected; a new container is started for the next job in the background.
  So every job runs in a container that ran nothing before: a clean ``/opt/ml``,
  no process of an earlier job, its own channels, read-only as in a cold one.
* State: ``$LAUNCHBAY_HOME/warm-pools/<key>/pool.json``; each job that used a pool
  names it in ``<job dir>/warm-pool.json``.

A pool ends at its period (a reaper process, started detached when the pool is
made, sleeps until then) or on :func:`stop_pools` (``launchbay stop --warm-pool``).
A pool whose containers are gone (an engine restart stops them) is removed by the
next job that looks for it, by :func:`sweep` (every Docker job's start and
:func:`list_pools`), or by its reaper at the end of the period, whichever comes first.

``describe()`` shows ``WarmPoolStatus`` as SageMaker does: ``InUse`` while the job
runs, then ``Available``, ``Reused`` (``ReusedByJob``) or ``Terminated``, with
``ResourceRetainedBillableTimeInSeconds``: the seconds the pool was kept after the
job ended (until reused, ended, or now).

``local_process`` keeps nothing (its hosts are processes that start in
milliseconds; what repeats there, the ``requirements.txt`` install, is skipped by a
content key next to the interpreter's pip lock).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from launchbay._home import local_dir, local_home
from launchbay.backends.local import etc_hosts
from launchbay.errors import DockerError
from launchbay.runtime.for_client import is_alive

__all__ = [
    "CONTROL_DIR",
    "keep_alive_of",
    "LABEL_POOL",
    "WAITER",
    "give_up",
    "go_message",
    "PoolPlan",
    "PoolUnusable",
    "list_pools",
    "pool_status_of_job",
    "read_job_pool",
    "stop_pools",
    "sweep",
    "wait_for_refills",
    "without_ready",
]

logger = logging.getLogger("launchbay.backends.docker")

LABEL_POOL = "launchbay.warm-pool"
LABEL_HOME = "launchbay.home"
#: Where a waiting container sees its FIFO (``go``), read-only.
CONTROL_DIR = "/run/launchbay-warm"
JOB_FILE = "warm-pool.json"
POOLS = "warm-pools"

#: The line a waiter prints once its runtime is imported and it is about to wait on the
#: FIFO: the pool is ready then (the engine's log stream says so; the job's log skips it).
READY = "launchbay-warm-pool: waiting"

#: The waiting container's program: import the image's runtime ahead (its start is off the
#: job's path), block on the FIFO, then become the job's command: ``train`` in this very
#: process where the command is the runtime's own, else ``exec`` of the command.
WAITER = (
    "import json,os,sys\n"
    "try:\n from launchbay.runtime.train import main as train\n"
    "except Exception:\n train=None\n"
    f"print({READY!r}, flush=True)\n"
    f"with open('{CONTROL_DIR}/go','rb') as f: m=json.loads(f.read() or b'null')\n"
    "if not m: raise SystemExit(0)\n"
    "os.environ.update(m['env'])\n"
    "[os.environ.pop(k,None) for k in m.get('unset',())]\n"
    "if train is not None and m['argv']==['train']:\n sys.argv=['train']; train([])\n"
    "os.execvp(m['argv'][0], m['argv'])\n"
)


def go_message(env: Mapping[str, str], entrypoint: list[str]) -> dict[str, Any]:
    """What the waiter gets: the environment, and the command (``entrypoint`` + ``train``).

    ``env -u NAME`` before the runtime (the pip cache's entrypoint) becomes ``unset``,
    so the waiter runs the runtime it imported ahead.
    """
    unset: list[str] = []
    rest = list(entrypoint)
    if rest[:2] == ["/usr/bin/env", "-u"] and len(rest) >= 3:
        unset, rest = [rest[2]], rest[3:]
    return {"env": dict(env), "unset": unset, "argv": [*rest, "train"]}


#: The host-tree folders a pool mounts, by their place in a host's tree.
KINDS = ("config", "data", "model", "output", "code", "checkpoints")


class PoolUnusable(DockerError):
    """A pool's containers could not take the job (it then starts cold)."""


@dataclass
class PoolPlan:
    """What a pool is made of; ``key`` is what a matching job must share."""

    key: str
    image: str
    hosts: list[str]
    isolated: bool
    #: per kind: the container path and mode (``data`` is the channels' parent, read-only)
    mounts: dict[str, tuple[str, str]]
    #: mounts that are the same for every job (the pip cache): host path -> bind
    fixed: dict[str, dict[str, str]]
    host_config: dict[str, Any]
    entrypoint: list[str]
    keep_alive: int
    #: host -> the CPUs its container runs on, where the user's options set none
    cpusets: dict[str, str] = field(default_factory=dict)

    @property
    def directory(self) -> str:
        return os.path.join(local_home(), POOLS, self.key)

    @property
    def network(self) -> str:
        return f"launchbay-pool-{self.key[:16]}"


def keep_alive_of(request: Mapping[str, Any]) -> int:
    """``ResourceConfig.KeepAlivePeriodInSeconds`` of a request (0 when not asked for)."""
    value = (request.get("ResourceConfig") or {}).get("KeepAlivePeriodInSeconds") or 0
    return int(value) if isinstance(value, int | float) and value > 0 else 0


def pool_key(parts: Mapping[str, Any]) -> str:
    """The key of a configuration (JSON of ``parts`` and the local root, hashed)."""
    what = json.dumps({"home": local_home(), **parts}, sort_keys=True, default=str)
    return hashlib.sha256(what.encode()).hexdigest()[:24]


# -- state ------------------------------------------------------------------------------
@contextlib.contextmanager
def _locked(directory: str) -> Iterator[dict[str, Any]]:
    """The pool's state, read and written under the pool's lock."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    with open(os.path.join(directory, "pool.lock"), "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        state = _read(directory)
        yield state
        _write(directory, state)


def _read(directory: str) -> dict[str, Any]:
    try:
        with open(os.path.join(directory, "pool.json"), encoding="utf-8") as f:
            found = json.load(f)
        return found if isinstance(found, dict) else {}
    except (OSError, ValueError):
        return {}


def _write(directory: str, state: dict[str, Any]) -> None:
    if not state:
        return
    path = os.path.join(directory, "pool.json")
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, path)


def read_job_pool(job_dir: str) -> dict[str, Any] | None:
    """``<job dir>/warm-pool.json``: the pool a job ran in and its containers, or None."""
    try:
        with open(os.path.join(job_dir, JOB_FILE), encoding="utf-8") as f:
            found = json.load(f)
        return found if isinstance(found, dict) else None
    except (OSError, ValueError):
        return None


def pool_status_of_job(job_dir: str, name: str) -> dict[str, Any] | None:
    """The job's ``WarmPoolStatus`` as ``DescribeTrainingJob`` shows it, or None."""
    link = read_job_pool(job_dir)
    if link is None:
        return None
    state = _read(str(link.get("pool") or ""))
    entry = (state.get("jobs") or {}).get(name)
    if not isinstance(entry, dict):
        return None
    now = time.time()
    ended = entry.get("ended")
    if ended is None:
        return {"Status": "InUse"}
    if entry.get("reused_by"):
        until, status = float(entry.get("reused_at") or now), "Reused"
    elif state.get("terminated_at") is not None:
        until, status = float(state["terminated_at"]), "Terminated"
    else:
        until, status = now, "Available"
    found: dict[str, Any] = {
        "Status": status,
        "ResourceRetainedBillableTimeInSeconds": max(0, int(until - float(ended))),
    }
    if status == "Reused":
        found["ReusedByJob"] = entry["reused_by"]
    return found


# -- a pool's life ------------------------------------------------------------------------
class Pools:
    """The pools of one ``ContainerHosts`` (its engine client), made and taken per job."""

    #: This process's refills in flight, by pool key (shared by every backend here).
    _refills: dict[str, threading.Thread] = {}

    def __init__(self, client: Any) -> None:
        self.client = client

    # The caller: ContainerHosts.start -> take(); teardown -> give_back().
    def take(self, plan: PoolPlan, job_name: str) -> tuple[dict[str, str], bool]:
        """Containers waiting for ``job_name``, one per host: ``({host: id}, reused)``.

        The pool of ``plan.key`` if it is available and its containers wait, else a new
        pool (an old one of that key is removed first).
        """
        refill = self._refills.pop(plan.key, None)
        if refill is not None:
            refill.join()
        with _locked(plan.directory) as state:
            waiting = state.get("waiting") or {}
            reused = False
            if (
                state.get("status") == "Available"
                and state.get("terminated_at") is None
                and float(state.get("expires_at") or 0) > time.time()
                and sorted(waiting) == sorted(plan.hosts)
                and self._all_waiting(waiting)
            ):
                reused = True
                last = state.get("last_job")
                jobs = state.setdefault("jobs", {})
                if last in jobs:
                    jobs[last].update(reused_by=job_name, reused_at=time.time())
            else:
                if state:
                    self._remove(plan.directory, state)
                    state.clear()
                state.update(
                    key=plan.key,
                    image=plan.image,
                    hosts=plan.hosts,
                    network=plan.network,
                    created=time.time(),
                    jobs={},
                )
                try:
                    self._make_network(plan)
                    waiting = self._make_containers(plan, slot=0)
                except BaseException:  # nothing of the new pool is left behind
                    _end_pool(self.client, plan.directory, state)
                    _write(plan.directory, state)
                    raise
                state["slot"] = 0
            state.update(status="InUse", last_job=job_name, waiting={}, in_use=waiting)
            state["keep_alive"] = plan.keep_alive
            state.setdefault("jobs", {})[job_name] = {"started": time.time(), "ended": None}
            self._ensure_reaper(plan.directory, state)
        return waiting, reused

    def slot_dir(self, plan: PoolPlan, host: str, kind: str) -> str:
        state = _read(plan.directory)
        return os.path.join(plan.directory, f"slot-{state.get('slot', 0)}", host, kind)

    def give_back(self, plan: PoolPlan, job_name: str, *, keep: bool) -> None:
        """After the job: its containers are removed; keep the pool (refill it) or end it."""
        with _locked(plan.directory) as state:
            entry = (state.get("jobs") or {}).get(job_name)
            if isinstance(entry, dict):
                entry["ended"] = time.time()
            ids = list((state.get("in_use") or {}).values())
            state["in_use"] = {}
            self._remove_containers(ids)
            if not keep or state.get("terminated_at") is not None:
                self._remove(plan.directory, state)
                return
            state.update(status="Refilling", expires_at=time.time() + plan.keep_alive)
            state["slot"] = 1 - int(state.get("slot", 0))
            slot = state["slot"]
        thread = threading.Thread(
            target=self._refill, args=(plan, slot), name=f"launchbay-pool-{plan.key[:8]}"
        )
        self._refills[plan.key] = thread
        thread.start()  # not a daemon: an exiting interpreter lets it finish first

    def _refill(self, plan: PoolPlan, slot: int) -> None:
        try:
            waiting = self._make_containers(plan, slot=slot)
        except Exception as exc:  # the next job makes its own
            logger.warning("Could not start the warm pool's next containers: %s", exc)
            with _locked(plan.directory) as state:
                self._remove(plan.directory, state)
            return
        with _locked(plan.directory) as state:
            if state.get("terminated_at") is not None or state.get("slot") != slot:
                self._remove_containers(list(waiting.values()))
                return
            state.update(status="Available", waiting=waiting)

    # -- engine calls ---------------------------------------------------------------------
    def _labels(self, plan: PoolPlan) -> dict[str, str]:
        return {LABEL_POOL: plan.key, LABEL_HOME: local_home()}

    def _make_network(self, plan: PoolPlan) -> None:
        api = self.client.api
        with contextlib.suppress(Exception):
            api.remove_network(plan.network)
        api.create_network(
            plan.network,
            driver="bridge",
            internal=plan.isolated,
            options={"com.docker.network.bridge.inhibit_ipv4": "true"} if plan.isolated else None,
            labels=self._labels(plan),
            check_duplicate=True,
        )

    def _make_containers(self, plan: PoolPlan, *, slot: int) -> dict[str, str]:
        import concurrent.futures

        api = self.client.api
        # The slot's hosts file: every host's line is in it before a job runs here.
        hosts_file = os.path.join(plan.directory, f"slot-{slot}", "hosts")
        os.makedirs(os.path.dirname(hosts_file), exist_ok=True)
        gateway = None if plan.isolated else etc_hosts.host_gateway_address(self.client)
        etc_hosts.start_file(hosts_file, gateway)

        def make(host: str) -> tuple[str, str]:
            base = os.path.join(plan.directory, f"slot-{slot}", host)
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(base)
            binds: dict[str, dict[str, str]] = dict(plan.fixed)
            for kind, (target, mode) in plan.mounts.items():
                os.makedirs(os.path.join(base, kind), exist_ok=True)
                binds[os.path.join(base, kind)] = {"bind": target, "mode": mode}
            control = os.path.join(base, "control")
            os.makedirs(control, exist_ok=True)
            os.mkfifo(os.path.join(control, "go"), 0o600)
            binds[control] = {"bind": CONTROL_DIR, "mode": "ro"}
            binds.update(etc_hosts.bind(hosts_file))
            cpus = {"cpuset_cpus": plan.cpusets[host]} if host in plan.cpusets else {}
            # The slot's hosts file names host.docker.internal: no extra_hosts.
            fixed = {"binds": binds, "network_mode": plan.network, "extra_hosts": None}
            host_config = api.create_host_config(**{**cpus, **plan.host_config, **fixed})
            networking = api.create_networking_config(
                {plan.network: api.create_endpoint_config(aliases=[host])}
            )
            name = f"{plan.network}-{slot}-{host}"
            with contextlib.suppress(Exception):
                api.remove_container(name, force=True, v=True)
            created = api.create_container(
                plan.image,
                command=[],
                entrypoint=["python3", "-c", WAITER],
                name=name,
                hostname=host,
                labels={**self._labels(plan), "launchbay.host": host},
                host_config=host_config,
                networking_config=networking,
            )
            api.start(created["Id"])
            _wait_ready(api, created["Id"])
            etc_hosts.name_container(api, created["Id"], plan.network, hosts_file, host)
            return host, created["Id"]

        with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(plan.hosts), 8)) as pool:
            return dict(pool.map(make, plan.hosts))

    def _all_waiting(self, waiting: Mapping[str, str]) -> bool:
        try:
            running = {
                c["Id"]
                for c in self.client.api.containers(
                    filters={"label": LABEL_POOL, "status": "running"}
                )
            }
        except Exception:
            return False
        return all(cid in running for cid in waiting.values())

    def _remove_containers(self, ids: list[str]) -> None:
        for cid in ids:
            with contextlib.suppress(Exception):
                self.client.api.remove_container(cid, force=True, v=True)

    def _remove(self, directory: str, state: dict[str, Any]) -> None:
        """End the pool: its containers, its network, its folders; the state says Terminated."""
        _end_pool(self.client, directory, state)

    def _ensure_reaper(self, directory: str, state: dict[str, Any]) -> None:
        pid = state.get("reaper_pid")
        if isinstance(pid, int) and is_alive(pid):
            return
        log = open(os.path.join(directory, "reaper.log"), "ab")  # noqa: SIM115 - handed over
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "launchbay.backends.local.warm_pool", directory],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
        finally:
            log.close()
        state["reaper_pid"] = proc.pid


def _wait_ready(api: Any, container_id: str) -> None:
    """Follow the container's output until its waiter says it waits (or it ended)."""
    stream = api.logs(container_id, stream=True, follow=True)
    try:
        for chunk in stream:
            if READY.encode() in chunk:
                return
    finally:
        with contextlib.suppress(Exception):
            stream.close()
    raise PoolUnusable(f"the warm container {container_id[:12]} ended before it could wait")


def without_ready(lines: Iterator[str]) -> Iterator[str]:
    """A warm container's output lines without its waiter's :data:`READY` line."""
    for line in lines:
        if line != READY:
            yield line


def give_up(client: Any, plan: PoolPlan, job_dir: str) -> None:
    """End the pool a job could not start in; the job no longer names it."""
    stop_pools(client, plan.key, now=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(job_dir, JOB_FILE))


def wait_for_refills() -> None:
    """Wait until this process's pools have started their next containers."""
    for thread in list(Pools._refills.values()):
        thread.join()


def _end_pool(client: Any, directory: str, state: dict[str, Any]) -> None:
    api = client.api
    key = state.get("key") or os.path.basename(directory)
    with contextlib.suppress(Exception):
        for container in api.containers(all=True, filters={"label": f"{LABEL_POOL}={key}"}):
            with contextlib.suppress(Exception):
                api.remove_container(container["Id"], force=True, v=True)
    network = state.get("network")
    if network:
        for _ in range(20):
            try:
                api.remove_network(network)
                break
            except Exception as exc:
                if "not found" in str(exc).lower() or getattr(exc, "status_code", 0) == 404:
                    break
                time.sleep(0.25)
    for entry in os.listdir(directory) if os.path.isdir(directory) else ():
        if entry.startswith("slot-"):
            shutil.rmtree(os.path.join(directory, entry), ignore_errors=True)
    if state:
        state.update(status="Terminated", waiting={}, in_use={})
        state.setdefault("terminated_at", time.time())


def _pool_dirs() -> list[str]:
    root = os.path.join(local_home(), POOLS)
    try:
        return [os.path.join(root, d) for d in sorted(os.listdir(root))]
    except OSError:
        return []


def list_pools(client: Any = None) -> list[dict[str, Any]]:
    """This local root's pools (ended ones too), after :func:`sweep`; newest first."""
    if client is not None:
        sweep(client)
    found = []
    for directory in _pool_dirs():
        state = _read(directory)
        if not state:
            continue
        found.append(
            {
                "WarmPool": os.path.basename(directory),
                "Status": state.get("status"),
                "Image": state.get("image"),
                "InstanceCount": len(state.get("hosts") or ()),
                "LastJob": state.get("last_job"),
                "ExpiresAt": state.get("expires_at"),
                "TerminatedAt": state.get("terminated_at"),
            }
        )
    found.sort(key=lambda p: -float(p.get("ExpiresAt") or 0))
    return found


def stop_pools(client: Any, key: str | None = None, *, now: bool = False) -> list[str]:
    """End this local root's live pools (or the one of ``key``); returns the keys ended.

    A pool in use by a job ends when that job ends, unless ``now`` (its client is gone).
    """
    ended = []
    for directory in _pool_dirs():
        if key is not None and os.path.basename(directory) != key:
            continue
        with _locked(directory) as state:
            if not state or state.get("terminated_at") is not None:
                continue
            if state.get("status") == "InUse" and not now:  # the pool ends after its job
                state["terminated_at"] = time.time()
                ended.append(os.path.basename(directory))
                continue
            _end_pool(client, directory, state)
            ended.append(os.path.basename(directory))
            pid = state.get("reaper_pid")
        if isinstance(pid, int) and is_alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
    return ended


def sweep(client: Any) -> None:
    """End the pools whose period is over or whose waiting containers are gone."""
    for directory in _pool_dirs():
        state = _read(directory)
        if not state or state.get("terminated_at") is not None:
            continue
        if state.get("status") not in ("Available",):
            continue
        expired = float(state.get("expires_at") or 0) <= time.time()
        if expired or not Pools(client)._all_waiting(state.get("waiting") or {}):
            with _locked(directory) as locked:
                if locked.get("status") == "Available":
                    _end_pool(client, directory, locked)


def _reap(directory: str) -> int:
    """The reaper: sleep until the pool's period is over, then end it (also on SIGTERM)."""
    from launchbay._docker import docker_client

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.is_set():
        state = _read(directory)
        if not state or state.get("terminated_at") is not None and state.get("status") != "InUse":
            break
        expires = float(state.get("expires_at") or 0)
        if state.get("status") == "Available" and expires <= time.time():
            with _locked(directory) as locked:
                if (
                    locked.get("status") == "Available"
                    and float(locked.get("expires_at") or 0) <= time.time()
                ):
                    _end_pool(docker_client("Warm pools"), directory, locked)
                    break
            continue
        # In use or refilling: the period starts when the job ends, not before.
        wait = expires - time.time() if state.get("status") == "Available" else 1.0
        if state.get("status") == "InUse":
            wait = float(state.get("keep_alive") or 1)
        stop.wait(max(0.05, min(wait, 60.0)))
    if stop.is_set():
        with _locked(directory) as locked:
            if locked and locked.get("status") != "Terminated":
                _end_pool(docker_client("Warm pools"), directory, locked)
    return 0


# -- a job in a pool's containers --------------------------------------------------------
#: Where each kind of mount lies in a host's tree.
TREE = {
    "config": "input/config",
    "data": "input/data",
    "model": "model",
    "output": "output",
    "code": "code",
    "checkpoints": "checkpoints",
}


def plan_pool(
    specs: list[Any],
    job_dir: str,
    *,
    image: str,
    image_id: str,
    isolated: bool,
    host_config: Mapping[str, Any],
    entrypoint: list[str],
    keep_alive: int,
    fixed_targets: tuple[str, ...],
) -> tuple[PoolPlan | None, str]:
    """The pool the job's hosts (``specs``, :class:`HostSpec`) can run in, or why none."""
    if not specs:
        return None, "no hosts"
    if any(spec.gpu_ids is not None for spec in specs):
        return None, "local_gpu hosts each hold their own GPUs"
    pools_root = local_dir(POOLS)
    if os.stat(pools_root).st_dev != os.stat(job_dir).st_dev:
        return None, f"the job directory is on another file system than {pools_root}"
    shapes = []
    fixed: dict[str, dict[str, str]] = {}
    for spec in specs:
        host_dir = os.path.join(job_dir, spec.host)
        mounts: dict[str, tuple[str, str]] = {"data": ("/opt/ml/input/data", "ro")}
        for source, bind in spec.binds.items():
            rel = os.path.relpath(source, host_dir)
            kind = next((k for k, place in TREE.items() if place == rel), None)
            if bind["bind"] in fixed_targets:
                fixed[source] = dict(bind)
            elif bind["bind"].startswith("/opt/ml/input/data/") and bind["mode"] == "ro":
                continue  # a channel: moved under the pool's data folder
            elif kind is not None and kind != "data":
                mounts[kind] = (bind["bind"], bind["mode"])
            else:
                return None, f"a mount the pool does not keep ({bind['bind']})"
        shapes.append(mounts)
    if any(shape != shapes[0] for shape in shapes):
        return None, "the hosts' mounts differ"
    options = {k: v for k, v in host_config.items() if k not in ("binds", "network_mode")}
    hosts = [spec.host for spec in specs]
    cpusets = {spec.host: spec.cpus for spec in specs if spec.cpus}
    key = pool_key(
        {
            "image": image_id,
            "hosts": hosts,
            "cpusets": cpusets,
            "isolated": isolated,
            "mounts": shapes[0],
            "fixed": fixed,
            "options": options,
            "entrypoint": entrypoint,
        }
    )
    plan = PoolPlan(
        key,
        image,
        hosts,
        isolated,
        shapes[0],
        fixed,
        options,
        entrypoint,
        int(keep_alive),
        cpusets,
    )
    return plan, ""


def move_in(plan: PoolPlan, slot_of: Any, host_dir: str, host: str) -> None:
    """Move the host's tree into the pool's mounted folders (``slot_of(host, kind)``)."""
    for kind in plan.mounts:
        source, target = os.path.join(host_dir, TREE[kind]), slot_of(host, kind)
        if not os.path.isdir(source):
            continue
        for entry in os.listdir(source):
            path = os.path.join(source, entry)
            if kind == "data" and os.path.islink(path):  # a file:// channel: linked, not moved
                shutil.copytree(
                    os.path.realpath(path), os.path.join(target, entry), copy_function=_link
                )
            else:
                os.rename(path, os.path.join(target, entry))


def move_out(plan: PoolPlan, slot_of: Any, host_dir: str, host: str) -> None:
    """Move what the job left in the pool's folders back into its host tree."""
    for kind in plan.mounts:
        source, target = slot_of(host, kind), os.path.join(host_dir, TREE[kind])
        if not os.path.isdir(source):
            continue
        os.makedirs(target, exist_ok=True)
        for entry in os.listdir(source):
            path, back = os.path.join(source, entry), os.path.join(target, entry)
            if os.path.lexists(back):  # a file:// channel's link stays; its copy goes
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.rename(path, back)


def _link(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def send_go(
    fifo: str, message: Mapping[str, Any], gone: threading.Event, timeout: float = 60.0
) -> None:
    """Write the job's environment and command to a waiting container's FIFO.

    ``gone`` is set when the container has exited (its engine ``wait`` returned): a
    waiter that could not start (an image without ``python3``) is known at once.

    Raises:
        TimeoutError: no waiter read the FIFO (the container ended, or ``timeout``).
    """
    data = json.dumps(message).encode()
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno != 6:  # ENXIO: the waiter has not opened it yet (a container just started)
            raise
        fd = -1
    if fd >= 0:
        os.set_blocking(fd, True)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        return
    failed: list[BaseException] = []
    written = threading.Event()

    def blocking() -> None:
        try:
            with open(fifo, "wb") as f:
                f.write(data)
        except BaseException as exc:  # reported by the caller
            failed.append(exc)
        finally:
            written.set()
            gone.set()  # wakes the caller

    writer = threading.Thread(target=blocking, daemon=True)
    writer.start()
    gone.wait(timeout)
    if not written.is_set():  # unblock the writer: open the read end ourselves
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        writer.join(1)
        raise TimeoutError(f"no warm container read {fifo}: its waiter did not start")
    if failed:
        raise failed[0]


if __name__ == "__main__":
    local_dir(POOLS)
    sys.exit(_reap(sys.argv[1]))
