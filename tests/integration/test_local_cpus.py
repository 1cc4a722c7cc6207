"""A local_process host of a multi-host job runs on its own share of this machine's CPUs.

As a machine's hosts each have their own CPUs (launchbay/_capacity.py, docs/local.md):
each host's runtime and every rank of it keep to the host's share, wherever the rank was
started (one torchrun or one mpirun starts every rank of every host here), and
``SM_NUM_CPUS`` counts the share. One host, or more hosts than CPUs, keeps every CPU.
Real runtimes, torchrun and Open MPI; each rank writes what it sees (``gpu_env_dump.py``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from factories import estimator as local_estimator
from job_outputs import file_uri
from launchbay._capacity import split_cpus

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "local_process_scripts"
CPUS = sorted(os.sched_getaffinity(0))


def ranks_seen(tmp_path: Path, **kwargs) -> dict[str, dict]:
    dump = tmp_path / "dump"
    dump.mkdir()
    options = dict(hyperparameters={"dump": str(dump)}, output_path=file_uri(tmp_path / "out"))
    local_estimator("gpu_env_dump.py", SCRIPTS, **(options | kwargs)).fit(logs=False)
    return {p.stem: json.loads(p.read_text()) for p in sorted(dump.glob("*.json"))}


def halves() -> dict[str, list[int]]:
    """Two hosts' shares as a reader would cut them: the first half (one more if odd) and
    the rest, in order."""
    first = (len(CPUS) + 1) // 2
    return {"algo-1": CPUS[:first], "algo-2": CPUS[first:]}


@pytest.mark.parametrize(
    "distribution",
    [{"torch_distributed": {"enabled": True}}, {"mpi": {"enabled": True, "processes_per_host": 2}}],
    ids=["torchrun", "mpirun"],
)
def test_each_host_and_its_ranks_run_on_their_own_share_of_the_cpus(home, tmp_path, distribution):
    assert len(CPUS) >= 2, "this test needs a machine with 2 CPUs or more"
    seen = ranks_seen(tmp_path, instance_count=2, distribution=distribution)
    assert {r["SM_CURRENT_HOST"] for r in seen.values()} == {"algo-1", "algo-2"}
    expected = halves()
    for name, report in seen.items():
        host = report["SM_CURRENT_HOST"]
        assert name.startswith(host)
        assert report["cpus"] == expected[host], name
        assert report["SM_NUM_CPUS"] == str(len(expected[host])), name
    assert set(expected["algo-1"]).isdisjoint(expected["algo-2"])


def test_one_host_keeps_every_cpu(home, tmp_path):
    seen = ranks_seen(tmp_path, instance_count=1)
    assert [(r["cpus"], r["SM_NUM_CPUS"]) for r in seen.values()] == [(CPUS, str(len(CPUS)))]


def test_more_hosts_than_cpus_share_every_cpu(home, tmp_path):
    hosts = len(CPUS) + 1
    seen = ranks_seen(tmp_path, instance_count=hosts)
    assert sorted(r["SM_CURRENT_HOST"] for r in seen.values()) == [
        f"algo-{i}" for i in range(1, hosts + 1)
    ]
    assert {(tuple(r["cpus"]), r["SM_NUM_CPUS"]) for r in seen.values()} == {
        (tuple(CPUS), str(len(CPUS)))
    }


# --------------------------------------------------------------------------- the rule


@pytest.mark.parametrize(
    ("hosts", "cpus", "shares"),
    [
        (2, [0, 1], [[0], [1]]),
        (2, [0, 1, 2, 3, 4], [[0, 1, 2], [3, 4]]),
        (3, [2, 3, 5, 7, 8, 9, 10, 11], [[2, 3, 5], [7, 8, 9], [10, 11]]),
        (4, [0, 1, 2, 3], [[0], [1], [2], [3]]),
        (1, [0, 1, 2, 3], None),
        (3, [0, 1], None),
    ],
)
def test_shares_are_contiguous_in_order_the_first_hosts_taking_the_rest(hosts, cpus, shares):
    assert split_cpus(hosts, cpus) == shares
