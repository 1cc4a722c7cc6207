"""Defect 5: one number must not ask a local job for unbounded work (docs/local.md, "Limits").

The estimator refuses at fit() and in the dry run; the local backends refuse a
request that reaches them directly (``launchbay submit`` with overrides, a hand
written request), before the job directory is made.
"""

from __future__ import annotations

import json
import os

import pytest

from factories import OMIT
from factories import estimator as make_estimator
from launchbay import ConfigurationError
from launchbay._capacity import (
    MAX_RANKS_ENV,
    RANKS_FLOOR,
    check_local_ranks,
    local_capacity,
)
from launchbay.backends.plan import plan_request
from launchbay.backends.process import ProcessBackend
from launchbay.pytorch import PyTorch


@pytest.fixture
def src(tmp_path):
    root = tmp_path / "src"
    root.mkdir()
    (root / "train.py").write_text("print('hi')\n")
    return root


def estimator(src, **kwargs):
    return make_estimator(
        "train.py", src, role=OMIT, framework_version="2.13", py_version="py311", **kwargs
    )


def test_capacity_follows_the_machine(monkeypatch):
    monkeypatch.delenv(MAX_RANKS_ENV, raising=False)
    capacity = local_capacity()
    cpus = len(os.sched_getaffinity(0))
    assert 1 <= capacity.max_ranks <= max(RANKS_FLOOR, 8 * cpus)
    assert f"({cpus} CPUs)" in capacity.reason and "ulimit -n" in capacity.reason
    monkeypatch.setenv(MAX_RANKS_ENV, "3")
    assert local_capacity().max_ranks == 3
    for bad in ("0", "-1", "many"):
        monkeypatch.setenv(MAX_RANKS_ENV, bad)
        with pytest.raises(ConfigurationError, match=f"Invalid {MAX_RANKS_ENV}='{bad}'"):
            local_capacity()


def test_dry_run_and_fit_refuse_a_million_hosts(src, tmp_path, monkeypatch):
    monkeypatch.setenv("LAUNCHBAY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(MAX_RANKS_ENV, raising=False)
    limit = local_capacity().max_ranks
    est = estimator(src, instance_count=1_000_000)
    with pytest.raises(ConfigurationError) as info:
        est.create_training_job_request()
    assert info.value.argument == "instance_count"
    message = str(info.value)
    assert "Invalid instance_count=1000000 for instance_type='local_process'" in message
    assert "1000000 host(s) x 1 process(es) per host = 1000000 ranks" in message
    assert f"at most {limit} (" in message
    with pytest.raises(ConfigurationError, match="instance_count=1000000"):
        est.fit(wait=False)
    assert not (tmp_path / "home").exists()  # nothing staged, no job directory


@pytest.mark.parametrize(
    ("distribution", "argument"),
    [
        ({"torch_distributed": {"enabled": True, "processes_per_host": 10**6}},
         "distribution['torch_distributed']['processes_per_host']"),
        ({"mpi": {"enabled": True, "processes_per_host": 10**6}},
         "distribution['mpi']['processes_per_host']"),
        ({"pytorchddp": {"enabled": True, "processes_per_host": 10**6}},
         "distribution['smdistributed']['dataparallel']['processes_per_host']"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("instance_type", ["local_process", "local", "local_gpu"])
def test_processes_per_host_counted_in_every_local_mode(src, distribution, argument, instance_type):
    est = estimator(src, instance_count=2, distribution=distribution, instance_type=instance_type)
    with pytest.raises(ConfigurationError) as info:
        est.create_training_job_request()
    assert info.value.argument == argument
    assert f"Invalid {argument}=1000000 for instance_type={instance_type!r}" in str(info.value)
    assert "2 host(s) x 1000000 process(es) per host = 2000000 ranks" in str(info.value)


def test_within_the_limit_and_sagemaker_jobs_are_untouched(src, monkeypatch):
    monkeypatch.setenv(MAX_RANKS_ENV, "4")
    ok = estimator(
        src, instance_count=2, distribution={"mpi": {"enabled": True, "processes_per_host": 2}}
    )
    ok.create_training_job_request()
    with pytest.raises(ConfigurationError, match="2 host.s. x 3 process.es. per host = 6 ranks"):
        check_local_ranks("local", 2, 3)
    remote = PyTorch(
        entry_point="train.py", source_dir=str(src), framework_version="2.3", py_version="py311",
        role="arn:aws:iam::123456789012:role/R", instance_type="ml.p4d.24xlarge",
        instance_count=500, distribution={"mpi": {"enabled": True, "processes_per_host": 64}},
    )  # fmt: skip
    remote.resources()  # no limit from this machine for SageMaker jobs


def test_backend_refuses_a_request_before_making_the_job_directory(src, tmp_path):
    est = estimator(src, instance_count=1)
    request = est.create_training_job_request(job_name="too-big")
    backend = ProcessBackend(job_root=tmp_path / "jobs")
    request["ResourceConfig"]["InstanceCount"] = 1_000_000
    with pytest.raises(ConfigurationError, match="Invalid instance_count=1000000"):
        backend.run(plan_request(request))
    request["ResourceConfig"]["InstanceCount"] = 2
    request["HyperParameters"]["sagemaker_mpi_num_of_processes_per_host"] = json.dumps(10**6)
    with pytest.raises(ConfigurationError) as info:
        backend.run(plan_request(request))
    assert "sagemaker_mpi_num_of_processes_per_host" in str(info.value)
    assert "= 2000000 ranks" in str(info.value)
    request["HyperParameters"]["sagemaker_mpi_num_of_processes_per_host"] = '"lots"'
    with pytest.raises(ConfigurationError, match="an integer 1 or more"):
        backend.run(plan_request(request))
    assert not (tmp_path / "jobs" / "too-big").exists()
