"""Multi-host jobs on loopback: torchrun (gloo), MPI (OpenMPI + mpi4py), TF_CONFIG, failures."""

from __future__ import annotations

import json
import signal
import time

import pytest

TORCH_SCRIPT = """
import datetime, json, os, sys, time
import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank)])
dist.all_reduce(value)
print(json.dumps({
    "rank": rank, "world": world, "local_rank": int(os.environ["LOCAL_RANK"]),
    "host": os.environ["SM_CURRENT_HOST"], "sum": value.item(),
    "model_dir": os.environ["SM_MODEL_DIR"],
}), flush=True)
if rank == int(os.environ.get("SM_HP_FAIL_RANK", "-1")):
    time.sleep(0.3)
    raise RuntimeError(f"rank {rank} hit a bad batch")
dist.barrier()
if rank == 0:
    torch.save(torch.nn.Linear(2, 1).state_dict(), os.path.join(os.environ["SM_MODEL_DIR"], "model.pt"))
dist.destroy_process_group()
"""

MPI_SCRIPT = """
import json, os, time
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, world = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank)
print(json.dumps({
    "rank": rank, "world": world,
    "local_rank": int(os.environ["OMPI_COMM_WORLD_LOCAL_RANK"]),
    "host": os.environ["SM_CURRENT_HOST"], "sum": total,
    "model_dir": os.environ["SM_MODEL_DIR"], "cwd": os.getcwd(),
}), flush=True)
if rank == int(os.environ.get("SM_HP_FAIL_RANK", "-1")):
    time.sleep(0.3)
    raise RuntimeError(f"mpi rank {rank} hit a bad batch")
comm.Barrier()
"""

TF_SCRIPT = """
import json, os
print(json.dumps({"tf_config": json.loads(os.environ["TF_CONFIG"]), "host": os.environ["SM_CURRENT_HOST"]}))
"""

TWO_BY_TWO = {"sagemaker_mpi_num_of_processes_per_host": 2}


def _check_world(results: dict, *, rank_key: str = "local_rank") -> None:
    seen = {}
    for host, result in results.items():
        assert result.returncode == 0, result.stdout + result.stderr
        for line in result.lines():
            if line.startswith("{"):
                pytest.fail(f"unlabelled rank line on {host}: {line}")
        for info in result.json_lines():
            seen[info["rank"]] = info
            assert info["host"] == host
            assert info["model_dir"] == str(result.base / "model")
            assert f"[rank {info['rank']}] " + "{" in result.stdout
    assert sorted(seen) == [0, 1, 2, 3]
    for rank, info in seen.items():
        assert info["world"] == 4 and info["sum"] == 6
        assert info[rank_key] == rank % 2
        assert info["host"] == f"algo-{rank // 2 + 1}"


def _two_hosts_by_two(local_job, script: str, enabled: str):
    """``script`` as train.py on 2 hosts of 2 processes, the ``enabled`` launcher; world checked."""
    job = local_job({"train.py": script}, hosts=2, hyperparameters={enabled: True, **TWO_BY_TWO})
    results = job.run(timeout=90)
    _check_world(results)
    return job, results


def test_torch_distributed_two_hosts_by_two(local_job) -> None:
    job, _ = _two_hosts_by_two(local_job, TORCH_SCRIPT, "sagemaker_torch_distributed_enabled")
    assert (job.base("algo-1") / "model" / "model.pt").exists()


def test_mpi_two_hosts_by_two(local_job) -> None:
    job, results = _two_hosts_by_two(local_job, MPI_SCRIPT, "sagemaker_mpi_enabled")
    for host, result in results.items():
        for info in result.json_lines():
            assert info["cwd"] == str(job.base(host) / "code")


def _assert_root_cause(results: dict, *, rank: int, host: str, message: str) -> None:
    for name, result in results.items():
        assert result.returncode != 0, name
        head = result.failure[:1024]
        assert f"Rank {rank}" in head and f"host {host}" in head, head
        assert "exit code 1" in head and message in head, head
        report = result.failure_json
        assert (report["rank"], report["host"], report["exit_code"]) == (rank, host, 1)
        assert report["traceback_tail"].splitlines()[-1] == f"RuntimeError: {message}"
        assert report["reporting_host"] == name
        assert {r["rank"] for r in report["ranks"]} >= {rank}


def test_torch_rank_failure_tears_down_every_host(local_job) -> None:
    job = local_job(
        {"train.py": TORCH_SCRIPT},
        hosts=2,
        hyperparameters={"sagemaker_torch_distributed_enabled": True, "fail_rank": 3, **TWO_BY_TWO},
    )
    job.start()
    results = job.wait(timeout=90)
    raised = json.loads((job.shared / "ranks" / "rank-3.json").read_text())["timestamp"]
    ended = max(p.stat().st_mtime for p in (job.base(h) / "output" / "failure" for h in job.hosts))
    assert ended - raised < 10, f"runtimes took {ended - raised:.1f} s after the failure"
    _assert_root_cause(results, rank=3, host="algo-2", message="rank 3 hit a bad batch")
    assert not job.leftovers()
    # The failing rank's own traceback reached the log, labelled.
    assert (
        "[rank 3] " in results["algo-2"].stderr
        and "rank 3 hit a bad batch" in results["algo-2"].stderr
    )


def test_mpi_rank_failure_is_reported_on_every_host(local_job) -> None:
    job = local_job(
        {"train.py": MPI_SCRIPT},
        hosts=2,
        hyperparameters={"sagemaker_mpi_enabled": True, "fail_rank": 3, **TWO_BY_TWO},
    )
    results = job.run(timeout=90)
    _assert_root_cause(results, rank=3, host="algo-2", message="mpi rank 3 hit a bad batch")
    assert not job.leftovers()


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (
            "sagemaker_parameter_server_enabled",
            {
                "algo-1": {
                    "cluster": {
                        "master": ["127.0.0.1:{p0}"],
                        "ps": ["127.0.0.1:{p1}", "127.0.0.1:{p3}"],
                        "worker": ["127.0.0.1:{p2}"],
                    },
                    "environment": "cloud",
                    "task": {"index": 0, "type": "master"},
                },
                "algo-2": {"task": {"index": 0, "type": "worker"}},
            },
        ),
        (
            "sagemaker_multi_worker_mirrored_strategy_enabled",
            {
                "algo-1": {
                    "cluster": {"worker": ["127.0.0.1:{p0}", "127.0.0.1:{p1}"]},
                    "environment": "cloud",
                    "task": {"index": 0, "type": "worker"},
                },
                "algo-2": {"task": {"index": 1, "type": "worker"}},
            },
        ),
    ],
)
def test_tf_config_each_host_sees(local_job, key: str, expected: dict) -> None:
    job = local_job({"train.py": TF_SCRIPT}, hosts=2, hyperparameters={key: True})
    results = job.run(timeout=60)
    ports = {f"p{i}": job.port + i for i in range(4)}
    configs = {}
    for host, result in results.items():
        assert result.returncode == 0, result.stderr
        (info,) = result.json_lines()
        assert info["host"] == host
        configs[host] = info["tf_config"]
    text = json.dumps(expected["algo-1"])
    for name, port in ports.items():
        text = text.replace("{" + name + "}", str(port))
    first = json.loads(text)
    assert configs["algo-1"] == first
    assert configs["algo-2"]["cluster"] == first["cluster"]
    assert configs["algo-2"]["task"] == expected["algo-2"]["task"]


def test_sigterm_stops_a_torchrun_job_within_the_grace_period(local_job) -> None:
    script = TORCH_SCRIPT.replace(
        "dist.barrier()",
        "import signal\n"
        "def on_term(s, f):\n"
        "    open(os.path.join(os.environ['SM_MODEL_DIR'], f'ckpt-{rank}'), 'w').write('x')\n"
        "    os._exit(0)\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        "open(os.path.join(os.environ['SM_MODEL_DIR'], f'ready-{rank}'), 'w').close()\n"
        "time.sleep(600)\n"
        "dist.barrier()",
    )
    job = local_job(
        {"train.py": script},
        hosts=1,
        hyperparameters={"sagemaker_torch_distributed_enabled": True, **TWO_BY_TWO},
    )
    job.start()
    model = job.base("algo-1") / "model"
    deadline = time.monotonic() + 60
    while not all((model / f"ready-{r}").exists() for r in (0, 1)):
        assert time.monotonic() < deadline and job.procs["algo-1"].poll() is None
        time.sleep(0.1)
    job.procs["algo-1"].send_signal(signal.SIGTERM)
    sent = time.monotonic()
    result = job.wait(timeout=30)["algo-1"]
    assert time.monotonic() - sent < 3 + 2
    assert result.returncode == 128 + signal.SIGTERM
    assert sorted(p.name for p in model.glob("ckpt-*")) == ["ckpt-0", "ckpt-1"]
    assert not job.leftovers()


def test_a_rank_killed_without_a_traceback_is_the_root_cause_not_its_peers(local_job) -> None:
    """Rank 1 dies of SIGKILL mid-collective; ranks 0, 2, 3 then fail in gloo: rank 1 is reported."""
    script = TORCH_SCRIPT.replace(
        "dist.barrier()",
        "if rank == 1:\n"
        "    os.kill(os.getpid(), 9)\n"
        "value = torch.tensor([1.0])\n"
        "dist.all_reduce(value)\n"
        "dist.barrier()",
    )
    job = local_job(
        {"train.py": script},
        hosts=2,
        hyperparameters={"sagemaker_torch_distributed_enabled": True, **TWO_BY_TWO},
    )
    results = job.run(timeout=90)
    for name, result in results.items():
        assert result.returncode != 0, name
        report = result.failure_json
        assert (report["rank"], report["host"]) == (1, "algo-1"), result.failure
        assert report["cause"] == "crash"
        assert "Rank 1" in result.failure[:1024] and "host algo-1" in result.failure[:1024]
    assert not job.leftovers()


KILL_SELF_SCRIPT = """
import os, signal, time
rank = int(os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
time.sleep(2)  # running, as a rank the OOM killer picks is
if rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(60)
"""


# Rank 1 dies before the runtime has looked at it, so mpirun reaps it and is the only one
# to know its status. Rank 0, stopped by mpirun, records its end (143) and lingers a
# moment, which keeps mpirun from printing that status until the runtime has seen the 143.
KILL_SELF_AT_ONCE = """
import os, signal, sys, threading, time
rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
if rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)

def stopped(*_):
    threading.Thread(target=time.sleep, args=(0.6,)).start()
    sys.exit(143)

signal.signal(signal.SIGTERM, stopped)
time.sleep(60)
"""


@pytest.mark.parametrize(
    ("launcher", "script"),
    [
        ("torch_distributed", KILL_SELF_SCRIPT),
        ("mpi", KILL_SELF_SCRIPT),
        # mpirun must live to print the status, though the job is already being torn down.
        ("mpi", KILL_SELF_AT_ONCE),
    ],
    ids=["torch_distributed", "mpi", "mpi-reaped-first"],
)
def test_a_rank_killed_by_sigkill_is_reported_with_the_signal_and_a_memory_hint(
    local_job, launcher, script
) -> None:
    """Not "exit code unknown": the report names SIGKILL and points at the OOM killer."""
    enabled = (
        {"sagemaker_torch_distributed_enabled": True}
        if launcher == "torch_distributed"
        else {"sagemaker_mpi_enabled": True, "sagemaker_mpi_custom_mpi_options": ""}
    )
    job = local_job({"train.py": script}, hosts=1, hyperparameters={**enabled, **TWO_BY_TWO})
    results = job.run(timeout=90)
    result = results["algo-1"]
    assert result.returncode != 0
    head = result.failure[:1024]
    assert "unknown" not in head, head
    assert "Rank 1" in head and "SIGKILL (signal 9)" in head, head
    assert "out-of-memory killer" in head and "memory" in head, head
    assert result.failure_json["exit_code"] == 128 + signal.SIGKILL
