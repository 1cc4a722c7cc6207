"""``local_process``: a failure inside a user's own launcher is the launcher's failure.

The entry point is a launcher script, as in notebooks/pytorch_ddp_launcher.ipynb: it
builds torch.distributed's rendezvous from ``SM_HOSTS``/``SM_CURRENT_HOST`` and starts
``python -m torch.distributed.run`` itself with ``subprocess.run(check=True)``. Every
host's torchrun worker raises an ``AssertionError`` after joining the gloo group, so
every torchrun agent fails and every launcher exits with code 1 (``CalledProcessError``).

The rank is the launcher, the process the runtime started: the job's FailureReason
names its host and its exit code, and the child's ``AssertionError`` only as context,
never as "a rank on an unknown host" (issue 22). Which host's launcher fails first
varies from run to run, so the job runs ten times: half of them with the hosts on this
machine's shared loopback (``LAUNCHBAY_HOST_NETWORK=shared``, where the wrong reason was
seen), half with a network of their own where the machine allows it.
"""

from __future__ import annotations

import re
import socket

import pytest

from factories import estimator as make_estimator
from launchbay import JobFailedError

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

LAUNCHER = """\
import json
import os
import subprocess
import sys

hosts = json.loads(os.environ["SM_HOSTS"])
current = os.environ["SM_CURRENT_HOST"]
port = sys.argv[sys.argv.index("--master-port") + 1]
subprocess.run(
    [
        sys.executable, "-m", "torch.distributed.run",
        "--nnodes", str(len(hosts)), "--node_rank", str(hosts.index(current)),
        "--nproc_per_node", "1", "--master_addr", hosts[0], "--master_port", port,
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "child.py"),
    ],
    check=True,
)
"""

CHILD = """\
import os
import random
import time

import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
time.sleep(random.uniform(0.0, 0.6))  # the hosts' workers fail in either order, or together
assert rank < 0, f"worker {rank} on {os.environ['SM_CURRENT_HOST']} checks a broken invariant"
"""

REASON = re.compile(
    r"^AlgorithmError: Rank (?P<rank>[01]) \(local rank 0\) on host (?P<host>algo-[12]) "
    r"failed \(exit code 1\): CalledProcessError"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("run", range(10))
def test_a_failing_torchrun_child_is_reported_as_its_launchers_failure(home, tmp_path, run):
    network = ("shared", "own")[run % 2]
    src = tmp_path / "src"
    src.mkdir()
    (src / "launcher.py").write_text(LAUNCHER)
    (src / "child.py").write_text(CHILD)
    est = make_estimator(
        "launcher.py",
        src,
        instance_count=2,
        hyperparameters={"master-port": _free_port()},
        environment={"LAUNCHBAY_HOST_NETWORK": network},
        out=tmp_path / "out",
        max_run=240,
    )
    with pytest.raises(JobFailedError) as caught:
        est.fit(logs=False)
    reason = est.latest_training_job.describe()["FailureReason"]
    assert reason == caught.value.reason
    assert "unknown host" not in reason, reason
    match = REASON.match(reason)
    assert match, reason
    # Rank N is the launcher of host algo-(N+1): the plain launcher's rank is the host's index.
    assert int(match["rank"]) + 1 == int(match["host"][-1]), reason
    first_line = reason.splitlines()[0]
    assert "its child raised AssertionError: worker" in first_line, reason
    assert "checks a broken invariant" in first_line, reason
    assert len(reason) <= 1024
