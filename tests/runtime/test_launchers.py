"""The launchers' command lines and environments (pure functions: nothing is run)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from launchbay.runtime import contract
from launchbay.runtime.code import EntryPoint
from launchbay.runtime.errors import TrainingSetupError
from launchbay.runtime.launchers import (
    LaunchContext,
    build_plan,
    mpi,
    select_launcher,
    tf_config,
    torchrun,
)
from launchbay.runtime.settings import RuntimeSettings

PY = "/usr/bin/python3"
SCRIPT = EntryPoint("train.py", "script")


def make_ctx(
    tmp_path: Path,
    hps: dict[str, object],
    *,
    host: str = "algo-1",
    hosts: int = 2,
    gpus: int = 0,
    instance_type: str = "ml.m5.xlarge",
    settings: RuntimeSettings | None = None,
    entry: EntryPoint = SCRIPT,
) -> LaunchContext:
    names = [f"algo-{i + 1}" for i in range(hosts)]
    request = {
        "HyperParameters": {k: json.dumps(v) for k, v in hps.items()},
        "ResourceConfig": {"InstanceType": instance_type, "InstanceCount": hosts},
    }
    base = tmp_path / host
    contract.write_host_config(str(base), request, host, names)
    env = contract.training_env(str(base), {}, num_gpus=gpus, num_cpus=4, num_neurons=0)
    settings = settings or RuntimeSettings()
    return LaunchContext(
        env=env,
        entry=entry,
        args=env.user_args(),
        base_env={"PATH": "/usr/bin:/bin", **contract.env_vars(env), "LAUNCHBAY_RANKS_DIR": "/r"},
        settings=settings,
        python=PY,
        io_dir="/io",
        ranks_dir="/r",
    )


LOCAL = RuntimeSettings(
    local_process=True,
    shared_dir="/shared",
    host_addresses={"algo-1": "127.0.0.1", "algo-2": "127.0.0.1"},
    master_port=29123,
)


@pytest.mark.parametrize(
    ("hps", "gpus", "local", "expected"),
    [
        ({}, 0, False, "plain"),
        ({"sagemaker_mpi_enabled": True}, 0, False, "mpi"),
        ({"sagemaker_torch_distributed_enabled": True}, 0, False, "torch_distributed"),
        ({"sagemaker_distributed_dataparallel_enabled": True}, 8, True, "torch_distributed"),
        ({"sagemaker_pytorch_ddp_enabled": True}, 0, False, "torch_distributed"),
        ({"sagemaker_parameter_server_enabled": True}, 0, False, "parameter_server"),
        (
            {"sagemaker_multi_worker_mirrored_strategy_enabled": True},
            0,
            False,
            "multi_worker_mirrored_strategy",
        ),
        ({"sagemaker_mpi_enabled": False}, 0, False, "plain"),
    ],
)
def test_select_launcher(tmp_path: Path, hps: dict, gpus: int, local: bool, expected: str) -> None:
    ctx = make_ctx(tmp_path, hps, gpus=gpus)
    assert select_launcher(ctx.env, LOCAL if local else RuntimeSettings()) == expected


def test_hosts_outside_the_distribution_run_plainly(tmp_path: Path) -> None:
    request = {
        "HyperParameters": {
            "sagemaker_torch_distributed_enabled": "true",
            "sagemaker_distribution_instance_groups": json.dumps(["gpu"]),
        },
        "ResourceConfig": {
            "InstanceGroups": [
                {"InstanceGroupName": "data", "InstanceType": "ml.c5.xlarge", "InstanceCount": 1},
                {"InstanceGroupName": "gpu", "InstanceType": "ml.g5.xlarge", "InstanceCount": 2},
            ]
        },
    }
    hosts = ["algo-1", "algo-2", "algo-3"]
    for host, expected in (("algo-1", "plain"), ("algo-2", "torch_distributed")):
        contract.write_host_config(str(tmp_path / host), request, host, hosts)
        env = contract.training_env(str(tmp_path / host), {}, num_gpus=0, num_cpus=1, num_neurons=0)
        assert select_launcher(env, RuntimeSettings()) == expected
    env = contract.training_env(str(tmp_path / "algo-2"), {}, num_gpus=0, num_cpus=1, num_neurons=0)
    assert env.distribution_hosts == ["algo-2", "algo-3"] and env.master_hostname == "algo-2"


def test_torchrun_on_sagemaker_matches_the_toolkit(tmp_path: Path) -> None:
    ctx = make_ctx(
        tmp_path,
        {"sagemaker_torch_distributed_enabled": True, "lr": 0.1},
        host="algo-2",
        gpus=8,
        instance_type="ml.p4d.24xlarge",
    )
    assert torchrun.torchrun_argv(ctx) == [
        PY, "-m", "torch.distributed.run",
        "--nnodes", "2", "--nproc_per_node", "8",
        "--master_addr", "algo-1", "--master_port", "7777", "--node_rank", "1",
        "-m", "launchbay.runtime._bootstrap", "train.py", "--lr", "0.1",
    ]  # fmt: skip
    plan = torchrun.build(ctx)
    env = plan.processes[0].env
    assert env["NCCL_SOCKET_IFNAME"] == "eth0" and env["NCCL_PROTO"] == "simple"
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert env["LAUNCHBAY_IO_DIR"] == "/io"
    assert plan.host_ranks == {8 + i: i for i in range(8)} and plan.world_size == 16
    assert plan.label_ranks and plan.fifo


def test_torchrun_single_host_and_local(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, {"sagemaker_torch_distributed_enabled": True}, hosts=1)
    assert torchrun.torchrun_argv(ctx)[3:7] == ["--nnodes", "1", "--nproc_per_node", "1"]
    assert "--master_addr" not in torchrun.torchrun_argv(ctx)
    local = make_ctx(
        tmp_path / "l",
        {"sagemaker_torch_distributed_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2},
        host="algo-2",
        settings=LOCAL,
    )
    argv = torchrun.torchrun_argv(local)
    assert argv[7:13] == [
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        "29123",
        "--node_rank",
        "1",
    ]
    env = torchrun.build(local).processes[0].env
    assert env["GLOO_SOCKET_IFNAME"] == "lo" and "NCCL_PROTO" not in env
    module = make_ctx(
        tmp_path / "m",
        {"sagemaker_torch_distributed_enabled": True},
        entry=EntryPoint("pkg.main", "module", module="pkg.main"),
    )
    assert torchrun.torchrun_argv(module)[-3:] == ["launchbay.runtime._bootstrap", "-m", "pkg.main"]
    with pytest.raises(TrainingSetupError, match="needs a Python entry point"):
        torchrun.torchrun_argv(make_ctx(tmp_path / "c", {}, entry=EntryPoint("run.sh", "command")))


def test_mpirun_over_ssh_matches_the_toolkit(tmp_path: Path) -> None:
    ctx = make_ctx(
        tmp_path,
        {
            "sagemaker_mpi_enabled": True,
            "sagemaker_mpi_num_of_processes_per_host": 2,
            "sagemaker_mpi_custom_mpi_options": "--NCCL_DEBUG WARN -x FOO=1",
            "epochs": 3,
        },
        instance_type="ml.p4d.24xlarge",
    )
    rank_env = dict(ctx.base_env, PYTHONPATH="/code", AWS_ACCESS_KEY_ID="k", LD_LIBRARY_PATH="/l")
    argv = mpi.mpirun_ssh_argv(ctx, rank_env)
    assert argv[:7] == [
        "mpirun",
        "--host",
        "algo-1:2,algo-2:2",
        "-np",
        "4",
        "--allow-run-as-root",
        "--display-map",
    ]
    joined = " ".join(argv)
    for option in (
        "--tag-output",
        "-mca btl_tcp_if_include eth0 -mca oob_tcp_if_include eth0",
        "-mca plm_rsh_no_tree_spawn 1 -bind-to none -map-by slot -mca pml ob1 -mca btl ^openib",
        "-mca orte_abort_on_non_zero_status 1 -mca btl_vader_single_copy_mechanism none",
        "-x NCCL_MIN_NRINGS=4 -x NCCL_SOCKET_IFNAME=eth0 -x NCCL_DEBUG=WARN -x LD_LIBRARY_PATH -x PATH -x FOO=1",
        "-x FI_PROVIDER=efa -x NCCL_PROTO=simple -x FI_EFA_USE_DEVICE_RDMA=1",
        "-x AWS_ACCESS_KEY_ID",
        "-x SM_HOSTS",
        "-x PYTHONPATH",
        "-x LAUNCHBAY_RANKS_DIR",
    ):
        assert option in joined, option
    assert argv[-8:] == [
        PY, "-m", "mpi4py", "-m", "launchbay.runtime._bootstrap", "train.py", "--epochs", "3",
    ]  # fmt: skip
    one = make_ctx(tmp_path / "one", {"sagemaker_mpi_enabled": True})
    assert mpi.mpirun_ssh_argv(one, one.base_env)[2] == "algo-1,algo-2"


def test_mpirun_local_and_rank_commands(tmp_path: Path) -> None:
    ctx = make_ctx(
        tmp_path,
        {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2},
        settings=LOCAL,
    )
    argv = mpi.mpirun_local_argv(ctx)
    assert argv[:3] == ["mpirun", "-np", "4"] and "--oversubscribe" in argv and "--host" not in argv
    assert argv[-6:] == [PY, "-m", "mpi4py", "-m", "launchbay.runtime._bootstrap", "train.py"]
    shell = make_ctx(tmp_path / "sh", {}, entry=EntryPoint("run.sh", "command"))
    assert mpi.rank_command(shell) == [
        PY, "-m", "launchbay.runtime._bootstrap", "--exec", "/bin/sh", "-c", "./run.sh",
    ]  # fmt: skip
    assert mpi.parse_custom_mpi_options("") == ("INFO", [])


def test_mpi_local_plans(tmp_path: Path) -> None:
    hps = {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2}
    master = mpi.build(make_ctx(tmp_path / "a", hps, settings=LOCAL))
    assert [p.name for p in master.processes] == ["mpirun"]
    spec = json.loads(master.processes[0].env["LAUNCHBAY_MPI_LOCAL"])
    assert spec == {"ppn": 2, "hosts": ["algo-1", "algo-2"], "env_dir": "/shared/mpi/env"}
    assert master.host_ranks == {0: 0, 1: 1} and master.gate is not None
    worker = mpi.build(make_ctx(tmp_path / "b", hps, host="algo-2", settings=LOCAL))
    assert worker.processes == [] and worker.waiter is not None and worker.stop_via_shared_dir
    assert worker.host_ranks == {2: 0, 3: 1}
    with pytest.raises(TrainingSetupError, match="LAUNCHBAY_SHARED_DIR"):
        mpi.build(make_ctx(tmp_path / "c", hps, settings=RuntimeSettings(local_process=True)))


def test_local_torchrun_is_one_launch_for_every_host(tmp_path: Path) -> None:
    """local_process, 2 hosts x 2: one torchrun of 4 ranks on algo-1; algo-2 waits for it.

    Other backends keep one torchrun per host (SageMaker's form).
    """
    hps = {
        "sagemaker_torch_distributed_enabled": True,
        "sagemaker_mpi_num_of_processes_per_host": 2,
    }
    master = build_plan(make_ctx(tmp_path / "a", hps, settings=LOCAL))
    [process] = master.processes
    assert process.name == "torchrun" and master.launcher == "torch_distributed"
    assert process.argv[3:13] == [
        "--nnodes", "1", "--nproc_per_node", "4",
        "--master_addr", "127.0.0.1", "--master_port", "29123", "--node_rank", "0",
    ]  # fmt: skip
    spec = json.loads(process.env["LAUNCHBAY_TORCH_LOCAL"])
    assert spec == {"ppn": 2, "hosts": ["algo-1", "algo-2"], "env_dir": "/shared/mpi/env"}
    assert process.env["GLOO_SOCKET_IFNAME"] == "lo" and process.env["LAUNCHBAY_IO_DIR"] == "/io"
    assert master.host_ranks == {0: 0, 1: 1} and master.world_size == 4 and master.gate
    worker = build_plan(make_ctx(tmp_path / "b", hps, host="algo-2", settings=LOCAL))
    assert worker.processes == [] and worker.waiter is not None and worker.stop_via_shared_dir
    assert worker.host_ranks == {2: 0, 3: 1}
    one_host = build_plan(make_ctx(tmp_path / "c", hps, hosts=1, settings=LOCAL))
    assert one_host.processes[0].argv[3:7] == ["--nnodes", "1", "--nproc_per_node", "2"]
    assert "LAUNCHBAY_TORCH_LOCAL" not in one_host.processes[0].env
    container = build_plan(make_ctx(tmp_path / "d", hps, host="algo-2"))
    assert container.processes[0].argv[3:7] == ["--nnodes", "2", "--nproc_per_node", "2"]
    # torchrun sets OMP_NUM_THREADS (with a banner) only for 2+ ranks a node: with one
    # rank a host the one torchrun gets it preset (no banner), the ranks drop it again
    assert "OMP_NUM_THREADS" not in process.env
    single = {"sagemaker_torch_distributed_enabled": True}
    [one_each] = build_plan(make_ctx(tmp_path / "e", single, settings=LOCAL)).processes
    assert one_each.env["OMP_NUM_THREADS"] == "1"


def test_a_rank_of_the_local_torchrun_becomes_a_rank_of_its_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from launchbay.runtime import _bootstrap

    env_dir = tmp_path / "env"
    env_dir.mkdir()
    for host in ("algo-1", "algo-2"):
        work = tmp_path / host
        work.mkdir()
        (env_dir / f"{host}.json").write_text(
            json.dumps({"env": {"SM_CURRENT_HOST": host, "RANK": "x"}, "cwd": str(work)})
        )
    spec = {"ppn": 2, "hosts": ["algo-1", "algo-2"], "env_dir": str(env_dir)}
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the host's PYTHONPATH is adopted
    for name, value in {
        "LAUNCHBAY_TORCH_LOCAL": json.dumps(spec), "RANK": "3", "WORLD_SIZE": "4",
        "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1",
        "ROLE_WORLD_SIZE": "4", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none",
        "OMP_NUM_THREADS": "1",
    }.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    _bootstrap._become_torch_local_rank()
    seen = {n: os.environ.get(n) for n in (
        "SM_CURRENT_HOST", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
        "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
        "OMP_NUM_THREADS",
    )}  # fmt: skip
    assert seen == {
        "SM_CURRENT_HOST": "algo-2", "RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2",
        "ROLE_WORLD_SIZE": "4", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none",
        "OMP_NUM_THREADS": "1",
    }  # fmt: skip
    assert os.getcwd() == str(tmp_path / "algo-2")

    # one rank a host: a torchrun per host would not have set OMP_NUM_THREADS
    monkeypatch.setenv("LAUNCHBAY_TORCH_LOCAL", json.dumps({**spec, "ppn": 1}))
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    _bootstrap._become_torch_local_rank()
    assert "OMP_NUM_THREADS" not in os.environ and os.environ["LOCAL_WORLD_SIZE"] == "1"


def test_smddp_line(tmp_path: Path) -> None:
    ctx = make_ctx(
        tmp_path,
        {
            "sagemaker_distributed_dataparallel_enabled": True,
            "sagemaker_instance_type": "ml.p4d.24xlarge",
        },
        gpus=8,
        instance_type="ml.p4d.24xlarge",
    )
    argv = mpi.smddp_argv(ctx, ctx.base_env)
    joined = " ".join(argv)
    assert argv[:5] == ["mpirun", "--host", "algo-1:8,algo-2:8", "-np", "16"]
    assert "-x SMDATAPARALLEL_USE_HOMOGENEOUS=1" in joined
    assert "-x SMDATAPARALLEL_SERVER_ADDR=algo-1 -x SMDATAPARALLEL_SERVER_PORT=7592" in joined
    assert "-mca plm_rsh_num_concurrent 2" in joined
    assert argv[-7:-5] == ["smddprun", PY]


def test_tf_config_parameter_server() -> None:
    hosts = ["algo-1", "algo-2", "algo-3"]
    assert tf_config.build_tf_config_ps(hosts, "algo-1") == {
        "cluster": {
            "master": ["algo-1:2222"],
            "ps": ["algo-1:2223", "algo-2:2223", "algo-3:2223"],
            "worker": ["algo-2:2222", "algo-3:2222"],
        },
        "environment": "cloud",
        "task": {"index": 0, "type": "master"},
    }
    assert tf_config.build_tf_config_ps(hosts, "algo-3")["task"] == {"index": 1, "type": "worker"}
    assert tf_config.build_tf_config_ps(hosts, "algo-2", ps_task=True)["task"] == {
        "index": 1,
        "type": "ps",
    }
    assert tf_config.build_tf_config_ps(["algo-1"], "algo-1") == {
        "cluster": {"master": ["algo-1:2222"]},
        "environment": "cloud",
        "task": {"index": 0, "type": "master"},
    }
    with pytest.raises(ValueError):
        tf_config.build_tf_config_ps(["algo-1"], "algo-1", ps_task=True)


def test_tf_config_mwms() -> None:
    assert tf_config.build_tf_config_mwms(["algo-1", "algo-2"], "algo-2") == {
        "cluster": {"worker": ["algo-1:8890", "algo-2:8890"]},
        "environment": "cloud",
        "task": {"index": 1, "type": "worker"},
    }


def test_tf_plans_local_ports_and_single_host(tmp_path: Path) -> None:
    ps = build_plan(
        make_ctx(
            tmp_path / "a",
            {"sagemaker_parameter_server_enabled": True},
            host="algo-2",
            settings=LOCAL,
        )
    )
    config = json.loads(ps.processes[0].env["TF_CONFIG"])
    assert config["cluster"] == {
        "master": ["127.0.0.1:29123"],
        "ps": ["127.0.0.1:29124", "127.0.0.1:29126"],
        "worker": ["127.0.0.1:29125"],
    }
    assert config["task"] == {"index": 0, "type": "worker"}
    assert ps.waiter is not None and ps.processes[0].rank == 1
    mwms = build_plan(
        make_ctx(
            tmp_path / "b",
            {"sagemaker_multi_worker_mirrored_strategy_enabled": True},
            settings=LOCAL,
        )
    )
    assert json.loads(mwms.processes[0].env["TF_CONFIG"])["cluster"]["worker"] == [
        "127.0.0.1:29123",
        "127.0.0.1:29124",
    ]
    single = build_plan(
        make_ctx(tmp_path / "c", {"sagemaker_parameter_server_enabled": True}, hosts=1)
    )
    assert "TF_CONFIG" not in single.processes[0].env


def test_plain_plans(tmp_path: Path) -> None:
    one = build_plan(make_ctx(tmp_path / "a", {"b": 1}, hosts=1))
    assert one.processes[0].argv == [
        PY,
        "-m",
        "launchbay.runtime._bootstrap",
        "train.py",
        "-b",
        "1",
    ]
    assert not one.label_ranks and one.host_ranks == {0: 0}
    two = build_plan(make_ctx(tmp_path / "b", {}, host="algo-2"))
    assert two.label_ranks and two.processes[0].rank == 1
    shell = build_plan(
        make_ctx(tmp_path / "c", {"x y": "a'b"}, hosts=1, entry=EntryPoint("run.sh", "command"))
    )
    assert shell.processes[0].argv == ["/bin/sh", "-c", "./run.sh '--x y' 'a'\"'\"'b'"]
