"""Our SM_* environment against the real sagemaker-training toolkit, config dir by config dir.

For each config directory, the toolkit's ``Environment().to_env_vars()`` runs in
a subprocess (its import creates directories and reads the base dir once) with
``SAGEMAKER_BASE_DIR`` pointing at it; ours is built from the same directory and
the same environment. Every key the toolkit exports must exist in ours with the
same value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from launchbay.runtime import contract

TOOLKIT_SNIPPET = (
    "import json, logging; logging.disable(logging.CRITICAL); "
    "from sagemaker_training import environment; "
    "print('@@' + json.dumps(environment.Environment().to_env_vars()))"
)

HPS_EVERY_TYPE = {
    "int": "8",
    "float": "0.25",
    "neg": "-3",
    "true": "true",
    "false": "false",
    "none": "null",
    "text": json.dumps("abc"),
    "spaced": json.dumps("a b  c"),
    "unicode": json.dumps("héllo ✓"),
    "list": json.dumps([1, "two", [3.5, None]]),
    "dict": json.dumps({"b": 2, "a": {"x": [1, 2]}, "c": "s"}),
    "empty": json.dumps(""),
    "undecodable": "not json {",
    "bare": "abc",
    "learning-rate": "0.1",
    "x": "1",
    "Mixed_Case": json.dumps("M"),
}

SCRIPT_MODE = {
    "sagemaker_program": json.dumps("train.py"),
    "sagemaker_submit_directory": json.dumps("s3://bucket/prefix/sourcedir.tar.gz"),
    "sagemaker_container_log_level": "10",
    "sagemaker_job_name": json.dumps("job-1"),
    "sagemaker_region": json.dumps("us-west-2"),
    "_tuning_objective_metric": json.dumps("loss"),
}


def _resource(current: str, hosts: list[str], **extra: object) -> dict:
    config = {
        "current_host": current,
        "current_instance_type": "ml.m5.xlarge",
        "current_group_name": "homogeneousCluster",
        "hosts": hosts,
        "instance_groups": [
            {
                "instance_group_name": "homogeneousCluster",
                "instance_type": "ml.m5.xlarge",
                "hosts": hosts,
            }
        ],
        "network_interface_name": "eth0",
    }
    config.update(extra)
    return config


HETERO = {
    "current_host": "algo-3",
    "current_instance_type": "ml.p4d.24xlarge",
    "current_group_name": "gpu",
    "hosts": ["algo-1", "algo-2", "algo-3"],
    "instance_groups": [
        {"instance_group_name": "data", "instance_type": "ml.c5.xlarge", "hosts": ["algo-1"]},
        {
            "instance_group_name": "gpu",
            "instance_type": "ml.p4d.24xlarge",
            "hosts": ["algo-2", "algo-3"],
        },
    ],
    "network_interface_name": "eth0",
}

CHANNELS = {
    "train": {
        "ContentType": "text/csv",
        "TrainingInputMode": "File",
        "S3DistributionType": "FullyReplicated",
        "RecordWrapperType": "None",
    },
    "validation": {
        "TrainingInputMode": "FastFile",
        "S3DistributionType": "ShardedByS3Key",
        "RecordWrapperType": "None",
    },
    "code": {
        "TrainingInputMode": "File",
        "S3DistributionType": "FullyReplicated",
        "RecordWrapperType": "None",
    },
}

# name -> (hyperparameters, resourceconfig, inputdataconfig, extra environment)
CASES: dict[str, tuple[dict, dict, dict, dict]] = {
    "single-host-minimal": ({}, _resource("algo-1", ["algo-1"]), {}, {}),
    "two-hosts-algo-2-every-type": (
        {**SCRIPT_MODE, **HPS_EVERY_TYPE},
        _resource("algo-2", ["algo-1", "algo-2"]),
        CHANNELS,
        {},
    ),
    "mpi-keys": (
        {
            **SCRIPT_MODE,
            "sagemaker_mpi_enabled": "true",
            "sagemaker_mpi_num_of_processes_per_host": "4",
            "sagemaker_mpi_custom_mpi_options": json.dumps("-x FOO=1 --NCCL_DEBUG WARN"),
            "epochs": "3",
        },
        _resource("algo-1", ["algo-1", "algo-2", "algo-3"]),
        CHANNELS,
        {},
    ),
    "torch-distributed-keys": (
        {
            "sagemaker_program": json.dumps("train.py"),
            "sagemaker_torch_distributed_enabled": "true",
            "sagemaker_instance_type": json.dumps("ml.p4d.24xlarge"),
        },
        _resource("algo-2", ["algo-1", "algo-2"]),
        {},
        {},
    ),
    "smddp-and-mp-keys": (
        {
            "sagemaker_program": json.dumps("train.py"),
            "sagemaker_distributed_dataparallel_enabled": "true",
            "sagemaker_distributed_dataparallel_custom_mpi_options": json.dumps(""),
            "sagemaker_instance_type": json.dumps("ml.p4d.24xlarge"),
            "mp_parameters": json.dumps({"partitions": 2, "microbatches": 4}),
        },
        _resource("algo-1", ["algo-1", "algo-2"]),
        {},
        {"SM_HP_MP_PARAMETERS": json.dumps({"partitions": 2})},
    ),
    "parameter-server": (
        {"sagemaker_parameter_server_enabled": "true", "model_dir": json.dumps("s3://b/m")},
        _resource("algo-2", ["algo-1", "algo-2"]),
        {},
        {},
    ),
    "mwms": (
        {"sagemaker_multi_worker_mirrored_strategy_enabled": "true"},
        _resource("algo-1", ["algo-1", "algo-2"]),
        {},
        {},
    ),
    "instance-groups-explicit-distribution": (
        {
            **SCRIPT_MODE,
            "sagemaker_mpi_enabled": "true",
            "sagemaker_distribution_instance_groups": json.dumps(["gpu"]),
        },
        HETERO,
        CHANNELS,
        {},
    ),
    "instance-groups-implicit-distribution": (
        {"sagemaker_torch_distributed_enabled": "true"},
        HETERO,
        {},
        {},
    ),
    "instance-groups-no-distribution": (
        {"a": "1"},
        {**HETERO, "current_host": "algo-1", "current_group_name": "data"},
        {},
        {},
    ),
    "old-resource-config-format": (
        {"sagemaker_program": json.dumps("pkg.module")},
        {"current_host": "algo-1", "hosts": ["algo-1", "algo-2"]},
        {"train": CHANNELS["train"]},
        {},
    ),
    "topology-and-env-overrides": (
        {"sagemaker_program": json.dumps("train.py")},
        _resource(
            "algo-1",
            ["algo-1", "algo-2"],
            topology=[{"hostName": "algo-1", "capacityUnitId": "cu-1"}],
        ),
        {},
        {
            "SAGEMAKER_PROGRAM": "other.py",
            "TRAINING_JOB_NAME": "named-job",
            "SAGEMAKER_TRAINING_MODULE": "sagemaker_pytorch_container.training:main",
            "SM_HP_MP_PARAMETERS": "{}",
        },
    ),
}


def _write(base: Path, hps: dict, resource: dict, channels: dict) -> None:
    config = base / "input" / "config"
    config.mkdir(parents=True)
    (config / "hyperparameters.json").write_text(json.dumps(hps))
    (config / "resourceconfig.json").write_text(json.dumps(resource))
    (config / "inputdataconfig.json").write_text(json.dumps(channels))


def _clean_environ(base: Path, extra: dict) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SM_", "SAGEMAKER_", "TRAINING_JOB"))
        and not k.startswith("LAUNCHBAY_")
    }
    env.update(extra)
    env["SAGEMAKER_BASE_DIR"] = str(base)
    env.setdefault("AWS_DEFAULT_REGION", "us-west-2")
    return env


def toolkit_env_vars(base: Path, environ: dict[str, str]) -> dict[str, str]:
    result = subprocess.run(
        [sys.executable, "-c", TOOLKIT_SNIPPET],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("@@"))
    return json.loads(line[2:])


@pytest.mark.parametrize("name", list(CASES))
def test_env_vars_match_the_toolkit(tmp_path: Path, name: str) -> None:
    hps, resource, channels, extra = CASES[name]
    base = tmp_path / "ml"
    _write(base, hps, resource, channels)
    environ = _clean_environ(base, extra)
    theirs = toolkit_env_vars(base, environ)
    ours = contract.env_vars(contract.training_env(str(base), environ))

    missing = sorted(set(theirs) - set(ours))
    assert not missing, f"keys the toolkit exports that we do not: {missing}"
    different = {k: (theirs[k], ours[k]) for k in theirs if theirs[k] != ours[k]}
    assert not different, json.dumps(different, indent=1)
    extra_keys = set(ours) - set(theirs)
    assert extra_keys <= {"SM_CHECKPOINT_DIR"}, extra_keys


def test_writer_output_reads_the_same_in_the_toolkit(tmp_path: Path) -> None:
    """Files written by write_host_config give the toolkit and us the same environment."""
    request = {
        "HyperParameters": {**SCRIPT_MODE, **HPS_EVERY_TYPE, "sagemaker_mpi_enabled": "true"},
        "ResourceConfig": {
            "InstanceGroups": [
                {"InstanceGroupName": "a", "InstanceType": "ml.c5.xlarge", "InstanceCount": 1},
                {"InstanceGroupName": "b", "InstanceType": "ml.g5.xlarge", "InstanceCount": 2},
            ]
        },
        "AlgorithmSpecification": {"TrainingInputMode": "File"},
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "ContentType": "application/x-npy",
                "DataSource": {
                    "S3DataSource": {
                        "S3DataType": "S3Prefix",
                        "S3Uri": "s3://b/train",
                        "S3DataDistributionType": "ShardedByS3Key",
                    }
                },
            }
        ],
        "CheckpointConfig": {"S3Uri": "s3://b/ckpt"},
    }
    base = tmp_path / "algo-3"
    contract.write_host_config(str(base), request, "algo-3", ["algo-1", "algo-2", "algo-3"])
    environ = _clean_environ(base, {})
    theirs = toolkit_env_vars(base, environ)
    ours = contract.env_vars(contract.training_env(str(base), environ))
    assert {k: ours.get(k) for k in theirs} == theirs
    assert ours["SM_CHECKPOINT_DIR"] == str(base / "checkpoints")
    assert json.loads(ours["SM_INSTANCE_GROUPS"]) == ["a", "b"]
    assert ours["SM_CURRENT_INSTANCE_GROUP"] == "b"
