"""``local_process``: host names (``algo-N``) resolve for every program of a job.

Real runtimes, real torch/gloo (C++ name resolution), ``getent`` and mpirun.
See :mod:`launchbay.runtime._hostnames` and docs/local.md.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from factories import estimator
from job_outputs import archive_members, file_uri
from launchbay.pytorch import PyTorch

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "local_process_scripts"


def _mounts() -> str:
    return Path("/proc/self/mountinfo").read_text()


def _estimator(entry_point: str, out: Path, **kwargs) -> PyTorch:
    return estimator(entry_point, SCRIPTS, out=out, **{"instance_count": 2, **kwargs})


# auto: each host its own network (runtime._netns), algo-N at 10.213.0.N; namespace: the
# hosts share this machine's network, a mount namespace each (these tests run as root);
# nss_wrapper: LD_PRELOAD. Both of the latter give every algo-N loopback.
ADDRESSES = {
    "auto": ({"algo-1": "::ffff:10.213.0.1", "algo-2": "::ffff:10.213.0.2"}, "10.213.0."),
    "namespace": ({"algo-1": "127.0.0.1", "algo-2": "127.0.0.1"}, None),
    "nss_wrapper": ({"algo-1": "::ffff:127.0.0.1", "algo-2": "::ffff:127.0.0.1"}, None),
}


@pytest.mark.parametrize("mode", sorted(ADDRESSES))
def test_script_with_its_own_rendezvous_from_sm_hosts(home, tmp_path, mode):
    etc_hosts = Path("/etc/hosts").read_text()
    environment = {"LAUNCHBAY_HOST_NAMES": mode}
    if mode == "namespace":
        environment["LAUNCHBAY_HOST_NETWORK"] = "shared"
    est = _estimator("own_rendezvous.py", tmp_path / "out", environment=environment)
    est.fit(logs=False)
    name = est.latest_training_job.name
    model = archive_members(tmp_path / "out" / name / "output" / "model.tar.gz")
    assert sorted(model) == ["algo-1.json", "algo-2.json"]
    for host in ("algo-1", "algo-2"):
        report = json.loads(model[f"{host}.json"])
        assert report["master_addr"] == "algo-1"
        assert report["sum"] == 3.0  # 1 + 2: the all_reduce went through algo-1
        assert report["getent_rc"] == 0  # C library (NSS), not only Python
        resolved = {line.split()[1]: line.split()[0] for line in report["getent"] if line}
        getent, subnet = ADDRESSES[mode]
        assert resolved == getent
        if subnet:
            assert report["python"] == {"algo-1": subnet + "1", "algo-2": subnet + "2"}
        else:
            assert report["python"] == {"algo-1": "127.0.0.1", "algo-2": "127.0.0.1"}
        assert sorted(report["peers"]) == ["algo-1", "algo-2"]
    # The machine's /etc/hosts is as before and no mount of the job is left.
    assert Path("/etc/hosts").read_text() == etc_hosts
    assert str(home) not in _mounts()
    assert "algo-1" not in Path("/etc/hosts").read_text()


def test_mpirun_started_by_the_script_with_algo_host_names(home, tmp_path):
    est = _estimator("mpirun_by_name.py", tmp_path / "out")
    est.fit(logs=False)
    name = est.latest_training_job.name
    model = archive_members(tmp_path / "out" / name / "output" / "model.tar.gz")
    report = json.loads(model["mpirun.json"])
    assert report["rc"] == 0, report["err"]
    assert report["out"].split() == ["sum", "3", "sum", "3"]


# --------------------------------------------------------------------------- TF model_dir


def test_tensorflow_model_dir_is_the_jobs_own_model_dir(home, tmp_path):
    from launchbay.tensorflow import TensorFlow

    est = estimator(
        "tf_model_dir.py",
        SCRIPTS,
        framework=TensorFlow,
        output_path=file_uri(tmp_path / "out"),
    )
    # The request is SageMaker's: the container path, as SDK v2 sends it.
    assert est.create_training_job_request()["HyperParameters"]["model_dir"] == '"/opt/ml/model"'
    est.fit(logs=False)
    name = est.latest_training_job.name
    model = archive_members(tmp_path / "out" / name / "output" / "model.tar.gz")
    assert "1/saved_model.pb" in model
    seen = model["model_dir.txt"].decode()
    assert seen == str(home / "jobs" / name / "algo-1" / "model")
    assert not os.path.exists("/opt/ml/model/1")


def test_a_named_mechanism_that_cannot_work_fails_the_job_at_start(home, tmp_path):
    from launchbay import JobFailedError

    missing = str(tmp_path / "no-libnss_wrapper.so")
    est = _estimator(
        "own_rendezvous.py",
        tmp_path / "out",
        environment={"LAUNCHBAY_HOST_NAMES": "nss_wrapper", "LAUNCHBAY_NSS_WRAPPER": missing},
    )
    with pytest.raises(JobFailedError) as info:
        est.fit(logs=False)
    reason = est.latest_training_job.describe()["FailureReason"]
    assert (
        "LAUNCHBAY_HOST_NAMES='nss_wrapper': the host names of this local_process job cannot "
        f"be made to resolve (nss_wrapper: LAUNCHBAY_NSS_WRAPPER={missing!r} is not a file)"
    ) in reason
    assert "Accepted: auto, namespace" in str(info.value)
