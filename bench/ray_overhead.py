"""What launchbay's Ray backend costs over running torchrun on Ray yourself (issue 24).

One run makes a Ray cluster on this machine (a head with no CPU and 2 worker
nodes of 2 CPUs, each its own raylet, all on 127.0.0.1) and times, side by side
and interleaved, the same 2-host x 2-process no-op ``torch_distributed`` job
(join the gloo world, barrier, leave):

* **ray**: ``PyTorch(instance_type="ray", instance_count=2, ...).fit()``, from the
  call to its return (code packaging, the job record, the placement group, one
  actor per host, channels and code staged on the nodes, the runtime, torchrun,
  outputs fetched back, ``model.tar.gz`` written, every actor and the group removed);
* **local_process**: the same ``fit()`` with ``instance_type="local_process"``;
* **bare ray**: what a user would write without launchbay: a ``STRICT_SPREAD``
  placement group of 2 bundles, one actor per bundle, a free port from the first,
  each actor running ``torchrun --nnodes 2 --nproc_per_node 2 --node_rank i`` on the
  script directly (gloo on loopback, as launchbay sets it), then the actors killed
  and the group removed.

Usage, from the repository root::

    python bench/ray_overhead.py            # 5 runs of each (about 2 minutes on 2 cores)
    python bench/ray_overhead.py --reps 3

Each figure is the median of ``--reps`` runs; the goal (ray within 1.2x of bare
ray) is printed with whether it is met. The load average is printed beside the
table: timings on a busy machine are noisy.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

# Every node, and this driver, on 127.0.0.1 (read when Ray is first imported).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

SCRIPT = """\
import torch.distributed as dist

dist.init_process_group("gloo")
dist.barrier()
dist.destroy_process_group()
"""
GOAL = 1.2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


class Torchrun:
    """A bare Ray actor that runs torchrun on its node."""

    def port(self) -> int:
        return free_port()

    def run(self, script: str, node_rank: int, port: int) -> int:
        argv = [
            sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
            "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port", str(port),
            "--node_rank", str(node_rank), script,
        ]  # fmt: skip
        # gloo on loopback, as launchbay sets it (the nodes' address is 127.0.0.1).
        env = dict(os.environ, GLOO_SOCKET_IFNAME="lo")
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=env)
        return done.returncode


def bare_ray(script: str) -> float:
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    import ray

    started = time.perf_counter()
    group = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="STRICT_SPREAD")
    ray.get(group.ready())
    actor = ray.remote(Torchrun)
    actors = [
        actor.options(
            num_cpus=1,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=group, placement_group_bundle_index=i
            ),
        ).remote()
        for i in range(2)
    ]
    port = ray.get(actors[0].port.remote())
    codes = ray.get([a.run.remote(script, i, port) for i, a in enumerate(actors)])
    for a in actors:
        ray.kill(a)
    remove_placement_group(group)
    elapsed = time.perf_counter() - started
    assert codes == [0, 0], codes
    return elapsed


def launchbay_fit(source_dir: str, instance_type: str, out: str) -> float:
    from launchbay.pytorch import PyTorch

    estimator = PyTorch(
        entry_point="noop.py",
        source_dir=source_dir,
        role=None,
        instance_type=instance_type,
        instance_count=2,
        framework_version="2.8.0",
        py_version="py312",
        distribution={"torch_distributed": {"enabled": True}},
        hyperparameters={"sagemaker_mpi_num_of_processes_per_host": 2},
        output_path=f"file://{out}",
    )
    started = time.perf_counter()
    estimator.fit(wait=True, logs=False)
    elapsed = time.perf_counter() - started
    status = estimator.latest_training_job.describe()["TrainingJobStatus"]
    assert status == "Completed", status
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    from ray.cluster_utils import Cluster

    import ray

    with tempfile.TemporaryDirectory(prefix="launchbay-ray-bench-") as tmp:
        os.environ["LAUNCHBAY_HOME"] = os.path.join(tmp, "home")
        source = Path(tmp, "src")
        source.mkdir()
        (source / "noop.py").write_text(SCRIPT)
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 0,
                "include_dashboard": False,
                "node_ip_address": "127.0.0.1",
            },
        )
        try:
            for _ in range(2):
                cluster.add_node(num_cpus=2, node_ip_address="127.0.0.1")
            ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
            cluster.wait_for_nodes()
            times: dict[str, list[float]] = {"ray": [], "local_process": [], "bare ray": []}
            # One of each first, untimed: imports, Ray's worker pool, torch's first load.
            bare_ray(str(source / "noop.py"))
            launchbay_fit(str(source), "ray", os.path.join(tmp, "out"))
            launchbay_fit(str(source), "local_process", os.path.join(tmp, "out"))
            for rep in range(args.reps):
                times["bare ray"].append(bare_ray(str(source / "noop.py")))
                times["ray"].append(launchbay_fit(str(source), "ray", os.path.join(tmp, "out")))
                times["local_process"].append(
                    launchbay_fit(str(source), "local_process", os.path.join(tmp, "out"))
                )
                print(
                    f"run {rep + 1}/{args.reps}: "
                    + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()),
                    flush=True,
                )
        finally:
            ray.shutdown()
            cluster.shutdown()
    median = {k: statistics.median(v) for k, v in times.items()}
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print()
    print(f"2 hosts x 2 processes, no-op torch_distributed job; median of {args.reps} runs")
    print(f"load average: {load}; {os.cpu_count()} CPUs")
    print(f"{'':24}{'seconds':>10}")
    for name, value in median.items():
        print(f"{name:24}{value:>10.2f}")
    ratio = median["ray"] / median["bare ray"]
    met = "met" if ratio <= GOAL else "NOT met"
    print(f"ray / bare ray          {ratio:>10.2f}x   goal <= {GOAL}x: {met}")
    print(f"ray / local_process     {median['ray'] / median['local_process']:>10.2f}x")


if __name__ == "__main__":
    main()
