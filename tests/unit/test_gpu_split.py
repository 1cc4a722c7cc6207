"""Issue 16: a local job shares this machine's GPUs out among its hosts (docs/local.md).

This machine has no GPU: ``fake_gpus(n)`` (tests/conftest.py) puts an ``nvidia-smi``
on ``PATH`` that lists ``n``. The refusals come from the estimator (fit, submit,
``launchbay validate``) and from the local backends (a request that reaches them
directly), before anything is made. The Docker engine here has no NVIDIA runtime,
so ``local_gpu`` is checked on what the Docker backend would send it.
"""

from __future__ import annotations

import json

import pytest

from factories import OMIT
from factories import estimator as make_estimator
from launchbay import ConfigurationError
from launchbay._capacity import split_gpus
from launchbay.backends.docker import DockerBackend, compose_document, host_config_args
from launchbay.backends.plan import plan_request
from launchbay.backends.process import ProcessBackend

TORCHRUN = {"torch_distributed": {"enabled": True}}


def estimator(src, **kwargs):
    options = dict(framework_version="2.13", py_version="py311", instance_count=2)
    options.update(distribution=TORCHRUN, role=OMIT)
    return make_estimator("train.py", src, **{**options, **kwargs})


def test_each_host_gets_floor_gpus_over_hosts_contiguous(fake_gpus):
    fake_gpus(4)
    assert split_gpus("local_process", 2) == [["0", "1"], ["2", "3"]]
    assert split_gpus("local_gpu", 4) == [["0"], ["1"], ["2"], ["3"]]
    assert split_gpus("local_process", 3) == [["0"], ["1"], ["2"]]  # GPU 3 is left idle
    assert split_gpus("local_process", 1, 4) == [["0", "1", "2", "3"]]
    assert split_gpus("local", 2) is None  # CPU containers get no GPU


def test_callers_cuda_visible_devices_is_the_set_split(fake_gpus, monkeypatch):
    fake_gpus(4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")
    request = {"ResourceConfig": {"InstanceType": "local_process", "InstanceCount": 2}}
    # Resources only: the check of a whole request (plan_request's) is not this test's.
    assert plan_request(request, check=False).gpus == {"algo-1": ("1",), "algo-2": ("3",)}


def test_no_gpu_leaves_a_local_process_job_on_cpu(src, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi; this machine has no driver
    assert split_gpus("local_process", 8, 4) is None
    estimator(src, instance_count=8).create_training_job_request()  # not refused


def test_three_hosts_on_two_gpus_are_refused_with_what_would_run(fake_gpus, src):
    fake_gpus(2)
    with pytest.raises(ConfigurationError) as info:
        estimator(src, instance_count=3).create_training_job_request()
    message = str(info.value)
    assert info.value.argument == "instance_count" and info.value.value == 3
    for fragment in (
        "Invalid instance_count=3 for instance_type='local_process'",
        "GPU(s) 0,1 found (2)",
        "cannot give 3 hosts one each",
        "instance_count <= 2",
        "one host with processes_per_host=2",
        "CUDA_VISIBLE_DEVICES='' in your environment for a CPU (gloo) run",
    ):
        assert fragment in message, message


def test_the_refusal_names_the_gpus_left_by_cuda_visible_devices(fake_gpus, src, monkeypatch):
    fake_gpus(4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    with pytest.raises(
        ConfigurationError, match=r"GPU\(s\) 3 found \(1, after CUDA_VISIBLE_DEVICES"
    ):
        estimator(src, instance_count=2).create_training_job_request()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the way to a CPU run the message gives
    estimator(src, instance_count=2).create_training_job_request()


def test_local_gpu_without_any_gpu_is_refused(tmp_path, src, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(ConfigurationError) as info:
        estimator(src, instance_type="local_gpu", instance_count=1).create_training_job_request()
    message = str(info.value)
    assert info.value.argument == "instance_type"
    assert "Invalid instance_type='local_gpu': no GPU was found on this machine" in message
    assert "instance_type='local' (CPU containers)" in message
    estimator(src, instance_type="local", instance_count=2).create_training_job_request()


def test_processes_per_host_above_a_hosts_share_is_refused(fake_gpus, src):
    fake_gpus(4)
    distribution = {"torch_distributed": {"enabled": True, "processes_per_host": 3}}
    with pytest.raises(ConfigurationError) as info:
        estimator(src, distribution=distribution).create_training_job_request()
    argument = "distribution['torch_distributed']['processes_per_host']"
    assert info.value.argument == argument and info.value.value == 3
    message = str(info.value)
    assert f"Invalid {argument}=3 for instance_type='local_process'" in message
    assert "GPU(s) 0,1,2,3 found (4) give each of 2 host(s) 2, one per process" in message
    assert f"{argument} <= 2, fewer hosts (instance_count <= 1)" in message
    ok = {"torch_distributed": {"enabled": True, "processes_per_host": 2}}
    estimator(src, distribution=ok).create_training_job_request()


def test_the_backend_refuses_before_making_the_job_directory(fake_gpus, src, tmp_path):
    request = estimator(src, instance_count=2).create_training_job_request(job_name="short")
    fake_gpus(2)
    backend = ProcessBackend(job_root=tmp_path / "jobs")
    request["ResourceConfig"]["InstanceCount"] = 3
    with pytest.raises(ConfigurationError, match="Invalid instance_count=3"):
        backend.run(plan_request(request))
    request["ResourceConfig"]["InstanceCount"] = 2
    request["HyperParameters"]["sagemaker_mpi_num_of_processes_per_host"] = json.dumps(2)
    with pytest.raises(ConfigurationError) as info:
        backend.run(plan_request(request))
    assert "hyperparameter sagemaker_mpi_num_of_processes_per_host)=2" in str(info.value)
    assert not (tmp_path / "jobs" / "short").exists()


def test_local_gpu_containers_each_get_their_own_device_ids(fake_gpus, src, tmp_path):
    fake_gpus(4)
    request = estimator(src, instance_type="local_gpu").create_training_job_request(job_name="gpus")
    hosts = ["algo-1", "algo-2"]
    backend = DockerBackend(job_root=tmp_path / "jobs", gpu=True)
    split = {h: list(ids) for h, ids in (plan_request(request).gpus or {}).items()}
    assert split == {"algo-1": ["0", "1"], "algo-2": ["2", "3"]}
    specs = backend.host_specs(
        request, str(tmp_path / "jobs" / "gpus"), hosts, local_code=True, grace=5, gpus=split
    )
    sent = {s.host: host_config_args(s, "launchbay-gpus", isolated=False) for s in specs}
    for host, ids in split.items():
        (device,) = sent[host]["device_requests"]
        assert device["DeviceIDs"] == ids and device["Count"] == 0  # never -1 (all)
        assert device["Capabilities"] == [["gpu"]]
    compose = compose_document(request, specs, gpu=True, isolated=False)["services"]
    assert [compose[h]["deploy"]["resources"]["reservations"]["devices"] for h in hosts] == [
        [{"driver": "nvidia", "device_ids": ["0", "1"], "capabilities": ["gpu"]}],
        [{"driver": "nvidia", "device_ids": ["2", "3"], "capabilities": ["gpu"]}],
    ]
    cpu = DockerBackend(job_root=tmp_path / "jobs")  # instance_type='local'
    cpu_request = dict(request, ResourceConfig={"InstanceType": "local", "InstanceCount": 2})
    assert plan_request(cpu_request).gpus is None
    (spec, _) = cpu.host_specs(
        request, str(tmp_path / "jobs" / "gpus"), hosts, local_code=True, grace=5
    )
    assert host_config_args(spec, "launchbay-gpus", isolated=True)["device_requests"] is None
