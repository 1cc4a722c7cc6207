"""smdistributed (launchbay's local library) and TF multi_worker_mirrored_strategy across 2 Ray hosts."""

from __future__ import annotations

import json
import tarfile
from functools import partial

import pytest
from ray_cluster_helpers import SCRIPTS
from test_ray_backend import nodes_of, pytorch

from launchbay.tensorflow import TensorFlow

tensorflow = partial(pytorch, framework=TensorFlow)


def output_reports(tmp_path, name, prefix):
    reports = []
    with tarfile.open(tmp_path / "out" / name / "output" / "output.tar.gz") as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.split("/")[-1].startswith(prefix):
                reports.append(json.load(tar.extractfile(member)))
    return reports


def test_smdistributed_dataparallel_across_two_hosts(ray_home, tmp_path):
    estimator = pytorch(
        "smddp.py",
        distribution={"smdistributed": {"dataparallel": {"enabled": True}}},
        hyperparameters={"sagemaker_mpi_num_of_processes_per_host": 2},
        output_path=f"file://{tmp_path}/out",
    )
    estimator.fit(wait=True, logs=False)
    name = estimator.latest_training_job.name
    nodes = nodes_of(ray_home, name)
    assert nodes["algo-1"]["node_id"] != nodes["algo-2"]["node_id"]
    reports = output_reports(tmp_path, name, "smddp-")
    assert sorted(r["rank"] for r in reports) == [0, 1, 2, 3]
    assert {r["host"] for r in reports} == {"algo-1", "algo-2"}
    assert all(r["world"] == 4 and r["sum"] == 10.0 for r in reports)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_multi_worker_mirrored_strategy_across_two_hosts(ray_home, tmp_path):
    estimator = tensorflow(
        "mwms.py",
        distribution={"multi_worker_mirrored_strategy": {"enabled": True}},
        output_path=f"file://{tmp_path}/out",
    )
    estimator.fit(wait=True, logs=False)
    reports = output_reports(tmp_path, estimator.latest_training_job.name, "mwms-")
    assert {r["host"] for r in reports} == {"algo-1", "algo-2"}
    assert all(r["sum"] == 3.0 for r in reports), reports
    workers = reports[0]["tf_config"]["cluster"]["worker"]
    assert len(set(workers)) == 2, workers  # one port per host: the nodes share a machine


def test_parameter_server_tf_config_across_two_hosts(ray_home, tmp_path):
    """Each Ray host gets SageMaker's parameter-server TF_CONFIG: the master and a ps on algo-1's
    node, a ps and the worker on algo-2's, every address:port its own (the nodes share a machine)."""
    scripts = SCRIPTS.parent.parent / "integration" / "local_process_scripts"
    estimator = tensorflow(
        "tf_config_dump.py",
        source_dir=scripts,
        distribution={"parameter_server": {"enabled": True}},
        output_path=f"file://{tmp_path}/out",
    )
    estimator.fit(wait=True, logs=False)
    name = estimator.latest_training_job.name
    nodes = nodes_of(ray_home, name)
    assert nodes["algo-1"]["node_id"] != nodes["algo-2"]["node_id"]
    seen = {}
    with tarfile.open(tmp_path / "out" / name / "output" / "output.tar.gz") as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.split("/")[-1].startswith("tf-algo-"):
                report = json.load(tar.extractfile(member))
                seen[report["host"]] = report["tf_config"]
    assert set(seen) == {"algo-1", "algo-2"}
    assert seen["algo-1"]["cluster"] == seen["algo-2"]["cluster"]
    cluster = seen["algo-1"]["cluster"]
    assert set(cluster) == {"master", "ps", "worker"}
    assert len(cluster["master"]) == 1 and len(cluster["ps"]) == 2 and len(cluster["worker"]) == 1
    everything = cluster["master"] + cluster["ps"] + cluster["worker"]
    assert len(set(everything)) == 4, cluster
    address = {h: cluster["master" if h == "algo-1" else "worker"][0].rsplit(":", 1)[0]
               for h in ("algo-1", "algo-2")}  # fmt: skip
    assert address["algo-1"] != address["algo-2"]
    assert [p.rsplit(":", 1)[0] for p in cluster["ps"]] == [address["algo-1"], address["algo-2"]]
    assert seen["algo-1"]["task"] == {"index": 0, "type": "master"}
    assert seen["algo-2"]["task"] == {"index": 0, "type": "worker"}
