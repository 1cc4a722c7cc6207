"""Warm pools in local Docker mode (``keep_alive_period_in_seconds``; issue 36 item 2).

A job with a keep-alive period leaves its network and a container started ahead
for the next job; the next matching job runs in it. What a reused host must still
be: a container that ran nothing before, with a clean ``/opt/ml`` (nothing of the
earlier job's files), no process of the earlier job, and the new job's channels
only. A changed image or instance count gets a fresh host. ``describe()`` shows
``WarmPoolStatus`` as SageMaker does. The image is used as it is on the engine (the
pool needs nothing new inside it, so a source change does not rebuild it here).
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from launchbay import Estimator
from launchbay.backends.local import warm_pool
from launchbay.cli import main

pytestmark = [pytest.mark.docker]

IMAGE = "launchbay/pytorch-training:2.13.0-cpu-py311"
OTHER_IMAGE = "launchbay/sklearn-training:1.2-1-cpu-py3"

PROBE = r"""
import json, os, subprocess
files = sorted(os.path.join(r, f) for r, _, fs in os.walk("/opt/ml") for f in fs)
procs = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                procs.append(f.read().replace(b"\0", b" ").decode().strip())
        except OSError:
            pass
report = {
    "files": files,
    "procs": [p for p in procs if p],
    "tmp_marker": os.path.exists("/tmp/left-by-earlier-job"),
    "channels": sorted(os.listdir("/opt/ml/input/data")),
    "job": os.environ["TRAINING_JOB_NAME"],
}
with open("/opt/ml/model/report.json", "w") as f:
    json.dump(report, f)
if os.environ.get("LEAVE_THINGS"):
    open("/tmp/left-by-earlier-job", "w").close()
    os.makedirs("/opt/ml/output/data", exist_ok=True)
    open("/opt/ml/output/data/left-by-earlier-job", "w").close()
    open("/opt/ml/model/left-by-earlier-job", "w").close()
    subprocess.Popen(["sleep", "600"], start_new_session=True)  # a process left running
"""


@pytest.fixture(scope="module")
def images(docker_client):
    for image in (IMAGE, OTHER_IMAGE):
        docker_client.images.get(image)
    return IMAGE, OTHER_IMAGE


@pytest.fixture
def pools(docker_client, home):
    yield
    warm_pool.stop_pools(docker_client, now=True)
    left = docker_client.containers.list(all=True, filters={"label": warm_pool.LABEL_POOL})
    mine = [c for c in left if c.labels.get("launchbay.home") == str(home)]
    assert not mine, [c.name for c in mine]


def _fit(tmp_path, image, channel, count=1, leave=False, name="warm"):
    source = tmp_path / "src"
    source.mkdir(exist_ok=True)
    (source / "probe.py").write_text(PROBE)
    data = tmp_path / f"data-{channel}"
    data.mkdir(exist_ok=True)
    (data / f"{channel}.txt").write_text(channel)
    est = Estimator(
        image_uri=image,
        role=None,
        instance_type="local",
        instance_count=count,
        entry_point="probe.py",
        source_dir=str(source),
        output_path=f"file://{tmp_path}/out",
        keep_alive_period_in_seconds=300,
        environment={"LEAVE_THINGS": "1"} if leave else {},
        base_job_name=name,
    )
    est.fit({channel: f"file://{data}"}, logs=False)
    return est


def _report(est) -> dict:
    with tarfile.open(est.model_data.removeprefix("file://")) as tar:
        member = tar.extractfile("report.json")
        assert member is not None
        return json.load(member)


def _link(est) -> dict:
    job_dir = est.latest_training_job.describe()["LocalJobDir"]
    found = warm_pool.read_job_pool(job_dir)
    assert found is not None
    return found


def test_a_reused_host_is_clean_and_a_changed_config_gets_a_fresh_one(
    home, tmp_path, images, pools, docker_client, capsys
):
    first = _fit(tmp_path, IMAGE, "train", leave=True, name="warm-a")
    assert _link(first)["reused"] is False
    assert first.latest_training_job.describe()["WarmPoolStatus"]["Status"] == "Available"

    second = _fit(tmp_path, IMAGE, "eval", name="warm-b")
    link = _link(second)
    assert link["reused"] is True and link["key"] == _link(first)["key"]
    report = _report(second)
    assert report["job"] == second.latest_training_job.name
    # Nothing of the earlier job: its files in /opt/ml and /tmp, its process, its channel.
    assert not [f for f in report["files"] if "left-by-earlier-job" in f], report["files"]
    assert not report["tmp_marker"]
    assert not [p for p in report["procs"] if "sleep" in p], report["procs"]
    assert report["channels"] == ["eval"]
    assert [f for f in report["files"] if f.startswith("/opt/ml/input/data/")] == [
        "/opt/ml/input/data/eval/eval.txt"
    ]
    # The earlier job's own files came back to its job directory.
    first_dir = Path(first.latest_training_job.describe()["LocalJobDir"])
    assert (first_dir / "algo-1" / "output" / "data" / "left-by-earlier-job").exists()

    status = first.latest_training_job.describe()["WarmPoolStatus"]
    assert status["Status"] == "Reused"
    assert status["ReusedByJob"] == second.latest_training_job.name
    assert status["ResourceRetainedBillableTimeInSeconds"] >= 0
    assert second.latest_training_job.describe()["WarmPoolStatus"]["Status"] == "Available"

    # Another instance count, another image: a fresh host each.
    two = _fit(tmp_path, IMAGE, "eval", count=2, name="warm-c")
    assert _link(two)["reused"] is False and _link(two)["key"] != link["key"]
    other = _fit(tmp_path, OTHER_IMAGE, "eval", name="warm-d")
    assert _link(other)["reused"] is False and _link(other)["key"] != link["key"]

    # `launchbay list` shows the three live pools; `launchbay stop --warm-pool` ends them,
    # and their jobs say Terminated.
    warm_pool.wait_for_refills()  # each pool starts its next containers after fit() returns
    assert main(["list", "--backend", "docker", "--output", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)["warm_pools"]
    assert sorted(p["WarmPool"] for p in listed) == sorted(
        {_link(e)["key"] for e in (second, two, other)}
    )
    assert {p["Status"] for p in listed} == {"Available"}
    assert main(["stop", "--warm-pool", "--output", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["warm_pools_ended"]) == 3
    assert second.latest_training_job.describe()["WarmPoolStatus"]["Status"] == "Terminated"
    labels = [warm_pool.LABEL_POOL, f"launchbay.home={home}"]
    assert not docker_client.networks.list(filters={"label": labels})
