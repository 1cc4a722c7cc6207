"""The contract writer (local backends) and readers (runtime): a round trip through the files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launchbay.runtime import contract

REQUEST = {
    "TrainingJobName": "job",
    "HyperParameters": {
        "sagemaker_program": '"train.py"',
        "lr": "0.1",
        "name": '"abc"',
        "raw": "x",
    },
    "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
    "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
    "InputDataConfig": [
        {
            "ChannelName": "train",
            "ContentType": "text/csv",
            "DataSource": {
                "S3DataSource": {
                    "S3DataType": "S3Prefix",
                    "S3Uri": "s3://b/train",
                    "S3DataDistributionType": "ShardedByS3Key",
                }
            },
        },
        {
            "ChannelName": "test",
            "InputMode": "FastFile",
            "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "file:///data"}},
        },
    ],
    "DebugHookConfig": {
        "S3OutputPath": "s3://b/debug",
        "HookParameters": {"save_interval": "10", "include_workers": "all"},
        "CollectionConfigurations": [
            {"CollectionName": "losses", "CollectionParameters": {"save_interval": "5"}}
        ],
    },
    "CheckpointConfig": {"S3Uri": "s3://b/ckpt", "LocalPath": "/opt/ml/checkpoints/run"},
}


def _read(path: Path) -> object:
    return json.loads(path.read_text())


def test_round_trip(tmp_path: Path) -> None:
    base = tmp_path / "algo-2"
    contract.write_host_config(str(base), REQUEST, "algo-2", ["algo-1", "algo-2"])
    config = base / "input" / "config"

    assert _read(config / "hyperparameters.json") == REQUEST["HyperParameters"]
    assert _read(config / "resourceconfig.json") == {
        "current_host": "algo-2",
        "current_instance_type": "ml.m5.xlarge",
        "current_group_name": "homogeneousCluster",
        "hosts": ["algo-1", "algo-2"],
        "instance_groups": [
            {
                "instance_group_name": "homogeneousCluster",
                "instance_type": "ml.m5.xlarge",
                "hosts": ["algo-1", "algo-2"],
            }
        ],
        "network_interface_name": "eth0",
    }
    assert _read(config / "inputdataconfig.json") == {
        "train": {
            "ContentType": "text/csv",
            "TrainingInputMode": "File",
            "S3DistributionType": "ShardedByS3Key",
            "RecordWrapperType": "None",
        },
        "test": {
            "TrainingInputMode": "FastFile",
            "S3DistributionType": "FullyReplicated",
            "RecordWrapperType": "None",
        },
    }
    # Container paths land under the base dir.
    hook = _read(config / "debughookconfig.json")
    assert hook["LocalPath"] == str(base / "output" / "tensors")
    assert hook["HookParameters"] == {"save_interval": "10", "include_workers": "all"}
    assert hook["CollectionConfigurations"][0]["CollectionName"] == "losses"
    assert hook["S3OutputPath"] == "s3://b/debug"
    assert _read(config / "checkpointconfig.json") == {
        "LocalPath": str(base / "checkpoints" / "run"),
        "S3Uri": "s3://b/ckpt",
    }
    for d in ("model", "output/data", "output/intermediate", "input/data", "checkpoints/run"):
        assert (base / d).is_dir(), d

    # Reader side.
    p = contract.paths(str(base))
    assert contract.read_hyperparameters(p) == {
        "sagemaker_program": "train.py",
        "lr": 0.1,
        "name": "abc",
        "raw": "x",
    }
    env = contract.training_env(str(base), {}, num_gpus=0, num_cpus=4, num_neurons=0)
    assert env.current_host == "algo-2" and not env.is_master
    assert env.hyperparameters == {"lr": 0.1, "name": "abc", "raw": "x"}
    assert env.checkpoint_dir == str(base / "checkpoints" / "run")
    assert env.debug_hook_config["LocalPath"] == str(base / "output" / "tensors")
    assert env.channel_input_dirs == {
        "train": str(base / "input" / "data" / "train"),
        "test": str(base / "input" / "data" / "test"),
    }
    variables = contract.env_vars(env)
    assert variables["SM_CHECKPOINT_DIR"] == str(base / "checkpoints" / "run")
    assert variables["SM_NUM_CPUS"] == "4"
    assert variables["SM_USER_ARGS"] == json.dumps(
        ["--lr", "0.1", "--name", "abc", "--raw", "x"], separators=(",", ":")
    )


def test_rewriting_is_idempotent_and_optional_files_are_removed(tmp_path: Path) -> None:
    base = tmp_path / "algo-1"
    contract.write_host_config(str(base), REQUEST, "algo-1", ["algo-1", "algo-2"])
    plain = {k: v for k, v in REQUEST.items() if k not in ("DebugHookConfig", "CheckpointConfig")}
    contract.write_host_config(str(base), plain, "algo-1", ["algo-1", "algo-2"])
    config = base / "input" / "config"
    assert not (config / "debughookconfig.json").exists()
    assert not (config / "checkpointconfig.json").exists()
    env = contract.training_env(str(base), {}, num_gpus=0, num_cpus=1, num_neurons=0)
    assert env.checkpoint_dir is None and "SM_CHECKPOINT_DIR" not in contract.env_vars(env)


def test_instance_groups_get_hosts_in_order(tmp_path: Path) -> None:
    request = {
        "ResourceConfig": {
            "InstanceGroups": [
                {"InstanceGroupName": "cpu", "InstanceType": "ml.c5.xlarge", "InstanceCount": 1},
                {"InstanceGroupName": "gpu", "InstanceType": "ml.g5.xlarge", "InstanceCount": 2},
            ]
        }
    }
    hosts = ["algo-1", "algo-2", "algo-3"]
    config = contract.resource_config_for(request, "algo-3", hosts)
    assert config["current_group_name"] == "gpu"
    assert config["current_instance_type"] == "ml.g5.xlarge"
    assert [g["hosts"] for g in config["instance_groups"]] == [["algo-1"], ["algo-2", "algo-3"]]
    with pytest.raises(ValueError, match="InstanceGroups count 3"):
        contract.resource_config_for(request, "algo-1", ["algo-1"])
    with pytest.raises(ValueError, match="current_host"):
        contract.resource_config_for(request, "algo-9", hosts)


def test_paths_and_container_path_rewriting() -> None:
    p = contract.paths("/tmp/job/algo-1/")
    assert p.base_dir == "/tmp/job/algo-1"
    assert p.failure_file == "/tmp/job/algo-1/output/failure"
    assert p.channel_dir("train") == "/tmp/job/algo-1/input/data/train"
    assert p.container_path("/opt/ml/input/data/code/sourcedir.tar.gz") == (
        "/tmp/job/algo-1/input/data/code/sourcedir.tar.gz"
    )
    assert p.container_path("/opt/mlx/keep") == "/opt/mlx/keep"
    assert p.container_path("/data/x") == "/data/x"
    assert contract.paths("/opt/ml").container_path("/opt/ml/model") == "/opt/ml/model"
    assert contract.base_dir({}) == "/opt/ml"
    assert contract.base_dir({"SAGEMAKER_BASE_DIR": "/x"}) == "/x"


@pytest.mark.parametrize(
    ("hps", "expected"),
    [
        ({"bb": 1, "aa": "x", "c": 2}, ["--aa", "x", "--bb", "1", "-c", "2"]),
        ({"k": True, "n": None}, ["-k", "True", "-n", ""]),
        ({"dict": {"z": 1, "a": [1, 2]}}, ["--dict", "a=[1, 2],z=1"]),
        ({"list": [1, "a"]}, ["--list", "[1, 'a']"]),
    ],
)
def test_user_args_format(hps: dict, expected: list[str]) -> None:
    assert contract.to_cmd_args(hps) == expected


def test_env_value_format() -> None:
    assert contract.to_env_value("a b") == "a b"
    assert contract.to_env_value(None) == ""
    assert contract.to_env_value({"b": [1, 2], "a": True}) == '{"a":true,"b":[1,2]}'
    assert contract.to_env_value(0.5) == "0.5"


def test_processes_per_host(tmp_path: Path) -> None:
    base = tmp_path / "ml"
    contract.write_host_config(
        str(base), {"ResourceConfig": {"InstanceType": "x"}}, "algo-1", ["algo-1"]
    )
    assert (
        contract.training_env(
            str(base), {}, num_gpus=0, num_cpus=2, num_neurons=0
        ).processes_per_host()
        == 1
    )
    assert (
        contract.training_env(
            str(base), {}, num_gpus=8, num_cpus=2, num_neurons=0
        ).processes_per_host()
        == 8
    )
    request = {
        "ResourceConfig": {"InstanceType": "x"},
        "HyperParameters": {"sagemaker_mpi_num_of_processes_per_host": "3"},
    }
    contract.write_host_config(str(base), request, "algo-1", ["algo-1"])
    assert (
        contract.training_env(
            str(base), {}, num_gpus=8, num_cpus=2, num_neurons=0
        ).processes_per_host()
        == 3
    )


def test_configs_for_a_container_name_container_paths(tmp_path: Path) -> None:
    request = dict(REQUEST, CheckpointConfig={"S3Uri": "s3://b/ckpt", "LocalPath": "/ckpt"})
    base = tmp_path / "algo-1"
    contract.write_host_config(
        str(base), request, "algo-1", ["algo-1", "algo-2"], container_base="/opt/ml"
    )
    config = base / "input" / "config"
    checkpoint = json.loads((config / "checkpointconfig.json").read_text())
    assert checkpoint == {"LocalPath": "/ckpt", "S3Uri": "s3://b/ckpt"}
    hook = json.loads((config / "debughookconfig.json").read_text())
    assert hook["LocalPath"] == "/opt/ml/output/tensors"
    # The host side of the mount exists; nothing is made at the container's own path.
    assert (base / "checkpoints").is_dir()
    assert not Path("/ckpt").exists()
