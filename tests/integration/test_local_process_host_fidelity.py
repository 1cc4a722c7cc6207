"""``local_process``: each host owns its ``/opt/ml``, its ports and its name (issue 22).

Real runtimes, real namespaces (these tests run as root; unprivileged user
namespaces give the same), real torch/gloo. See :mod:`launchbay.runtime._netns`,
:mod:`launchbay.runtime._hostnames` and docs/local.md ("What a local host owns").
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from factories import estimator
from job_outputs import archive_members, file_uri
from job_processes import http_answers
from launchbay import JobFailedError
from launchbay.backends.local import process_hosts
from launchbay.pytorch import PyTorch

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "local_process_scripts"
NETWORKS = ["own", "shared"]


def _estimator(entry_point: str, out: Path, network: str = "own", **kwargs) -> PyTorch:
    environment = {"LAUNCHBAY_HOST_NETWORK": network, **kwargs.pop("environment", {})}
    kwargs = {"instance_count": 2, **kwargs}
    return estimator(entry_point, SCRIPTS, out=out, environment=environment, **kwargs)


def _marks(tmp_path: Path) -> dict[str, str]:
    """A directory where same_ports.py's hosts say they hold their ports."""
    marks = tmp_path / "marks"
    marks.mkdir()
    return {"MARKS": str(marks)}


def _opt_ml_state() -> list[str] | None:
    """The machine's /opt/ml as this (test) process sees it: None when there is none."""
    if not os.path.lexists("/opt/ml"):
        return None
    return sorted(str(p) for p in Path("/opt/ml").rglob("*"))


def _switches(home: Path) -> list[int]:
    """This test's job network processes (``python -m launchbay.runtime._netns``) left."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
                environ = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            mine = f"LAUNCHBAY_HOME={home}".encode() in environ
            if mine and b"launchbay.runtime._netns" in cmdline:
                found.append(int(name))
    return found


@pytest.mark.parametrize("network", NETWORKS)
def test_literal_opt_ml_paths_land_in_the_hosts_archives(home, tmp_path, network):
    before = _opt_ml_state()
    est = _estimator(
        "opt_ml_literal.py",
        tmp_path / "out",
        network,
        distribution={"torch_distributed": {"enabled": True}},
    )
    est.fit(logs=False)
    job = tmp_path / "out" / est.latest_training_job.name / "output"
    model = archive_members(job / "model.tar.gz")
    output = archive_members(job / "output.tar.gz")
    # One torchrun for both hosts: algo-2's rank is a child of algo-1's runtime, and still
    # sees algo-2's tree at /opt/ml.
    expected = {"algo-1-0.txt": b"True", "algo-2-1.txt": b"True"}
    assert {k: v for k, v in model.items() if k.endswith(".txt")} == expected
    assert {k.rpartition("/")[2]: v for k, v in output.items() if k.endswith(".txt")} == expected
    assert _opt_ml_state() == before  # the machine's /opt/ml: untouched (here: none)
    assert not _switches(home)


def test_two_hosts_bind_the_same_loopback_port_and_their_own_names(home, tmp_path):
    est = _estimator("same_ports.py", tmp_path / "out", environment=_marks(tmp_path))
    est.fit(logs=False)
    model = archive_members(
        tmp_path / "out" / est.latest_training_job.name / "output" / "model.tar.gz"
    )
    reports = {name: json.loads(model[f"{name}.json"]) for name in ("algo-1", "algo-2")}
    assert reports["algo-1"]["seen"] == {"algo-2": "algo-2"}
    assert reports["algo-2"]["seen"] == {"algo-1": "algo-1"}
    for host, report in reports.items():
        assert report["hostname"] == host  # its own name, as in a container
        assert report["address"] == f"10.213.0.{host[-1]}"
    assert not _switches(home)  # the job's switch and relay ended with it


def test_the_same_port_on_a_shared_loopback_names_the_cause(home, tmp_path):
    est = _estimator(
        "same_ports.py", tmp_path / "out", network="shared", environment=_marks(tmp_path)
    )
    with pytest.raises(JobFailedError):
        est.fit(logs=False)
    reason = est.latest_training_job.describe()["FailureReason"]
    assert "Address already in use" in reason
    assert "loopback" in reason and "instance_type='local'" in reason


def test_a_host_reaches_the_clients_network_through_the_relay(home, tmp_path):
    with http_answers(lambda path: f"client loopback {path}".encode()) as port:
        est = _estimator(
            "outside.py",
            tmp_path / "out",
            instance_count=1,
            # The client machine is host.docker.internal from a host (its 127.0.0.1 is its own).
            hyperparameters={
                "url": f"http://host.docker.internal:{port}/plain",
                "tunnel": f"host.docker.internal:{port}",
            },
        )
        est.fit(logs=False)
    model = archive_members(
        tmp_path / "out" / est.latest_training_job.name / "output" / "model.tar.gz"
    )
    assert json.loads(model["outside.json"]) == {
        "plain": "client loopback /plain",
        "tunnel": "client loopback /tunnel",
    }


def test_a_bad_network_setting_is_refused_naming_it(home, tmp_path):
    est = _estimator("same_ports.py", tmp_path / "out", network="bridge")
    with pytest.raises(ValueError, match=r"LAUNCHBAY_HOST_NETWORK='bridge'.*Accepted: own"):
        est.fit(logs=False)


def test_no_mount_namespace_warns_once_naming_what_happens_to_opt_ml(home, tmp_path, monkeypatch):
    # LAUNCHBAY_HOST_NAMES=off asks for no namespace at all: the hosts have no /opt/ml of
    # their own, as on a machine without user namespaces; fit() says so, once per process
    # (an earlier test in this process may have had the warning: start afresh).
    monkeypatch.setattr(process_hosts, "_network_warned", [])
    est = _estimator("noop.py", tmp_path / "out", environment={"LAUNCHBAY_HOST_NAMES": "off"})
    with pytest.warns(UserWarning) as caught:
        est.fit(logs=False)
        est.fit(logs=False)
    messages = [str(w.message) for w in caught if "/opt/ml" in str(w.message)]
    assert len(messages) == 1, messages
    assert "LAUNCHBAY_HOST_NAMES=off makes no mount namespace" in messages[0]
    assert "left out of model.tar.gz" in messages[0] and "SM_MODEL_DIR" in messages[0]


def test_tf_workers_at_algo_n_on_the_same_port(home, tmp_path):
    from launchbay.tensorflow import TensorFlow

    est = estimator(
        "mwms_own_tf_config.py",
        SCRIPTS,
        framework=TensorFlow,
        instance_count=2,
        output_path=file_uri(tmp_path / "out"),
        environment={"TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    est.fit(logs=False)
    model = archive_members(
        tmp_path / "out" / est.latest_training_job.name / "output" / "model.tar.gz"
    )
    assert {k: v for k, v in model.items() if k.endswith(".txt")} == {
        "algo-1.txt": b"3.0",
        "algo-2.txt": b"3.0",
    }
