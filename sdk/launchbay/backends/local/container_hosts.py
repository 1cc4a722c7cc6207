"""The container host runner of local Docker mode (``local`` / ``local_gpu``): one container per instance.

The job's life (staging, failure triage, outputs, Ctrl-C, teardown at exit) is
:class:`launchbay.backends.local.control.LocalBackend`'s, the same code the
``local_process`` backend runs. This module only runs the hosts
(:class:`ContainerHosts`, a :class:`~launchbay.backends.local.hosts.HostRunner`), as SageMaker
runs the training image: ``docker run IMAGE train`` on every instance, through
the Docker Engine API (the ``docker`` package; no compose binary).

Per job:

* a bridge network ``launchbay-<job>``; with ``EnableNetworkIsolation`` it is
  ``internal`` and its bridge has no address, so the containers reach each
  other and nothing else (not even this machine);
* containers ``launchbay-<job>-algo-1`` ... with hostnames ``algo-1`` ...
  (also their aliases on the job network, and lines of the job's hosts file, every
  container's ``/etc/hosts``, so a name outlives its container: :mod:`.etc_hosts`),
  command ``train``, ``init`` on (signals
  reach the runtime, zombies are reaped), labelled with the job directory and
  the client's process;
* bind mounts of the host's tree in the job directory: ``input/config`` and
  each channel (read-only) under ``/opt/ml/input``, ``model``, ``output``, the
  checkpoint dir at the request's checkpoint ``LocalPath``, and the unpacked
  code at ``/opt/ml/code`` (a ``file://`` code package is unpacked on this
  machine and ``sagemaker_submit_directory`` reads ``/opt/ml/code``, as SDK v2's
  local mode does; ``s3://`` code is fetched by the container itself). Channels
  are symlink trees: the directories their links point into (the S3 cache, the
  ``file://`` source) are mounted read-only at the same path;
* ``local_gpu``: each container its own share of this machine's GPUs, a device
  request with their ``device_ids`` (:mod:`launchbay._capacity`: 4 GPUs and
  2 hosts give ``0,1`` and ``2,3``).

The environment is the request's ``Environment``, ``TRAINING_JOB_NAME``,
``TRAINING_JOB_ARN``, ``LAUNCHBAY_GRACE_SECONDS`` and ``LAUNCHBAY_STANDINS=1``
(local stand-ins such as ``smdistributed.dataparallel`` may be used, docs/smddp.md). AWS credentials reach the
containers only when a channel, the code, the output or the checkpoints are on
S3: their values go to the engine, and the compose file names them without
values. ``AWS_ENDPOINT_URL`` (and the region) go along; an endpoint on this
machine's loopback, inherited or given in ``environment=`` (``AWS_ENDPOINT_URL``,
``AWS_ENDPOINT_URL_<SERVICE>``), is rewritten to ``host.docker.internal``, with one
notice, so a container can reach a server (e.g. moto) listening on the host
(:mod:`launchbay.backends.local.endpoints`). Another job's network variables
(``LAUNCHBAY_JOB_NETWORK``, ``LAUNCHBAY_HOST_NS_PID``) are not passed.

``<job dir>/docker-compose.yaml`` reproduces the run by hand
(``docker compose -f ... up``); it holds no credentials, and is readable by its
owner only (mode 0600), as it holds the job's environment values.

Teardown always happens: after success, failure, stop, Ctrl-C, an exception in
the client or the interpreter's exit, every container and the network of the
job are removed. Containers whose client process died without teardown
(``kill -9``) are removed by the next Docker job on this machine. Files the
containers wrote as root are handed back to the caller's user before the job
ends, so deleting a job directory never fails on them.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import json
import logging
import os
import shlex
import signal
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from launchbay._capacity import cpusets_of
from launchbay._docker import docker_errors, shared_client
from launchbay.backends.local import (
    container_cleanup,
    container_exits,
    etc_hosts,
    pip_cache,
    warm_pool,
)
from launchbay.backends.local.compose import HOST_GATEWAY, ISOLATED_OPTIONS, compose_document
from launchbay.backends.local.container_cleanup import (
    LABEL_CLIENT,
    LABEL_JOB,
    LABEL_JOB_DIR,
    network_name,
)
from launchbay.backends.local.container_config import (
    HostSpec,
    bind_mount,
    container_options,
    engine_pins_cpus,
    host_config_args,
)
from launchbay.backends.local.endpoints import client_endpoints, on_client
from launchbay.backends.local.hosts import RUNTIME_MARGIN, HostHandles
from launchbay.backends.local.layout import JobLayout, file_uri_path, write_text_atomic
from launchbay.backends.local.logs import join_readers, start_reader
from launchbay.backends.local.logs import split_lines as _split_lines
from launchbay.backends.local.record import CLIENT_ID, LocalJob, job_arn
from launchbay.backends.local.signals import clean_up_later
from launchbay.backends.plan import JobFields, JobPlan
from launchbay.errors import DockerError, ImageNotFoundError, JobError
from launchbay.runtime.code import fetch_code
from launchbay.runtime.contract import (
    DEFAULT_TENSORBOARD_PATH,
    write_host_config,
)
from launchbay.runtime.names import ENV, HP
from launchbay.runtime.settings import RuntimeSettings
from launchbay.s3uri import is_file_uri, is_s3_uri

__all__ = ["ContainerHosts", "compose_document", "COMPOSE_FILE"]

logger = logging.getLogger("launchbay.backends.docker")

COMPOSE_FILE = "docker-compose.yaml"
#: The job's hosts file, every container's ``/etc/hosts`` (:mod:`~launchbay.backends.local.etc_hosts`).
HOSTS_FILE = "hosts"
CONTAINER_BASE = "/opt/ml"
CODE_DIR = "/opt/ml/code"
_CREDENTIAL_NAMES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
_PASSED_AWS_NAMES = ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")


@dataclass
class _Container:
    """One host's container: what it is made of, its id and exit code (set by a waiter)."""

    spec: HostSpec
    id: str = ""
    exit_code: int | None = None
    started: bool = False
    exited: threading.Event = field(default_factory=threading.Event)
    #: The thread copying the container's output to its log file, once started.
    reader: threading.Thread | None = None


def _needs_aws(source: JobFields | Mapping[str, Any]) -> bool:
    """Whether the containers read or write S3 (a channel, the outputs, checkpoints, code)."""
    plan = JobFields.of(source)
    uris = [channel.uri for channel in plan.channels]
    uris.append(plan.output_path)
    uris.append(plan.checkpoint.uri if plan.checkpoint is not None else "")
    uris.append(plan.submit_directory or "")
    return any(is_s3_uri(uri) for uri in uris if uri)


def container_endpoint(url: str) -> str:
    """``url`` as a container on the job network reaches it (loopback -> the host gateway)."""
    return on_client(url, HOST_GATEWAY)


class ContainerHosts:
    """Runs each host of a local job as a Docker container (a :class:`~launchbay.backends.local.hosts.HostRunner`).

    Args:
        gpu: Give every container its share of the GPUs (``instance_type="local_gpu"``).
        client: A ``docker.DockerClient`` (default: from the environment).
        owner: ``(uid, gid)`` the files containers write are given to when the job
            ends (default: the caller's; nothing to do for root).
    """

    def __init__(
        self,
        *,
        gpu: bool = False,
        client: Any = None,
        owner: tuple[int, int] | None = None,
    ) -> None:
        self.gpu = gpu
        self._client = client
        self._client_lock = threading.Lock()
        self.owner = owner if owner is not None else (os.getuid(), os.getgid())
        self._background = concurrent.futures.ThreadPoolExecutor(
            max_workers=4, thread_name_prefix="launchbay-docker"
        )
        self._network_made: dict[str, concurrent.futures.Future[None]] = {}
        self._network_ids: dict[str, str] = {}  # job dir -> the id of the network made for it
        self._deaths = container_exits.DeathWatch(lambda: self.client)
        self._image_ids: dict[str, str] = {}  # image -> its engine id, as check_can_run saw it
        self._warm: dict[str, warm_pool.PoolPlan] = {}  # job dir -> the pool its hosts run in
        self._pools: warm_pool.Pools | None = None
        self._image_configs: dict[str, dict[str, Any]] = {}  # image -> its Config (Env, Entrypoint)

    @property
    def client(self) -> Any:
        """The ``docker.DockerClient`` (made, and the engine checked, on first use)."""
        with self._client_lock:
            if self._client is None:
                self._client = shared_client("Local Docker mode (instance_type='local')")
            return self._client

    # -- before anything is made ----------------------------------------------------
    def check_can_run(self, plan: JobPlan) -> None:
        container_options()  # an invalid ~/.sagemaker/config.yaml is refused before anything starts
        if not warm_pool.keep_alive_of(plan.request):
            # What dead clients left is no part of this job (a leftover of its name is
            # replaced where it is met): swept beside the job's start, not before it.
            self._background.submit(self._sweep)
        else:  # a pool past its period ends before this job looks for one
            self.remove_orphans()
        self._ensure_image(plan.image)

    def _sweep(self) -> None:
        try:
            self.remove_orphans()
        except Exception as exc:  # the next job's start sweeps again
            logger.warning("Could not remove what earlier launchbay processes left: %s", exc)

    def _ensure_image(self, image: str) -> None:
        errors = docker_errors()
        try:
            found = self.client.images.get(image)
            self._image_ids[image] = found.id
            self._image_configs[image] = found.attrs.get("Config") or {}
            return
        except errors.ImageNotFound:
            pass
        except errors.APIError as exc:
            raise DockerError(
                f"The Docker engine could not look up image {image!r}: {exc}"
            ) from exc
        # Deferred: the image tooling is large and needed only when the image is missing.
        from launchbay import images

        command = images.build_command(image)
        if command:
            raise ImageNotFoundError(
                f"The training image {image!r} is not on this machine's Docker engine. Build it "
                f"with:\n    {command}\nor pass image_uri= an image you have.",
                argument="image_uri",
                value=image,
            )
        from launchbay._algorithm_images import OPEN_SOURCE_CONTAINERS, builtin_algorithm

        algorithm = builtin_algorithm(image)
        try:  # an ECR image (a built-in algorithm, a DLC) logs in through boto3 (docs/algorithms.md)
            images.pull_image(image, client=self.client)
        except (images.ImageError, errors.APIError) as exc:
            what = f"SageMaker's built-in {algorithm!r} algorithm" if algorithm else "The image"
            source = OPEN_SOURCE_CONTAINERS.get(algorithm or "")
            raise ImageNotFoundError(
                f"The training image {image!r} is not on this machine's Docker engine and "
                f"pulling it failed ({getattr(exc, 'explanation', None) or exc}). {what} runs "
                "only from its image: pull it by hand with\n"
                f"{images.manual_pull_commands(image)}\n(or `launchbay images pull {image}`)"
                + (
                    f", or build its open-source container ({source}) and pass image_uri="
                    if source
                    else ""
                )
                + ". Accepted: an image `docker images` lists, or a launchbay image from "
                "`launchbay images build`.",
                argument="image_uri",
                value=image,
            ) from exc

    def remove_orphans(self) -> int:
        """See :func:`launchbay.backends.local.container_cleanup.remove_orphans`."""
        return container_cleanup.remove_orphans(self.client)

    # -- the job's hosts ----------------------------------------------------------------
    def host_view(self, plan: JobPlan) -> JobFields:
        """Each ``LocalPath`` (checkpoints, tensors, TensorBoard) is mounted from its default
        place in the host's tree: the plan with the given paths dropped."""
        return plan.host_view()

    def prepare(self, job: LocalJob) -> HostHandles:
        """The hosts' trees, the job's network (begun), and each container's spec (returned)."""
        request, layout = job.request, job.layout
        # The engine makes the job's network (tens of ms of iptables work) while the hosts'
        # trees are written: start() waits for it, teardown too (nothing made after removal).
        # A job that asks for a warm pool runs on the pool's network instead.
        keep_alive = warm_pool.keep_alive_of(request)
        if not keep_alive:
            self._network_made[layout.job_dir] = self._background.submit(self._make_network, job)
        # Each LocalPath is mounted from its default place in the host's tree (host_view,
        # which the control loop kept as job.host_plan before this call).
        host_plan = job.host_plan
        seen = copy.deepcopy(request)
        code = job.plan.submit_directory
        # A file:// package is unpacked here; s3:// code and a path inside the container
        # (the "code" channel of a network-isolated job) are the container's to fetch.
        local_code = is_file_uri(code or "")
        if local_code:
            seen.setdefault("HyperParameters", {})[HP.SUBMIT_DIRECTORY] = json.dumps(CODE_DIR)
        for host in job.hosts:
            host_dir = layout.host_dir(host)
            write_host_config(host_dir, seen, host, job.hosts, container_base=CONTAINER_BASE)
            if local_code:
                fetch_code(file_uri_path(str(code)), os.path.join(host_dir, "code"))
        # Each container gets exactly its channels' files (hard links), nothing around them.
        job.stager.stage_channels(host_plan, layout, own_files=True)
        job.stager.restore_checkpoints(host_plan, layout)
        specs = self.host_specs(
            job.plan,
            layout.job_dir,
            job.hosts,
            local_code=local_code,
            grace=job.grace,
            gpus=job.gpus,
        )
        host_code = os.path.join(layout.host_dir(job.hosts[0]), "code")
        if pip_cache.installs_requirements(code, local_code, host_code):
            self._add_pip_cache(job.plan.image, specs)
        containers = {s.host: _Container(s) for s in specs}
        self.write_compose_file(job, specs)
        if keep_alive:
            self._plan_warm(job, specs, keep_alive)
        return HostHandles(containers)

    def _add_pip_cache(self, image: str, specs: list[HostSpec]) -> None:
        """Mount the image's pip cache in every container (:mod:`.pip_cache`)."""
        if not specs or not pip_cache.wants_pip_cache(specs[0].environment):
            return
        if image not in self._image_ids:
            found = self.client.api.inspect_image(image)
            self._image_ids[image] = found["Id"]
            self._image_configs[image] = found.get("Config") or {}
        cache = pip_cache.pip_cache_dir(self._image_ids[image])
        entrypoint = pip_cache.entrypoint_with_cache(self._image_configs.get(image) or {})
        for spec in specs:
            spec.binds[cache] = bind_mount(pip_cache.CONTAINER_PIP_CACHE, "rw")
            spec.environment["PIP_CACHE_DIR"] = pip_cache.CONTAINER_PIP_CACHE
            if entrypoint:
                spec.entrypoint = list(entrypoint)

    def host_specs(
        self,
        source: JobFields | Mapping[str, Any],
        job_dir: str,
        hosts: list[str],
        *,
        local_code: bool,
        grace: float,
        gpus: Mapping[str, list[str]] | None = None,
    ) -> list[HostSpec]:
        """What each container is made of: mounts, environment and GPUs.

        ``source`` is the job's plan (a bare request is derived the same way). ``gpus``
        is each host's share of the GPUs (the plan's, :func:`launchbay.backends.plan.plan_request`);
        a ``local_gpu`` backend refuses to make containers without it.
        """
        if self.gpu and gpus is None:
            raise ValueError("local_gpu containers need each host's GPUs (launchbay/_capacity.py)")
        plan = JobFields.of(source)
        name = plan.job_name
        # A container's namespaces are its own: another job's network variables are dropped.
        environment = {k: v for k, v in plan.environment.items() if k not in ENV.JOB_ONLY}
        environment.update(
            {
                "TRAINING_JOB_NAME": name,
                "TRAINING_JOB_ARN": job_arn(name),
                # The grace period, and local stand-ins of SageMaker-only libraries
                # (docs/smddp.md), as the containers' runtime reads them.
                **RuntimeSettings(grace_seconds=grace, standins=True).to_environ(),
            }
        )
        secret_names: list[str] = []
        if _needs_aws(plan):
            for key in _PASSED_AWS_NAMES:
                if os.environ.get(key):
                    environment.setdefault(key, os.environ[key])
            secret_names = list(_CREDENTIAL_NAMES)
        # Endpoints on this machine's loopback, inherited or given: a container's loopback is
        # its own, this machine is the host gateway (one notice names them).
        environment.update(client_endpoints(environment, HOST_GATEWAY))
        checkpoint, hook, tensorboard = plan.checkpoint, plan.debug_hook, plan.tensorboard
        specs = []
        cpusets = cpusets_of(len(hosts)) if engine_pins_cpus(self.client) else [None] * len(hosts)
        for index, host in enumerate(hosts):
            host_dir = os.path.join(job_dir, host)
            binds: dict[str, dict[str, str]] = {
                os.path.join(host_dir, "input", "config"): bind_mount("/opt/ml/input/config", "rw"),
                os.path.join(host_dir, "model"): bind_mount("/opt/ml/model", "rw"),
                os.path.join(host_dir, "output"): bind_mount("/opt/ml/output", "rw"),
            }
            if checkpoint is not None:
                target = checkpoint.given_path or "/opt/ml/checkpoints"
                binds[os.path.join(host_dir, "checkpoints")] = bind_mount(target, "rw")
            given = hook.given_path if hook is not None else None
            if given and not given.startswith("/opt/ml/output/"):
                binds[os.path.join(host_dir, "output", "tensors")] = bind_mount(given, "rw")
            if tensorboard is not None and tensorboard.local_path != DEFAULT_TENSORBOARD_PATH:
                binds[os.path.join(host_dir, "output", "tensorboard")] = bind_mount(
                    tensorboard.local_path, "rw"
                )
            if local_code:
                binds[os.path.join(host_dir, "code")] = bind_mount(CODE_DIR, "rw")
            data_dir = os.path.join(host_dir, "input", "data")
            for channel in plan.channels:
                channel_dir = os.path.join(data_dir, channel.name)
                target = f"/opt/ml/input/data/{channel.name}"
                # Exactly the channel: a file:// directory is mounted itself; any other
                # channel directory holds its own files (stage_channels(own_files=True)).
                if os.path.islink(channel_dir):
                    binds[os.path.realpath(channel_dir)] = bind_mount(target, "ro")
                else:
                    binds[channel_dir] = bind_mount(target, "ro")
            specs.append(
                HostSpec(
                    host,
                    f"launchbay-{name}-{host}",
                    binds,
                    dict(environment),
                    secret_names,
                    list(gpus[host]) if self.gpu and gpus is not None else None,
                    cpus=cpusets[index],
                )
            )
        return specs

    def check_name(self, name: str, job_dir: str) -> None:
        """Refuse a name whose containers run for another job directory.

        Containers and the job network are named after the job alone
        (``launchbay-<job>-<host>``), so a job of the same name started from
        another ``LAUNCHBAY_HOME`` (or job root) holds them: it is left alone, and
        this job is refused before anything is made, naming that job's directory.
        """
        try:
            found = self.client.api.containers(
                filters={"label": f"{LABEL_JOB}={name}", "status": "running"}
            )
        except docker_errors().APIError as exc:
            raise DockerError(f"Could not list the Docker containers: {exc}") from exc
        own = job_dir
        others = sorted(
            {
                str((c.get("Labels") or {}).get(LABEL_JOB_DIR) or "?")
                for c in found
                if (c.get("Labels") or {}).get(LABEL_JOB_DIR) != own
            }
        )
        if others:
            raise JobError(
                f"A local Docker training job named {name!r} is already running from another "
                f"job directory ({', '.join(others)}; another LAUNCHBAY_HOME). Its containers "
                f"and network are named after the job ({network_name(name)}), so a second job "
                "of that name cannot run beside it; it is left alone. Accepted: another "
                f"job_name, or stop that job first (LAUNCHBAY_HOME=... launchbay stop {name})."
            )

    def _isolated(self, plan: JobFields) -> bool:
        return plan.network_isolation

    def _credentials(self, specs: list[HostSpec], stager: Any) -> dict[str, str]:
        if not any(s.secret_names for s in specs):
            return {}
        values = {k: os.environ[k] for k in _CREDENTIAL_NAMES if os.environ.get(k)}
        if "AWS_ACCESS_KEY_ID" in values:
            return values
        try:
            frozen = stager.session.boto_session.get_credentials().get_frozen_credentials()
        except Exception as exc:  # no credentials anywhere: the containers get none
            logger.debug("No AWS credentials to hand to the containers: %s", exc)
            return {}
        found = {
            "AWS_ACCESS_KEY_ID": frozen.access_key,
            "AWS_SECRET_ACCESS_KEY": frozen.secret_key,
            "AWS_SESSION_TOKEN": frozen.token,
        }
        return {k: v for k, v in found.items() if v}

    def _make_network(self, job: LocalJob) -> None:
        """Create the job's network ``launchbay-<job>`` (a leftover of that name is replaced)."""
        network = network_name(job.name)
        isolated = self._isolated(job.plan)
        errors = docker_errors()
        api = self.client.api

        def create_network() -> None:
            made = api.create_network(
                network,
                driver="bridge",
                internal=isolated,
                options=ISOLATED_OPTIONS if isolated else None,
                labels=self._labels(job),
                check_duplicate=True,
            )
            # Removed by this id (teardown), never by name: a later job of the same name,
            # or the next attempt of this one, makes a network of the same name.
            self._network_ids[job.layout.job_dir] = str(made.get("Id") or network)

        try:
            try:
                create_network()
            except errors.APIError as exc:
                if exc.status_code != 409:
                    raise
                self._remove_network(network)  # a leftover of an earlier run of this job name
                create_network()
        except errors.APIError as exc:
            raise DockerError(f"Could not create the Docker network {network!r}: {exc}") from exc

    def _network_ready(self, job: LocalJob) -> None:
        """Wait for the network prepare() started (make it now if prepare() did not run)."""
        made = self._network_made.pop(job.layout.job_dir, None)
        if made is None:
            self._make_network(job)
        else:
            made.result()

    @staticmethod
    def _labels(job: LocalJob) -> dict[str, str]:
        return {LABEL_JOB: job.name, LABEL_JOB_DIR: job.layout.job_dir, LABEL_CLIENT: CLIENT_ID}

    # -- warm pools (launchbay.backends.local.warm_pool) ---------------------------------
    def _plan_warm(self, job: LocalJob, specs: list[HostSpec], keep_alive: int) -> None:
        image = job.plan.image
        if image not in self._image_ids:
            self._image_ids[image] = self.client.api.inspect_image(image)["Id"]
        isolated = self._isolated(job.plan)
        # What every pool container shares; each host's cpuset is the pool's per host.
        shared = replace(specs[0], cpus=None)
        options = host_config_args(shared, "", isolated, container_options(for_docker=True))
        config = self._image_configs.get(image) or {}
        entrypoint = specs[0].entrypoint or list(config.get("Entrypoint") or [])
        plan, why = warm_pool.plan_pool(
            specs,
            job.layout.job_dir,
            image=image,
            image_id=self._image_ids[image],
            isolated=isolated,
            host_config=options,
            entrypoint=entrypoint,
            keep_alive=keep_alive,
            fixed_targets=(pip_cache.CONTAINER_PIP_CACHE,),
        )
        if plan is None:
            logger.info("Job %s runs without a warm pool: %s", job.name, why)
            self._network_made[job.layout.job_dir] = self._background.submit(
                self._make_network, job
            )
            return
        self._warm[job.layout.job_dir] = plan

    @property
    def pools(self) -> warm_pool.Pools:
        client = self.client
        with self._client_lock:
            if self._pools is None:
                self._pools = warm_pool.Pools(client)
            return self._pools

    def _start_warm(self, job: LocalJob, plan: warm_pool.PoolPlan) -> None:
        """Run the job in the pool's waiting containers (made now if the pool has none)."""
        api = self.client.api
        try:
            waiting, reused = self.pools.take(plan, job.name)
        except docker_errors().APIError as exc:
            raise DockerError(f"Could not make the warm pool's containers: {exc}") from exc
        link = {"pool": plan.directory, "key": plan.key, "containers": waiting, "reused": reused}
        write_text_atomic(os.path.join(job.layout.job_dir, warm_pool.JOB_FILE), json.dumps(link))
        secrets = self._credentials([e.spec for e in job.procs.values()], job.stager)
        slot_of = partial(self.pools.slot_dir, plan)

        def go(host: str) -> None:
            entry: _Container = job.procs[host]
            entry.id = waiting[host]
            warm_pool.move_in(plan, slot_of, job.layout.host_dir(host), host)
            if job.stop_requested.is_set():
                return
            stream = api.logs(entry.id, stream=True, follow=True)
            env = {**entry.spec.environment, **secrets}
            fifo = os.path.join(slot_of(host, "control"), "go")
            gone = threading.Event()
            if not reused:  # a new pool's waiter may still be starting, or fail to
                threading.Thread(target=self._note_exit, args=(entry.id, gone), daemon=True).start()
            try:
                warm_pool.send_go(fifo, warm_pool.go_message(env, plan.entrypoint), gone)
            except (OSError, TimeoutError):
                warm_pool.move_out(plan, slot_of, job.layout.host_dir(host), host)
                raise
            entry.started = True
            entry.reader = start_reader(job, host, warm_pool.without_ready(_split_lines(stream)))
            threading.Thread(
                target=self._wait_for,
                args=(job, entry),
                name=f"launchbay-wait-{job.name}-{host}",
                daemon=True,
            ).start()

        with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(waiting), 8)) as pool:
            futures = [pool.submit(go, host) for host in job.procs]
        failures = [error for error in (f.exception() for f in futures) if error is not None]
        if failures:
            raise warm_pool.PoolUnusable(
                f"Could not start the job in its warm hosts: {failures[0]}"
            )

    def _note_exit(self, container_id: str, gone: threading.Event) -> None:
        with contextlib.suppress(Exception):
            self.client.api.wait(container_id, timeout=None)
        gone.set()

    def _end_warm(self, job: LocalJob, plan: warm_pool.PoolPlan) -> None:
        """The job's containers removed, its files back in its tree, the pool kept or ended."""
        slots = {
            host: {kind: self.pools.slot_dir(plan, host, kind) for kind in plan.mounts}
            for host in job.procs
        }  # before give_back moves the pool on to its other slot
        self.pools.give_back(plan, job.name, keep=not job.force_kill.is_set())
        for host in job.procs:
            warm_pool.move_out(plan, lambda h, k: slots[h][k], job.layout.host_dir(host), host)

    def start(self, job: LocalJob) -> HostHandles:
        """Start the containers :meth:`prepare` made specs for (``job.procs``): in the job's
        warm pool, else made now; returns them and their log readers."""
        plan = self._warm.get(job.layout.job_dir)
        if plan is not None:
            try:
                self._start_warm(job, plan)
                return self._started(job)
            except warm_pool.PoolUnusable as exc:  # e.g. an image without python3: a cold start
                logger.warning("%s; job %s starts without a warm pool", exc, job.name)
                self._warm.pop(job.layout.job_dir, None)
                warm_pool.give_up(self.client, plan, job.layout.job_dir)
                for entry in job.procs.values():
                    entry.id, entry.started = "", False
        specs = [entry.spec for entry in job.procs.values()]
        image = job.plan.image
        api = self.client.api
        isolated = self._isolated(job.plan)
        labels = self._labels(job)
        network = network_name(job.name)
        errors = docker_errors()
        secrets = self._credentials(specs, job.stager)
        # The engine resolves a container's network when it starts it, not when it makes it:
        # the containers are made while the job network still is (0.1 s of iptables work).
        network_up = threading.Event()
        network_failed: list[BaseException] = []
        hosts_file = os.path.join(job.layout.job_dir, HOSTS_FILE)
        gateway = None if isolated else etc_hosts.host_gateway_address(self.client)
        etc_hosts.start_file(hosts_file, gateway)
        config_options = container_options(for_docker=True)

        def create_and_start(spec: HostSpec) -> None:
            entry: _Container = job.procs[spec.host]
            host_config = api.create_host_config(
                **host_config_args(spec, network, isolated, config_options, hosts_file=hosts_file)
            )
            networking = api.create_networking_config(
                {network: api.create_endpoint_config(aliases=[spec.host])}
            )
            options = dict(
                command=["train"],
                entrypoint=spec.entrypoint,
                name=spec.container_name,
                hostname=spec.host,
                environment={**spec.environment, **secrets},
                labels={**labels, "launchbay.host": spec.host},
                host_config=host_config,
                networking_config=networking,
            )
            try:
                created = api.create_container(image, **options)
            except errors.APIError as exc:
                if exc.status_code != 409:
                    raise
                # The name is taken by a leftover of an earlier run of this job name, or
                # by the container of the run that just ended, going in the background.
                container_cleanup.remove_container_named(self.client, spec.container_name)
                created = api.create_container(image, **options)
            entry.id = created["Id"]
            network_up.wait()
            if network_failed or job.stop_requested.is_set():
                return
            api.start(entry.id)
            entry.started = True
            with contextlib.suppress(errors.APIError):  # gone already: the engine's DNS did
                etc_hosts.name_container(api, entry.id, network, hosts_file, spec.host)
            stream = api.logs(entry.id, stream=True, follow=True)
            entry.reader = start_reader(job, spec.host, _split_lines(stream))
            threading.Thread(
                target=self._wait_for,
                args=(job, entry),
                name=f"launchbay-wait-{job.name}-{spec.host}",
                daemon=True,
            ).start()

        with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(specs), 8)) as pool:
            futures = [pool.submit(create_and_start, spec) for spec in specs]
            try:
                self._network_ready(job)
            except BaseException as exc:  # nothing starts; teardown removes what was made
                network_failed.append(exc)
                raise
            finally:
                network_up.set()
        # Off the start's path: the events since before it are replayed.
        self._deaths.watch(job, job.layout.job_dir, f"{LABEL_JOB_DIR}={job.layout.job_dir}")
        failures = [error for error in (f.exception() for f in futures) if error is not None]
        if failures:
            error = failures[0]
            if isinstance(error, errors.APIError):
                raise DockerError(f"Could not start the job's containers: {error}") from error
            raise error
        return self._started(job)

    @staticmethod
    def _started(job: LocalJob) -> HostHandles:
        """The job's containers (made in :meth:`prepare`, now started) and their log readers."""
        containers: dict[str, _Container] = dict(job.procs)
        readers = tuple(c.reader for c in containers.values() if c.reader is not None)
        return HostHandles(containers, readers)

    def _wait_for(self, job: LocalJob, entry: _Container) -> None:
        try:
            result = self.client.api.wait(entry.id, timeout=None)
            code = int(result.get("StatusCode", -1))
        except Exception as exc:  # removed underneath us, engine gone ...
            logger.debug("Waiting for %s failed: %s", entry.spec.container_name, exc)
            code = -1
        container_exits.record_exit(job, entry, code)

    def exit_codes(self, job: LocalJob) -> dict[str, int | None]:
        return {host: c.exit_code for host, c in job.procs.items()}

    def signal(self, job: LocalJob, hosts: list[str], sig: signal.Signals) -> None:
        """``sig`` to each container's first process (``init``, which passes it on)."""
        for host in hosts:
            with contextlib.suppress(docker_errors().APIError):
                self.client.api.kill(job.procs[host].id, signal=sig.name)

    def reap(self, job: LocalJob, hosts: list[str]) -> None:
        for host in hosts:
            job.procs[host].exited.wait(10)

    def teardown(self, job: LocalJob) -> None:
        """Hand files back to the caller, remove containers and network, let the log readers finish."""
        made = self._network_made.pop(job.layout.job_dir, None)
        if made is not None:  # prepare() failed or the job stopped: made, then removed
            concurrent.futures.wait([made])
        self._deaths.close(job.layout.job_dir)
        plan = self._warm.pop(job.layout.job_dir, None)
        if plan is not None and warm_pool.read_job_pool(job.layout.job_dir) is not None:
            self._end_warm(job, plan)
        try:
            self._give_back_files(job)
        finally:
            self._remove_job_later(job, warm=plan is not None)
            # The readers of a start that failed midway are the containers' (never returned).
            readers = [c.reader for c in job.procs.values() if c.reader is not None]
            join_readers([*job.readers, *readers])

    def _remove_job_later(self, job: LocalJob, *, warm: bool) -> None:
        """The ended job's exited containers, then its network, removed in the background.

        The engine takes 0.05-0.15 s to remove them, which ``fit()`` need not wait for:
        the hosts' files are already in the job's tree and their logs read to the end.
        What was made is removed by id, so a job of the same name started meanwhile (or
        this job's next attempt) keeps its own. The executor's threads are joined at
        interpreter exit, queued work done; a client killed first leaves them to the next
        job's :func:`~launchbay.backends.local.container_cleanup.remove_orphans`. A job
        whose containers are not all known by id (one failed to be made) is looked up by
        its label now, as a warm pool's job is.
        """
        ids = [entry.id for entry in job.procs.values() if entry.id]
        network = self._network_ids.pop(job.layout.job_dir, None)
        if warm or len(ids) < len(job.procs):
            self._remove_job(job.name, job.layout.job_dir, network_later=True)
            return
        clean_up_later(
            self._background,
            f"the containers and network of job {job.name}",
            container_exits.remove_made,
            self.client,
            job.name,
            ids,
            network,
        )

    def running(self, job: LocalJob) -> list[str]:
        return [h for h, c in job.procs.items() if c.started and c.exit_code is None]

    def _remove_job(self, name: str, job_dir: str, network_later: bool = False) -> None:
        """Every container labelled with ``job_dir`` now, then the job's network by name."""
        found = self.client.api.containers(
            all=True, filters={"label": f"{LABEL_JOB_DIR}={job_dir}"}
        )
        container_exits.remove_made(self.client, name, [c["Id"] for c in found], None)
        if network_later:  # executor threads are joined at interpreter exit, queued work done
            network = network_name(name)
            clean_up_later(self._background, f"network {network}", self._remove_network, network)
        else:
            self._remove_network(network_name(name))

    def _remove_network(self, network: str) -> None:
        container_cleanup.remove_network(self.client, network)

    def hard_kill(self, job: LocalJob) -> None:
        self._end_pool_of(job.layout.job_dir)
        self._remove_job(job.name, job.layout.job_dir)

    def _end_pool_of(self, job_dir: str) -> None:
        """End the warm pool job ``job_dir`` runs in (its client is gone or exiting)."""
        link = warm_pool.read_job_pool(job_dir)
        if link is not None:
            warm_pool.stop_pools(self.client, str(link.get("key") or ""), now=True)

    def hosts_left(self, job_dir: str) -> bool:
        found = self.client.api.containers(
            filters={"label": f"{LABEL_JOB_DIR}={job_dir}", "status": "running"}
        )
        found = container_exits.still_running(found)
        link = warm_pool.read_job_pool(job_dir)
        if link is not None and not found:
            ids = set((link.get("containers") or {}).values())
            running = self.client.api.containers(filters={"status": "running"})
            found = [c for c in running if c["Id"] in ids]
        return bool(found)

    def _give_back_files(self, job: LocalJob) -> None:
        """``chown`` what the containers wrote to :attr:`owner` (nothing to do for root)."""
        caches = [
            source
            for entry in job.procs.values()
            for source, bind in entry.spec.binds.items()
            if bind["bind"] == pip_cache.CONTAINER_PIP_CACHE
        ]
        self._give_back(job.plan.image, job.layout.job_dir, job.name, caches[:1])

    def _give_back(
        self, image: str, job_dir: str, name: str, caches: list[str] | None = None
    ) -> None:
        uid, gid = self.owner
        if (uid, gid) == (0, 0):
            return
        volumes = {job_dir: {"bind": "/job", "mode": "rw"}}
        for cache in caches or ():
            volumes[cache] = {"bind": "/pip-cache", "mode": "rw"}
        command = ["chown", "-R", "-h", f"{uid}:{gid}", *(v["bind"] for v in volumes.values())]
        try:
            self.client.containers.run(
                image,
                command,
                entrypoint=[],
                user="0",
                volumes=volumes,
                network_disabled=True,
                remove=True,
                labels={LABEL_JOB_DIR: job_dir, LABEL_JOB: name},
            )
        except docker_errors().DockerException as exc:
            logger.warning(
                "Could not give the files of job %s back to uid %s (%s); some may belong to "
                "root: %s",
                name,
                uid,
                shlex.join(command),
                exc,
            )

    def stop_orphan_hosts(self, name: str, layout: JobLayout, grace: float) -> None:
        """Stop the containers of a job whose client died; keep their whole output as its logs.

        Containers do not notice their client's death: each running one is
        stopped here (SIGTERM to its init, SIGKILL after the grace period). The
        client logged only what it saw before it died, so each host's log file
        is rewritten from its container's complete output, then the containers
        and the job's network are removed.
        """
        api = self.client.api
        errors = docker_errors()
        found = api.containers(all=True, filters={"label": f"{LABEL_JOB_DIR}={layout.job_dir}"})
        timeout = int(grace + RUNTIME_MARGIN + 0.999)
        link = warm_pool.read_job_pool(layout.job_dir)
        if link is not None:  # a warm pool's containers carry no job label
            ids = set((link.get("containers") or {}).values())
            found += [c for c in api.containers(all=True) if c["Id"] in ids]

        def stop(container: dict[str, Any]) -> None:
            # Whatever the engine answers (an error, a read timeout), the output is kept below.
            try:
                api.stop(container["Id"], timeout=timeout)
            except Exception as exc:  # noqa: BLE001
                logger.warning(
                    "Stopping container %s of job %s: %s", container["Id"][:12], name, exc
                )

        running = [c for c in found if c.get("State") == "running"]
        logger.info("Stopping %d of the %d container(s) of job %s", len(running), len(found), name)
        if running:
            with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(running), 8)) as pool:
                list(pool.map(stop, running))
        image = ""
        for container in found:
            host = (container.get("Labels") or {}).get("launchbay.host")
            image = image or str(container.get("Image") or "")
            if not host:
                continue
            try:
                data = api.logs(container["Id"], stdout=True, stderr=True)
            except errors.APIError as exc:
                logger.warning("Could not read the output of %s of job %s: %s", host, name, exc)
                continue
            text = "\n".join(_split_lines([data]))
            write_text_atomic(layout.log_file(host), text + "\n" if text else "")
        if link is not None:
            self._end_pool_of(layout.job_dir)
        if image:
            self._give_back(image, layout.job_dir, name)
        self._remove_job(name, layout.job_dir)

    # -- the compose file -------------------------------------------------------------
    def write_compose_file(self, job: LocalJob, specs: list[HostSpec]) -> str:
        """Write ``<job dir>/docker-compose.yaml`` (no credentials in it); returns its path."""
        import yaml

        document = compose_document(
            job.plan, specs, gpu=self.gpu, isolated=self._isolated(job.plan)
        )
        path = os.path.join(job.layout.job_dir, COMPOSE_FILE)
        text = (
            f"# launchbay local training job {job.name}: run it again by hand with\n"
            f"#   docker compose -f {path} up\n"
            "# AWS credentials are named, not written: compose takes them from your shell.\n"
        ) + yaml.safe_dump(document, sort_keys=False, default_flow_style=False)
        # 0600: the file holds the job's environment values (only credentials are left out).
        tmp = path + ".tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
        return path
