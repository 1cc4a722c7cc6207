"""The ``ray`` host runner: every host of the request is a Ray actor on a node of its own.

The job's life (its record in ``$LAUNCHBAY_HOME/jobs/<name>``, failure triage,
outputs, Ctrl-C, ``status``/``logs``/``stop``/``list``) is
:class:`launchbay.backends.local.control.LocalBackend`'s, exactly as for
``local_process``. :class:`RayHosts` (a :class:`~launchbay.backends.local.hosts.HostRunner`)
only places, watches and stops the hosts (docs/ray.md):

* the cluster is Ray's own: the one ``ray.init()`` already made in this
  process, else ``RAY_ADDRESS``; nothing is started when neither is there;
* a host asks for ``LAUNCHBAY_RAY_CPUS_PER_HOST`` CPUs (default 1) and
  ``LAUNCHBAY_RAY_GPUS_PER_HOST`` GPUs (default 0), read from the request's
  ``Environment`` (``environment=``), else from the caller's environment;
* the hosts are one placement group, one bundle per host, ``STRICT_SPREAD``:
  ``algo-N`` is bundle N-1, each on a node of its own. A cluster with fewer
  nodes that can hold a host than ``instance_count`` is refused before anything
  starts, naming its nodes; ``LAUNCHBAY_RAY_PACK=1`` lets hosts share nodes
  (``PACK``, the hosts then share their node's network too);
* each host is a :class:`~launchbay.backends.ray.agent.HostAgent` actor in
  its bundle, which stages the host's tree on its node and runs the runtime
  there; ``algo-N`` resolves to its node's address, the master port is one
  free on the first host's node;
* the client pulls each host's output through its actor into
  ``logs/<host>.log`` (printed with host and rank prefixes as in every local
  mode), and when a host ends, its ``model/``, ``output/`` and checkpoints
  into the host's tree in the job directory, so the outputs are published
  (``output_path``, ``checkpoint_s3_uri``) as for a local job. They are packed
  on the node with ``local_process``'s rules and streamed in bounded chunks to a
  file here; a host whose files cannot be fetched fails the job, naming the
  host and why (never a Completed job with outputs missing);
* stopping a host is SIGTERM (SIGKILL after the grace period) to its process
  group, sent by its actor; at the end each actor removes its node-local tree
  and is killed, and the placement group is removed. A client that dies takes
  its actors with it (Ray ends the actors of a driver that exits), and each
  runtime gets SIGTERM when its actor ends.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import signal
import tarfile
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from launchbay.backends.local.hosts import POLL, HostHandles
from launchbay.backends.local.layout import JobLayout
from launchbay.backends.local.record import LocalJob, job_arn
from launchbay.backends.plan import JobFields, JobPlan
from launchbay.backends.ray.agent import FILES_CHUNK, HostAgent, pack_tree
from launchbay.backends.ray.rsh import ACTORS_SETTING, NAMESPACE
from launchbay.errors import ConfigurationError, JobError
from launchbay.runtime.archive import safe_extract
from launchbay.runtime.contract import write_host_config
from launchbay.runtime.names import ENV, RAY
from launchbay.runtime.settings import RuntimeSettings

__all__ = [
    "RayHosts",
    "CPUS_SETTING",
    "GPUS_SETTING",
    "PACK_SETTING",
    "PLACEMENT_TIMEOUT_SETTING",
    "HostResources",
    "host_resources",
    "connect",
]

logger = logging.getLogger("launchbay.backends.ray")

#: CPUs each host asks of its node (a number > 0; default 1).
CPUS_SETTING = "LAUNCHBAY_RAY_CPUS_PER_HOST"
#: GPUs each host asks of its node (a number >= 0; default 0).
GPUS_SETTING = "LAUNCHBAY_RAY_GPUS_PER_HOST"
#: ``1``: hosts may share nodes (placement strategy PACK instead of STRICT_SPREAD).
PACK_SETTING = "LAUNCHBAY_RAY_PACK"
#: Seconds to wait for the cluster to place the hosts (default 120).
PLACEMENT_TIMEOUT_SETTING = "LAUNCHBAY_RAY_PLACEMENT_TIMEOUT"
#: Seconds one call to a host's actor may take before the host counts as lost.
_CALL_TIMEOUT = 120.0
#: The exit code reported for a host whose actor (or node) was lost.
LOST_EXIT_CODE = 137
#: Chunks of a host's files asked for ahead of the one being written.
_IN_FLIGHT = 16
#: The exit code reported for a host that ended well but whose files could not be fetched.
FETCH_FAILED_EXIT_CODE = 1


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def _ray() -> Any:
    """The ``ray`` module, or a ConfigurationError naming the extra to install."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigurationError(
            f"instance_type={RAY!r} needs Ray, which is not installed here ({exc}). Accepted: "
            "pip install 'launchbay[ray]' (the same Ray version as the cluster's).",
            argument="instance_type",
            value=RAY,
        ) from exc
    return ray


def connect() -> Any:
    """The ``ray`` module, connected: to the cluster of an earlier ``ray.init()``, else ``RAY_ADDRESS``.

    Raises:
        ConfigurationError: Ray is not installed, or there is neither.
    """
    ray = _ray()
    if ray.is_initialized():
        return ray
    address = os.environ.get("RAY_ADDRESS", "").strip()
    if not address:
        raise ConfigurationError(
            f"instance_type={RAY!r} runs on a Ray cluster, and none is named: RAY_ADDRESS is "
            "not set and ray.init() was not called in this process. Accepted: RAY_ADDRESS="
            "<head>:6379 (or 'auto' for a cluster `ray start` made on this machine), or "
            "ray.init(address=...) before the job (docs/ray.md).",
            argument="RAY_ADDRESS",
            value=None,
        )
    ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    return ray


@dataclass(frozen=True)
class HostResources:
    """What each host asks of its node, and whether hosts may share a node."""

    cpus: float
    gpus: float
    pack: bool

    @property
    def bundle(self) -> dict[str, float]:
        bundle = {"CPU": self.cpus}
        if self.gpus:
            bundle["GPU"] = self.gpus
        return bundle

    def fits(self, resources: Mapping[str, Any]) -> bool:
        return float(resources.get("CPU", 0)) >= self.cpus and float(resources.get("GPU", 0)) >= (
            self.gpus or 0
        )


#: A job's plan (or fields), or a bare request its fields are derived from.
Source = JobFields | Mapping[str, Any]


def _setting(source: Source, name: str) -> tuple[str | None, str]:
    environment = JobFields.of(source).environment
    if name in environment:
        return str(environment[name]), f"environment[{name!r}]"
    return os.environ.get(name), name


def _number(source: Source, name: str, default: float, minimum: float) -> float:
    raw, argument = _setting(source, name)
    if raw in (None, ""):
        return default
    try:
        value = float(str(raw).strip())
    except ValueError:
        value = float("nan")
    if not (value >= minimum and value < float("inf")):
        accepted = "a number above 0" if minimum > 0 else "a number 0 or more"
        raise ConfigurationError.invalid(argument, raw, accepted)
    return value


def host_resources(source: Source) -> HostResources:
    """Each host's CPUs and GPUs, and packing (the settings above; request first).

    Raises:
        ConfigurationError: a value that is not a number of the right range, naming it.
    """
    cpus = _number(source, CPUS_SETTING, 1.0, 1e-4)
    gpus = _number(source, GPUS_SETTING, 0.0, 0.0)
    raw, argument = _setting(source, PACK_SETTING)
    pack = (raw or "0").strip().lower()
    if pack not in ("0", "1", "false", "true"):
        raise ConfigurationError.invalid(argument, raw, "1 (hosts may share nodes) or 0")
    return HostResources(cpus, gpus, pack in ("1", "true"))


def _describe_nodes(nodes: list[dict[str, Any]]) -> str:
    described = []
    for node in nodes:
        resources = node.get("Resources") or {}
        described.append(
            f"node {str(node.get('NodeID'))[:8]} at {node.get('NodeManagerAddress')} "
            f"({resources.get('CPU', 0):g} CPUs, {resources.get('GPU', 0):g} GPUs)"
        )
    return "; ".join(described) or "no node"


def check_cluster(ray: Any, source: Source, hosts: list[str]) -> HostResources:
    """Refuse a job whose hosts this cluster cannot place, naming what the cluster has."""
    wanted = host_resources(source)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    fitting = [n for n in nodes if wanted.fits(n.get("Resources") or {})]
    gpus = f" and {wanted.gpus:g} GPU(s)" if wanted.gpus else ""
    if not fitting:
        raise ConfigurationError(
            f"No node of the Ray cluster can hold a host of {wanted.cpus:g} CPU(s){gpus} "
            f"({CPUS_SETTING}, {GPUS_SETTING}). The cluster has: {_describe_nodes(nodes)}. "
            "Accepted: fewer resources per host, or nodes that have them (docs/ray.md).",
            argument=CPUS_SETTING,
            value=wanted.cpus,
        )
    if len(fitting) < len(hosts) and not wanted.pack:
        raise ConfigurationError(
            f"Invalid instance_count={len(hosts)}: each host runs on a Ray node of its own, and "
            f"the cluster has {len(fitting)} node(s) that can hold a host of {wanted.cpus:g} "
            f"CPU(s){gpus} ({len(nodes)} alive in all: {_describe_nodes(nodes)}). Accepted: "
            f"instance_count at most {len(fitting)}, more nodes, fewer resources per host "
            f"({CPUS_SETTING}, {GPUS_SETTING}), or {PACK_SETTING}=1 to let hosts share "
            "nodes (docs/ray.md).",
            argument="instance_count",
            value=len(hosts),
        )
    return wanted


def host_addresses(nodes: Mapping[str, str]) -> dict[str, str]:
    """Each host's address: its node's, or ``127.0.0.N`` when every host is on one machine.

    Nodes of one machine share its address; mpirun would then take every host
    for its own and start no ``orted`` on the others. Loopback aliases
    (``algo-1`` at 127.0.0.1, ``algo-2`` at 127.0.0.2 ...) reach the same machine
    and tell the hosts apart.
    """
    if len(nodes) > 1 and len(set(nodes.values())) == 1:
        return {host: f"127.0.0.{i}" for i, host in enumerate(nodes, start=1)}
    return dict(nodes)


@dataclass
class _RayJob:
    """What this process holds of one running Ray job."""

    placement_group: Any = None
    actors: dict[str, Any] = field(default_factory=dict)
    #: Each host's actor's name (in :data:`NAMESPACE`), for mpirun's launch agent.
    names: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    codes: dict[str, int | None] = field(default_factory=dict)
    pumps: list[threading.Thread] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


#: The file in a job directory that says where its hosts ran.
NODES_FILE = "ray-nodes.json"


def _wait(ray: Any, refs: list[Any], job: LocalJob, timeout: float, what: str) -> list[Any]:
    """``ray.get(refs)``, given up when the job is stopped or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pending = list(refs)
    while pending:
        if job.stop_requested.is_set():
            raise JobError(f"The job was stopped while {what}.")
        if time.monotonic() >= deadline:
            raise JobError(f"Timed out after {timeout:.0f} s {what}.")
        _, pending = ray.wait(pending, num_returns=len(pending), timeout=0.2)
    return list(ray.get(refs))


class RayHosts:
    """Runs each host of a job as a Ray actor on a node of its own (a ``HostRunner``)."""

    def __init__(self) -> None:
        self._jobs: dict[str, _RayJob] = {}

    def check_can_run(self, plan: JobPlan) -> None:
        """Refuse, before anything is made, a job this cluster cannot place (see :func:`check_cluster`)."""
        check_cluster(connect(), plan, list(plan.hosts))

    def check_name(self, name: str, job_dir: str) -> None:
        """The actors are named by the job directory's own record: nothing can clash."""

    def host_view(self, plan: JobPlan) -> JobFields:
        """Each host's tree here is the one its actor fills from its node: the plan as it is."""
        return plan

    # -- placing the hosts ---------------------------------------------------------------
    def prepare(self, job: LocalJob) -> HostHandles:
        """Place the hosts' actors (returned) and stage each host's tree on its node."""
        ray = connect()
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        for host in job.hosts:
            write_host_config(job.layout.host_dir(host), job.request, host, job.hosts)
        wanted = check_cluster(ray, job.plan, job.hosts)
        state = _RayJob()
        self._jobs[job.layout.job_dir] = state
        strategy = "PACK" if wanted.pack else "STRICT_SPREAD"
        state.placement_group = placement_group(
            [wanted.bundle for _ in job.hosts], strategy=strategy, name=f"launchbay-{job.name}"
        )
        timeout = _number(job.plan, PLACEMENT_TIMEOUT_SETTING, 120.0, 1.0)
        _wait(
            ray,
            [state.placement_group.ready()],
            job,
            timeout,
            f"waiting for the Ray cluster to place {len(job.hosts)} host(s) "
            f"({strategy}, {wanted.bundle} each; {PLACEMENT_TIMEOUT_SETTING})",
        )
        agent = ray.remote(HostAgent)
        token = secrets.token_hex(4)
        for index, host in enumerate(job.hosts):
            state.names[host] = f"launchbay-{job.name}-{host}-{token}"
            state.actors[host] = agent.options(
                name=state.names[host],
                namespace=NAMESPACE,
                num_cpus=wanted.cpus,
                num_gpus=wanted.gpus,
                max_concurrency=8,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=state.placement_group,
                    placement_group_bundle_index=index,
                ),
            ).remote(job.name, host)
        where = _wait(
            ray,
            [state.actors[h].where.remote() for h in job.hosts],
            job,
            _CALL_TIMEOUT,
            "starting the hosts' actors",
        )
        state.nodes = dict(zip(job.hosts, where, strict=True))
        with open(os.path.join(job.layout.job_dir, NODES_FILE), "w", encoding="utf-8") as f:
            json.dump(state.nodes, f, indent=2)
        for host, node in state.nodes.items():
            logger.info(
                "Host %s of job %s runs on Ray node %s (%s)",
                host,
                job.name,
                node["node_id"][:8],
                node["address"],
            )
        configs = {host: pack_tree(job.layout.host_dir(host)) for host in job.hosts}
        _wait(
            ray,
            [
                state.actors[h].setup.remote(list(job.hosts), job.host_plan, configs[h])
                for h in job.hosts
            ],
            job,
            float(os.environ.get(ENV.STARTUP_TIMEOUT) or 900),
            "staging the channels on the hosts' nodes",
        )
        return HostHandles(dict(state.actors))

    # -- running them --------------------------------------------------------------------
    def start(self, job: LocalJob) -> HostHandles:
        """Start each host's runtime through its actor; returns the actors and the log pumps."""
        ray = connect()
        state = self._jobs[job.layout.job_dir]
        first = state.actors[job.hosts[0]]
        addresses = host_addresses({h: str(state.nodes[h]["address"]) for h in job.hosts})
        port = ray.get(first.free_port_block.remote(2 * len(job.hosts) + 2), timeout=_CALL_TIMEOUT)
        environment = {str(k): str(v) for k, v in job.plan.environment.items()}
        install = environment.get(ENV.INSTALL_REQUIREMENTS) or "0"
        settings = RuntimeSettings(
            ray=True,
            standins=True,
            host_addresses=addresses,
            master_port=int(port),
            grace_seconds=job.grace,
            install_requirements=install,
        )
        environment.update(
            {
                "TRAINING_JOB_NAME": job.name,
                "TRAINING_JOB_ARN": job_arn(job.name, environment),
                ACTORS_SETTING: json.dumps(state.names),
            }
        )
        with job.lock:
            for host in job.hosts:
                state.codes[host] = None
        _wait(
            ray,
            [
                state.actors[h].start.remote(list(job.hosts), settings, environment)
                for h in job.hosts
            ],
            job,
            _CALL_TIMEOUT,
            "starting the hosts' runtimes",
        )
        for host in job.hosts:
            thread = threading.Thread(
                target=self._pump,
                args=(ray, job, host, state),
                name=f"launchbay-ray-{job.name}-{host}",
                daemon=True,
            )
            thread.start()
            state.pumps.append(thread)
        return HostHandles(dict(state.actors), tuple(state.pumps))

    def _pump(self, ray: Any, job: LocalJob, host: str, state: _RayJob) -> None:
        """Copy the host's output into its log file until it ends, then fetch its files."""
        actor = state.actors[host]
        offset, code = 0, None
        lost: str | None = None
        with open(job.layout.log_file(host), "ab") as log:
            while code is None:
                try:
                    data, code = ray.get(actor.poll.remote(offset, 0.5), timeout=_CALL_TIMEOUT)
                except Exception as exc:  # the actor or its node is gone
                    lost = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                    break
                if data:
                    log.write(data)
                    log.flush()
                    offset += len(data)
                    job.note_output()
            if lost is not None:
                log.write(f"[launchbay] the Ray actor of host {host} was lost: {lost}\n".encode())
                job.note_output()
                code = LOST_EXIT_CODE
        if lost is None:
            problem = self._fetch_files(ray, job, host, state)
            if problem is not None:
                logger.error(
                    "Could not fetch the files of host %s of job %s: %s", host, job.name, problem
                )
                node = state.nodes.get(host) or {}
                text = (
                    f"Could not fetch the files of host {host} from its Ray node "
                    f"{str(node.get('node_id', '?'))[:8]} ({node.get('address', '?')}): {problem}. "
                    "Its model, output and checkpoint files are missing, so the job failed "
                    "instead of completing without them."
                )
                with open(job.layout.log_file(host), "ab") as log:
                    log.write(f"[launchbay] {text}\n".encode())
                job.note_output()
                if code == 0:  # the host's own failure, if any, stays the reason
                    output = os.path.join(job.layout.host_dir(host), "output")
                    os.makedirs(output, exist_ok=True)
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(output, "failure"))
                    with open(os.path.join(output, "failure"), "w", encoding="utf-8") as f:
                        f.write(text)
                    code = FETCH_FAILED_EXIT_CODE
        with job.lock:
            state.codes[host] = code
        job.notify()

    def _fetch_files(self, ray: Any, job: LocalJob, host: str, state: _RayJob) -> str | None:
        """Bring the host's files from its node into its tree here; why that failed, or ``None``.

        The agent packs them into a node-local tar (``local_process``'s rules; what it
        left out is named in warnings here); the client reads it in chunks of at most
        :data:`~launchbay.backends.ray.agent.FILES_CHUNK` bytes, :data:`_IN_FLIGHT` asked for ahead,
        into a file of the job directory, and unpacks that with the one safe
        extraction. Nothing is ever whole in memory.
        """
        actor = state.actors[host]
        try:
            packed = ray.get(actor.collect.remote(), timeout=_CALL_TIMEOUT)
        except Exception as exc:  # the actor, its node or its disk failed
            return f"packing them on the node failed ({_first_line(exc)})"
        for rel, why in packed.get("skipped") or []:
            logger.warning("Not packing %s of host %s (on its Ray node): %s", rel, host, why)
        size = int(packed.get("size") or 0)
        if not size:
            return None
        fd, archive = tempfile.mkstemp(
            prefix=f".{host}-files-", suffix=".tar", dir=job.layout.job_dir
        )
        try:
            with os.fdopen(fd, "wb") as out:
                offsets = list(range(0, size, FILES_CHUNK))
                pending = [
                    actor.read_collected.remote(o, FILES_CHUNK) for o in offsets[:_IN_FLIGHT]
                ]
                for index, offset in enumerate(offsets):
                    try:
                        data = ray.get(pending.pop(0), timeout=_CALL_TIMEOUT)
                    except Exception as exc:
                        return f"reading them from the node failed at byte {offset} ({_first_line(exc)})"
                    if index + _IN_FLIGHT < len(offsets):
                        pending.append(
                            actor.read_collected.remote(offsets[index + _IN_FLIGHT], FILES_CHUNK)
                        )
                    expected = min(FILES_CHUNK, size - offset)
                    if len(data) != expected:
                        return f"the node sent {len(data)} bytes at byte {offset}, not {expected}"
                    out.write(data)
                    del data
            try:
                result = safe_extract(
                    archive, job.layout.host_dir(host), what=f"the files of host {host}"
                )
            except (OSError, tarfile.TarError) as exc:
                return f"unpacking them failed ({_first_line(exc)})"
            if result.failed:
                name, why = result.failed[0]
                more = f" (and {len(result.failed) - 1} more)" if len(result.failed) > 1 else ""
                return f"{name} {why}{more}"
            return None
        except OSError as exc:
            return f"writing them here failed ({_first_line(exc)})"
        finally:
            with contextlib.suppress(OSError):
                os.unlink(archive)

    def exit_codes(self, job: LocalJob) -> dict[str, int | None]:
        state = self._jobs.get(job.layout.job_dir)
        if state is None:
            return {}
        with job.lock:
            return dict(state.codes)

    def running(self, job: LocalJob) -> list[str]:
        return [host for host, code in self.exit_codes(job).items() if code is None]

    def signal(self, job: LocalJob, hosts: list[str], sig: signal.Signals) -> None:
        """``sig`` to each host's process group, sent by its actor on its node."""
        state = self._jobs.get(job.layout.job_dir)
        if state is None:
            return
        ray = connect()
        refs = [state.actors[h].signal.remote(int(sig)) for h in hosts if h in state.actors]
        with contextlib.suppress(Exception):
            ray.wait(refs, num_returns=len(refs), timeout=10)

    def reap(self, job: LocalJob, hosts: list[str]) -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(h in self.running(job) for h in hosts):
            time.sleep(POLL)

    def teardown(self, job: LocalJob) -> None:
        """Let the pumps finish, clean every node up, kill the actors, free the placement group."""
        state = self._jobs.pop(job.layout.job_dir, None)
        if state is None:
            return
        for pump in state.pumps:
            pump.join(_CALL_TIMEOUT if not job.force_kill.is_set() else 5)
        self._release(state, wait=15.0)

    def _release(self, state: _RayJob, wait: float) -> None:
        ray = _ray()
        if not ray.is_initialized():
            return
        refs = [actor.cleanup.remote() for actor in state.actors.values()]
        with contextlib.suppress(Exception):
            ray.wait(refs, num_returns=len(refs), timeout=wait)
        for actor in state.actors.values():
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        if state.placement_group is not None:
            from ray.util.placement_group import remove_placement_group

            with contextlib.suppress(Exception):
                remove_placement_group(state.placement_group)

    def hard_kill(self, job: LocalJob) -> None:
        state = self._jobs.pop(job.layout.job_dir, None)
        if state is not None:
            self._release(state, wait=3.0)

    def hosts_left(self, job_dir: str) -> bool:
        """Whether a job of this process still has hosts; a dead client's actors end with it."""
        state = self._jobs.get(job_dir)
        return state is not None and any(code is None for code in state.codes.values())

    def stop_orphan_hosts(self, name: str, layout: JobLayout, grace: float) -> None:
        """Nothing to do: Ray ends the actors of a driver that died, and each runtime with its actor."""
