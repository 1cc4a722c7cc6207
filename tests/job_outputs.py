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


def tar_contents(data) -> tuple[dict[str, bytes], dict[str, str]]:
    """Files and symbolic links (name: target) of a tar.gz given as a path or as its bytes;
    checks that it holds nothing else."""
    opened = (
        tarfile.open(fileobj=io.BytesIO(data)) if isinstance(data, bytes) else tarfile.open(data)
    )
    files, links = {}, {}
    with opened as tar:
        for member in tar.getmembers():
            assert member.isfile() or member.issym(), member.name
            if member.issym():
                links[member.name] = member.linkname
            else:
                files[member.name] = tar.extractfile(member).read()
    return files, links


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


def left_after(timeout: float, find):
    """What ``find()`` still returns after up to ``timeout`` seconds (looked at every 0.1 s).

    A Docker job's exited containers and its network are removed in the background once
    the job has ended (the engine takes 0.05-0.2 s), and always before its client process
    exits: a test in the client's process looks for a while (docs/local.md, "What a Docker
    job leaves"). ``timeout`` 0 looks once.
    """
    import time

    deadline = time.monotonic() + timeout
    while True:
        left = find()
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def networks_left(docker_client, keep, timeout: float = 10.0) -> list[str]:
    """Names of the Docker networks ``keep(name)`` selects still there (see :func:`left_after`)."""
    return left_after(
        timeout, lambda: [n.name for n in docker_client.networks.list() if keep(n.name)]
    )


def containers_left(docker_client, timeout: float = 10.0, **filters) -> list[str]:
    """Names of the containers, running or not, that ``filters`` (the engine's) select
    still there (see :func:`left_after`). One list call: ``containers.list`` inspects each
    container after listing, and fails on one removed in between."""

    def names() -> list[str]:
        found = docker_client.api.containers(all=True, filters=filters)
        return [str((c.get("Names") or ["?"])[0]).lstrip("/") for c in found]

    return left_after(timeout, names)


def docker_leftovers(docker_client, job_dir, timeout: float = 10.0) -> tuple[list, list]:
    """Names of the containers labelled with the job directory, and of the networks named
    after the job, still there (waited for as :func:`left_after` does, 0 to look once)."""
    from launchbay.backends.docker import LABEL_JOB_DIR

    containers = containers_left(docker_client, timeout, label=f"{LABEL_JOB_DIR}={job_dir}")
    network = f"launchbay-{Path(job_dir).name}"
    return containers, networks_left(docker_client, lambda n: n == network, timeout)


def assert_no_docker_leftovers(docker_client, job_dir, timeout: float = 10.0) -> None:
    """Checks that no container and no network of the Docker job in ``job_dir`` is left."""
    containers, networks = docker_leftovers(docker_client, job_dir, timeout)
    assert not containers, containers
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


def check_sklearn_job(est, out) -> dict:
    """A Completed ``sklearn_train.py`` job with output under ``out``: its model (``C`` 0.5) at
    ``est.model_data``, its report naming algo-1 alone with accuracy over 0.9; returns it."""
    import joblib

    job = est.latest_training_job
    prefix = Path(out) / job.name / "output"
    assert est.model_data == file_uri(prefix / "model.tar.gz")
    model = joblib.load(io.BytesIO(archive_members(prefix / "model.tar.gz")["model.joblib"]))
    assert model.C == 0.5
    report = json.loads(archive_members(prefix / "output.tar.gz")["report.json"])
    assert report["hosts"] == ["algo-1"] and report["accuracy"] > 0.9
    assert job.describe()["TrainingJobStatus"] == "Completed"
    return report


def check_xgboost_job(est, out, train_csv) -> None:
    """``xgboost_train.py`` on 2 hosts, output under ``out``: each host saved a model that
    predicts the labels of ``train_csv`` more than 80% right."""
    import numpy as np
    import xgboost as xgb

    model = archive_members(Path(out) / est.latest_training_job.name / "output" / "model.tar.gz")
    assert sorted(model) == ["xgboost-model-algo-1.json", "xgboost-model-algo-2.json"]
    data = np.loadtxt(train_csv, delimiter=",")
    for name, raw in model.items():
        booster = xgb.Booster()
        booster.load_model(bytearray(raw))
        predicted = booster.predict(xgb.DMatrix(data[:, 1:])) > 0.5
        assert np.mean(predicted == data[:, 0]) > 0.8, name


def check_tiny_bert_job(est, out, saved) -> None:
    """``hf_train.py`` on 2 hosts, output under ``out``: ranks 0-1 on algo-1/algo-2 trained
    offline (world 2, sum 3), and the 32-wide BERT of model.tar.gz loads back offline from
    ``saved`` (made)."""
    from transformers import BertForSequenceClassification

    prefix = Path(out) / est.latest_training_job.name / "output"
    model = archive_members(prefix / "model.tar.gz")
    assert "config.json" in model and "model.safetensors" in model
    assert json.loads(model["config.json"])["hidden_size"] == 32
    reports = rank_reports(archive_members(prefix / "output.tar.gz"))
    assert sorted(reports) == [0, 1]
    assert {r["host"] for r in reports.values()} == {"algo-1", "algo-2"}
    assert all(r["world"] == 2 and r["sum"] == 3 and r["offline"] == "1" for r in reports.values())
    saved.mkdir()
    for name, raw in model.items():
        (saved / name).write_bytes(raw)
    assert BertForSequenceClassification.from_pretrained(saved).config.num_labels == 2


def fit_failure(est, match: str | None = None):
    """The ``JobFailedError`` that ``est.fit(logs=False)`` raises (checked to match ``match``)."""
    import pytest

    from launchbay import JobFailedError

    with pytest.raises(JobFailedError, match=match) as caught:
        est.fit(logs=False)
    return caught.value
