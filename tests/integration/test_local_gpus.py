"""Issue 16: local hosts on one machine each get their own GPUs (docs/local.md).

Real runtimes and torchrun, gloo on CPU; a fake ``nvidia-smi`` on ``PATH``
(``fake_gpus``, tests/conftest.py) stands for the driver. Each rank writes what
it sees (``gpu_env_dump.py``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from factories import estimator as local_estimator
from job_outputs import file_uri
from launchbay import ConfigurationError
from launchbay.pytorch import PyTorch

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "local_process_scripts"


def dump_job(dump: Path, out: Path, **kwargs) -> PyTorch:
    dump.mkdir()
    options = dict(instance_count=2, hyperparameters={"dump": str(dump)}, output_path=file_uri(out))
    return local_estimator("gpu_env_dump.py", SCRIPTS, **(options | kwargs))


def reports(dump: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(dump.glob("*.json"))}


def test_two_hosts_on_four_gpus_get_disjoint_halves_and_two_workers_each(home, tmp_path, fake_gpus):
    bin_dir = fake_gpus(4)
    dump = tmp_path / "dump"
    est = dump_job(dump, tmp_path / "out", distribution={"torch_distributed": {"enabled": True}})
    est.fit(logs=False)
    callers = (bin_dir / "calls.log").read_text().split()
    assert callers.count(str(os.getpid())) == 1  # this client found the GPUs once for the job
    seen = reports(dump)
    assert sorted(seen) == ["algo-1-0", "algo-1-1", "algo-2-2", "algo-2-3"]
    for name, report in seen.items():
        host = name.rsplit("-", 1)[0]
        assert report["SM_CURRENT_HOST"] == host
        assert report["CUDA_VISIBLE_DEVICES"] == {"algo-1": "0,1", "algo-2": "2,3"}[host]
        assert report["SM_NUM_GPUS"] == "2"  # the host's share, not the machine's 4
        assert report["LOCAL_WORLD_SIZE"] == "2"  # torchrun's nproc_per_node follows it
        assert report["WORLD_SIZE"] == "4" and report["allreduce_world"] == 4


def test_mpi_ranks_of_each_host_see_that_hosts_gpus(home, tmp_path, fake_gpus):
    # One mpirun (on algo-1) starts every rank; each rank takes on its own host's environment.
    fake_gpus(4)
    dump = tmp_path / "dump"
    dump_job(dump, tmp_path / "out", distribution={"mpi": {"enabled": True}}).fit(logs=False)
    seen = reports(dump)
    assert {k: (r["CUDA_VISIBLE_DEVICES"], r["SM_NUM_GPUS"]) for k, r in seen.items()} == {
        "algo-1-0": ("0,1", "2"),
        "algo-1-1": ("0,1", "2"),
        "algo-2-2": ("2,3", "2"),
        "algo-2-3": ("2,3", "2"),
    }
    assert {r["OMPI_COMM_WORLD_LOCAL_SIZE"] for r in seen.values()} == {"2"}  # -np 2 per host


def test_callers_cuda_visible_devices_1_3_is_split_as_1_and_3(
    home, tmp_path, fake_gpus, monkeypatch
):
    fake_gpus(4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")
    dump = tmp_path / "dump"
    dump_job(dump, tmp_path / "out").fit(logs=False)  # plain script, one process per host
    seen = reports(dump)
    assert {k: (r["CUDA_VISIBLE_DEVICES"], r["SM_NUM_GPUS"]) for k, r in seen.items()} == {
        "algo-1-0": ("1", "1"),
        "algo-2-0": ("3", "1"),
    }


def test_three_hosts_on_two_gpus_are_refused_before_any_host_starts(home, tmp_path, fake_gpus):
    fake_gpus(2)
    dump = tmp_path / "dump"
    est = dump_job(
        dump, tmp_path / "out", instance_count=3,
        distribution={"torch_distributed": {"enabled": True}},
    )  # fmt: skip
    with pytest.raises(ConfigurationError) as info:
        est.fit(logs=False)
    message = str(info.value)
    assert "Invalid instance_count=3 for instance_type='local_process'" in message
    assert "GPU(s) 0,1 found (2)" in message and "instance_count <= 2" in message
    assert "processes_per_host=2" in message and "CUDA_VISIBLE_DEVICES=''" in message
    assert list(dump.iterdir()) == []  # no rank ran
    assert not (home / "jobs").exists() or list((home / "jobs").iterdir()) == []
