"""Reading what a local training job left: its archives and the rank reports the scripts write.

Shared by the ``local_process`` and Docker tests (importable because ``tests/`` is on
``sys.path`` through its conftest).
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from pytest import approx


def file_uri(path) -> str:
    return "file://" + str(path)


def archive_members(source) -> dict[str, bytes]:
    """Files of a tar.gz given as a path or as its bytes."""
    if isinstance(source, bytes):
        opened = tarfile.open(fileobj=io.BytesIO(source))
    else:
        opened = tarfile.open(source)
    with opened as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def rank_reports(members) -> dict[int, dict]:
    """``rank-N.json`` files of an output archive, by rank."""
    return {
        json.loads(data)["rank"]: json.loads(data)
        for name, data in members.items()
        if name.startswith("rank-")
    }


def check_ranks(reports):
    """2 hosts x 2 processes: every rank saw the world, its local rank and its host."""
    assert sorted(reports) == [0, 1, 2, 3]
    for rank, report in reports.items():
        assert report["world"] == 4
        assert report["sum"] == 6
        assert report["local_rank"] == rank % 2
        assert report["host"] == f"algo-{rank // 2 + 1}"
        assert report["hosts"] == ["algo-1", "algo-2"]
        if "torchrun" in report:  # torch_ddp.py: the variables of a torchrun per host
            assert report["torchrun"] == {
                "RANK": str(rank),
                "WORLD_SIZE": "4",
                "LOCAL_WORLD_SIZE": "2",
                "GROUP_RANK": str(rank // 2),
                "GROUP_WORLD_SIZE": "2",
                "ROLE_WORLD_SIZE": "4",
            }, rank


def check_horovod_ranks(reports: dict[int, dict], local_size: int = 4) -> None:
    """Ranks 0-3 on algo-1/algo-2; the average of (r+1, 10(r+1)) is (2.5, 25), the sum (10, 100).

    Horovod's MPI controller counts as "local" the ranks that share memory: in
    ``local_process`` every host is on this one machine (local size 4), in Docker each
    container is its own node (local size 2), as on SageMaker.
    """
    assert sorted(reports) == [0, 1, 2, 3]
    for rank, report in reports.items():
        assert report["world"] == 4
        assert report["local_size"] == local_size
        assert report["local_rank"] == rank % local_size
        assert report["host"] == f"algo-{rank // 2 + 1}"
        assert report["mpi"] is True
        assert report["average"] == approx([2.5, 25.0])
        assert report["sum"] == approx([10.0, 100.0])
        # Broadcast start plus averaged gradients: every rank ends with the same weights.
        assert report["same_weights"] is True


HOROVOD_MPI = {
    "mpi": {
        "enabled": True,
        "processes_per_host": 2,
        "custom_mpi_options": "-x HOROVOD_LOG_LEVEL=warning",
    }
}


def networks_left(docker_client, keep, timeout: float = 10.0) -> list[str]:
    """Names of the Docker networks ``keep(name)`` selects that are still there after ``timeout``.

    A Docker job's network is removed in the background once the job has ended (it
    takes the engine 0.2 s), and always before its client process exits: a test in
    the client's process looks for a while (docs/local.md, "What a Docker job leaves").
    """
    import time

    deadline = time.monotonic() + timeout
    while True:
        left = [n.name for n in docker_client.networks.list() if keep(n.name)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def docker_leftovers(docker_client, job_dir, network_timeout: float = 10.0) -> tuple[list, list]:
    """Containers labelled with the job directory, and networks named after the job (waited
    for as :func:`networks_left` does, ``network_timeout`` 0 for none)."""
    from launchbay.backends.docker import LABEL_JOB_DIR

    containers = docker_client.containers.list(
        all=True, filters={"label": f"{LABEL_JOB_DIR}={job_dir}"}
    )
    network = f"launchbay-{Path(job_dir).name}"
    return containers, networks_left(docker_client, lambda n: n == network, network_timeout)


def assert_no_docker_leftovers(docker_client, job_dir, network_timeout: float = 10.0) -> None:
    """Checks that no container and no network of the Docker job in ``job_dir`` is left."""
    containers, networks = docker_leftovers(docker_client, job_dir, network_timeout)
    assert not containers, [c.name for c in containers]
    assert not networks, networks


def check_sigterm_checkpoints(checkpoints) -> None:
    """Each host's ``checkpoint_on_sigterm.py`` got SIGTERM and wrote its checkpoint."""
    for host in ("algo-1", "algo-2"):
        assert (checkpoints / f"last-{host}.ckpt").read_text() == f"stopped on {host}"


def hosts_started(job_dir) -> bool:
    """Whether both hosts of a Docker job of ``checkpoint_on_sigterm.py`` wrote ``started-<host>``
    in their model directory."""
    return all(
        (Path(job_dir) / h / "model" / f"started-{h}").exists() for h in ("algo-1", "algo-2")
    )


def check_torch_ddp_job(est, out) -> None:
    """A finished 2x2 ``torch_ddp.py`` job with output under ``out``: ``est.model_data`` holds
    only ``model.pt`` (a 1x4 weight), every rank's report is right, the job Completed."""
    import torch

    job = est.latest_training_job
    prefix = Path(out) / job.name / "output"
    assert est.model_data == file_uri(prefix / "model.tar.gz")
    model = archive_members(prefix / "model.tar.gz")
    assert list(model) == ["model.pt"]
    assert torch.load(io.BytesIO(model["model.pt"]))["weight"].shape == (1, 4)
    check_ranks(rank_reports(archive_members(prefix / "output.tar.gz")))
    assert job.describe()["TrainingJobStatus"] == "Completed"


def check_mpi_job(job, out) -> None:
    """A finished 2x2 ``mpi_check.py`` job with output under ``out``: ``model.pt`` in its
    model archive, every rank's report right."""
    prefix = Path(out) / job.name / "output"
    assert "model.pt" in archive_members(prefix / "model.tar.gz")
    check_ranks(rank_reports(archive_members(prefix / "output.tar.gz")))
