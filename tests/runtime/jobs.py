"""Helpers for the runtime tests: real multi-host jobs on this machine.

``local_job`` builds a job the way the ``local_process`` backend does: one base
dir per host (written with :func:`launchbay.runtime.contract.write_host_config`
from a CreateTrainingJob request), a shared dir, loopback addresses and a free
master port, then starts one ``python -m launchbay.runtime.train`` per host.
Every test checks (and cleans up) that no process of the job is left: a process
belongs to the job when its command line or cwd mentions the job dir.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from launchbay.runtime import contract

MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def free_port() -> int:
    """A TCP port nothing listens on right now (and the next few, for TF)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 60000:
            return port
    return port


def job_processes(marker: str) -> list[psutil.Process]:
    """Live processes whose command line or cwd mentions ``marker``."""
    found = []
    me = os.getpid()
    for proc in psutil.process_iter(["pid", "cmdline", "cwd", "status"]):
        if proc.info["pid"] == me or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        text = " ".join(proc.info["cmdline"] or []) + " " + (proc.info["cwd"] or "")
        if marker in text:
            found.append(proc)
    return found


@dataclass
class HostResult:
    """One host runtime's result."""

    host: str
    returncode: int
    stdout: str
    stderr: str
    base: Path

    @property
    def failure(self) -> str:
        path = self.base / "output" / "failure"
        return path.read_text() if path.exists() else ""

    @property
    def failure_json(self) -> dict:
        return json.loads((self.base / "output" / "launchbay-failure.json").read_text())

    def lines(self) -> list[str]:
        return self.stdout.splitlines()

    def json_lines(self) -> list[dict]:
        """JSON objects printed by ranks (``[rank N] {...}`` or bare)."""
        out = []
        for line in self.lines():
            text = line.split("] ", 1)[1] if line.startswith("[rank ") else line
            if text.startswith("{"):
                out.append(json.loads(text))
        return out


@dataclass
class LocalJob:
    """A multi-host job run on this machine, as the local_process backend runs it."""

    root: Path
    hosts: list[str]
    hyperparameters: dict[str, str]
    extra_env: dict[str, str] = field(default_factory=dict)
    request_extra: dict = field(default_factory=dict)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    port: int = field(default_factory=free_port)

    @property
    def shared(self) -> Path:
        return self.root / "shared"

    @property
    def shm(self) -> Path:
        return self.root / "shm"

    def base(self, host: str) -> Path:
        return self.root / host

    def request(self) -> dict:
        request = {
            "HyperParameters": self.hyperparameters,
            "ResourceConfig": {"InstanceType": "local_process", "InstanceCount": len(self.hosts)},
            "AlgorithmSpecification": {"TrainingInputMode": "File"},
        }
        request.update(self.request_extra)
        return request

    def env(self, host: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "LAUNCHBAY_"))}
        env.update(MPI_ENV)
        env.update(
            {
                "SAGEMAKER_BASE_DIR": str(self.base(host)),
                "LAUNCHBAY_LOCAL_PROCESS": "1",
                "LAUNCHBAY_SHARED_DIR": str(self.shared),
                "LAUNCHBAY_MASTER_PORT": str(self.port),
                "LAUNCHBAY_HOST_ADDRESSES": json.dumps({h: "127.0.0.1" for h in self.hosts}),
                "LAUNCHBAY_GRACE_SECONDS": "3",
                # Open MPI's shared-memory segments in the job's own directory, as the
                # local_process backend puts them (process_hosts._job_shm_dir): a rank or
                # an mpirun killed in a test leaves them in /dev/shm otherwise.
                "OMPI_MCA_btl_vader_backing_directory": str(self.shm),
                "OMPI_MCA_btl_sm_backing_directory": str(self.shm),
            }
        )
        env.update(self.extra_env)
        return env

    def start(self) -> None:
        self.shared.mkdir(parents=True, exist_ok=True)
        self.shm.mkdir(exist_ok=True)
        for host in self.hosts:
            contract.write_host_config(str(self.base(host)), self.request(), host, self.hosts)
        for host in self.hosts:
            self.procs[host] = subprocess.Popen(
                [sys.executable, "-m", "launchbay.runtime.train"],
                env=self.env(host),
                cwd=str(self.root),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )

    def wait(self, timeout: float = 60) -> dict[str, HostResult]:
        deadline = time.monotonic() + timeout
        results = {}
        for host, proc in self.procs.items():
            try:
                out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill()
                out, err = proc.communicate()
                raise AssertionError(
                    f"{host} did not finish in {timeout} s:\n{out}\n{err}"
                ) from None
            results[host] = HostResult(host, proc.returncode, out, err, self.base(host))
        return results

    def run(self, timeout: float = 60) -> dict[str, HostResult]:
        self.start()
        return self.wait(timeout)

    def kill(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for proc in job_processes(str(self.root)):
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass

    def leftovers(self) -> list[psutil.Process]:
        return job_processes(str(self.root))


class JobFactory:
    """Makes :class:`LocalJob` objects with code written from inline sources."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.jobs: list[LocalJob] = []

    def __call__(
        self,
        files: dict[str, str],
        *,
        hosts: int = 1,
        program: str = "train.py",
        hyperparameters: dict[str, object] | None = None,
        env: dict[str, str] | None = None,
        request_extra: dict | None = None,
    ) -> LocalJob:
        root = self.tmp_path / f"job{len(self.jobs)}"
        source = root / "source"
        source.mkdir(parents=True)
        for name, text in files.items():
            path = source / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text))
        hps = {
            "sagemaker_program": json.dumps(program),
            "sagemaker_submit_directory": json.dumps(str(source)),
        }
        for key, value in (hyperparameters or {}).items():
            hps[key] = value if isinstance(value, str) else json.dumps(value)
        job = LocalJob(
            root=root,
            hosts=[f"algo-{i + 1}" for i in range(hosts)],
            hyperparameters=hps,
            extra_env=env or {},
            request_extra=request_extra or {},
        )
        self.jobs.append(job)
        return job
