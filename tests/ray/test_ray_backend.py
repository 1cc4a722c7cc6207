"""``instance_type="ray"`` on a real Ray cluster (a head and 2 worker nodes, tests/ray/conftest.py).

Each test runs a job through a framework estimator's ``fit()`` and ends with no
host process left (the ``ray_home`` fixture checks) and no host actor alive.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import time
from functools import partial
from pathlib import Path

import pytest
from ray_cluster_helpers import SCRIPTS, left_running, wait_none_left

from factories import estimator
from job_processes import fit_command, interrupt
from launchbay import ConfigurationError, JobFailedError

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")


#: Every job here ends within this: Open MPI once hung in MPI_Init in all four ranks of
#: test_mpi_across_two_hosts (CI, 2026-11-29), which without a bound holds the run until
#: CI's own limit; with it, that test fails after 10 minutes and the rest still run.
JOB_BOUND_SECONDS = 600

pytorch = partial(
    estimator,
    source_dir=SCRIPTS,
    instance_type="ray",
    instance_count=2,
    max_run=JOB_BOUND_SECONDS,
)


def job_dir(home, name) -> Path:
    return Path(home) / "jobs" / name


def nodes_of(home, name) -> dict:
    return json.loads((job_dir(home, name) / "ray-nodes.json").read_text())


def fit_on_two_nodes(estimator, home) -> tuple[str, dict]:
    """Runs ``estimator``'s job (logs shown); checks it Completed with algo-1 and algo-2 on two
    nodes; returns its name and its hosts' nodes."""
    estimator.fit(wait=True, logs=True)
    name = estimator.latest_training_job.name
    description = estimator.latest_training_job.describe()
    assert description["TrainingJobStatus"] == "Completed", description.get("FailureReason")
    nodes = nodes_of(home, name)
    assert nodes["algo-1"]["node_id"] != nodes["algo-2"]["node_id"]
    return name, nodes


def test_torch_distributed_2x2_across_two_raylets(ray_home, tmp_path, capsys):
    import ray

    estimator = pytorch(
        "ddp.py",
        distribution={"torch_distributed": {"enabled": True}},
        hyperparameters={"sagemaker_mpi_num_of_processes_per_host": 2},
        output_path=f"file://{tmp_path}/out",
    )
    name, nodes = fit_on_two_nodes(estimator, ray_home)
    assert set(nodes) == {"algo-1", "algo-2"}
    head = ray.get_runtime_context().get_node_id()
    assert head not in {n["node_id"] for n in nodes.values()}
    model = tmp_path / "out" / name / "output" / "model.tar.gz"
    with tarfile.open(model) as tar:
        report = json.load(tar.extractfile("model.json"))
    assert report["world"] == 4 and report["sum"] == 6.0
    assert report["master"] == "127.0.0.1"
    out = capsys.readouterr().out
    for rank in range(4):
        assert f"rank {rank} of 4" in out
    assert "algo-2" in out and "[rank 3]" in out


def test_a_failing_rank_is_named_with_its_host(ray_home, tmp_path):
    estimator = pytorch(
        "fail.py",
        distribution={"torch_distributed": {"enabled": True}},
        hyperparameters={"sagemaker_mpi_num_of_processes_per_host": 2},
        output_path=f"file://{tmp_path}/out",
    )
    with pytest.raises(JobFailedError) as caught:
        estimator.fit(wait=True, logs=False)
    error = caught.value
    assert error.status == "Failed"
    head = error.reason[:1024]
    assert "algo-2" in head and "Rank 3" in head, head
    assert "ValueError: rank three broke on purpose" in head
    # The failing host's report came back from its node into the job directory.
    directory = job_dir(ray_home, error.job_name)
    assert (directory / "algo-2" / "output" / "launchbay-failure.json").exists()
    failure = tmp_path / "out" / error.job_name / "output" / "failure"
    assert "rank three broke on purpose" in failure.read_text()


def test_more_hosts_than_nodes_is_refused_before_anything_starts(ray_home, tmp_path):
    estimator = pytorch("ddp.py", instance_count=3, output_path=f"file://{tmp_path}/out")
    with pytest.raises(ConfigurationError) as caught:
        estimator.fit(job_name="too-many-hosts", wait=True, logs=False)
    message = str(caught.value)
    assert "instance_count=3" in message
    assert "2 node(s) that can hold a host" in message, message
    assert "3 alive in all" in message and "0 CPUs" in message  # the head, named too
    assert "LAUNCHBAY_RAY_PACK=1" in message
    assert not job_dir(ray_home, "too-many-hosts").exists()


def test_ctrl_c_stops_every_host_on_every_node(ray_cluster, ray_home, tmp_path):
    name = "ray-sigint"
    child, lines = _start_driver(ray_cluster, name, f"file://{tmp_path}/out")
    try:
        assert len(left_running()) >= 2  # each host's runtime and its rank, on its node
        output = interrupt(child, within=30, timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    output = "".join(lines) + output
    assert child.returncode == 42, output
    assert "job status Stopped" in output
    status = json.loads((job_dir(ray_home, name) / "status.json").read_text())
    assert status["TrainingJobStatus"] == "Stopped"


def test_max_run_stops_every_host(ray_home, tmp_path):
    estimator = pytorch("sleep.py", max_run=4, output_path=f"file://{tmp_path}/out")
    started = time.monotonic()
    with pytest.raises(JobFailedError) as caught:
        estimator.fit(wait=True, logs=False)
    assert time.monotonic() - started < 60
    assert caught.value.status == "Stopped"
    assert "MaxRuntimeInSeconds (4 seconds)" in caught.value.reason


def _start_driver(ray_cluster, name, out):
    """``interrupted_fit.py`` running job ``name`` (2 hosts of ``sleep.py``) on the cluster,
    returned with the lines it printed once both hosts sleep."""
    env = dict(os.environ, RAY_ADDRESS=ray_cluster.address, PYTHONUNBUFFERED="1")
    job = dict(pytorch.keywords, entry_point="sleep.py", source_dir=str(SCRIPTS), output_path=out)
    child = subprocess.Popen(
        fit_command(job, name), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 90
        assert child.stdout is not None
        while sum("sleeping on" in line for line in lines) < 2:
            line = child.stdout.readline()
            assert line or child.poll() is None, "".join(lines)
            lines.append(line)
            assert time.monotonic() < deadline, "".join(lines)
    except BaseException:
        child.kill()
        child.wait()
        raise
    return child, lines


def test_a_killed_client_takes_its_hosts_with_it(ray_cluster, ray_home, tmp_path):
    child, _ = _start_driver(ray_cluster, "ray-killed-client", f"file://{tmp_path}/out")
    try:
        assert len(left_running()) >= 2
        child.kill()  # SIGKILL: no handler, no atexit
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    # Ray ends the actors of a driver that died; each runtime ends with its actor.
    assert wait_none_left(60) == []
    # launchbay's watchdog finishes the job's record, as for a local job.
    status_file = job_dir(ray_home, "ray-killed-client") / "status.json"
    deadline = time.monotonic() + 60
    while json.loads(status_file.read_text())["TrainingJobStatus"] == "InProgress":
        assert time.monotonic() < deadline, status_file.read_text()
        time.sleep(0.5)
    status = json.loads(status_file.read_text())
    assert status["TrainingJobStatus"] == "Failed"
    assert "went away" in status["FailureReason"], status["FailureReason"]
    # The hosts' node-local trees outlive their killed actors until the next agent on the
    # node sweeps them (what it does when it starts).
    from launchbay.backends.ray.agent import sweep

    trees = {n["root"] for n in nodes_of(ray_home, "ray-killed-client").values()}
    assert trees <= set(sweep()) and not any(os.path.exists(t) for t in trees)
