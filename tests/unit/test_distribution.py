"""distribution dicts: typed parsing, SDK v2's hyperparameters, and errors that name key and value."""

from __future__ import annotations

import json

import pytest

from launchbay.distribution import Distribution, parse_distribution
from launchbay.errors import DistributionError
from launchbay.inputs import InstanceGroup

PT = {"framework": "pytorch", "framework_version": "2.3.0", "py_version": "py311"}
TF = {"framework": "tensorflow", "framework_version": "2.14", "py_version": "py310"}


def hps(distribution, instance_type="ml.p4d.24xlarge", **kw):
    args = {**PT, **kw}
    return parse_distribution(
        distribution, instance_type=instance_type, **args
    ).to_hyperparameters()


def test_empty_distribution_sends_nothing():
    assert hps({}) == {}
    assert parse_distribution(None, framework="pytorch").is_empty


def test_mpi_keys():
    assert hps({"mpi": {"enabled": True}}, instance_type="ml.m5.xlarge") == {
        "sagemaker_mpi_enabled": True,
        "sagemaker_mpi_custom_mpi_options": "",
    }
    assert hps(
        {"mpi": {"enabled": True, "processes_per_host": 4, "custom_mpi_options": "-x NCCL_DEBUG"}},
        instance_type="ml.m5.xlarge",
    ) == {
        "sagemaker_mpi_enabled": True,
        "sagemaker_mpi_num_of_processes_per_host": 4,
        "sagemaker_mpi_custom_mpi_options": "-x NCCL_DEBUG",
    }


def test_torch_distributed_keys_and_processes_per_host_extension():
    assert hps({"torch_distributed": {"enabled": True}}) == {
        "sagemaker_torch_distributed_enabled": True,
        "sagemaker_instance_type": "ml.p4d.24xlarge",
    }
    got = hps(
        {"torch_distributed": {"enabled": True, "processes_per_host": 2}},
        instance_type="local_process",
    )
    assert got == {
        "sagemaker_torch_distributed_enabled": True,
        "sagemaker_instance_type": "local_process",
        "sagemaker_mpi_num_of_processes_per_host": 2,
    }


def test_smdistributed_dataparallel_and_pytorchddp_alias():
    expected = {
        "sagemaker_distributed_dataparallel_enabled": True,
        "sagemaker_instance_type": "ml.p4d.24xlarge",
        "sagemaker_distributed_dataparallel_custom_mpi_options": "",
    }
    v = {"framework_version": "2.2.0", "py_version": "py310"}
    assert hps({"smdistributed": {"dataparallel": {"enabled": True}}}, **v) == expected
    assert hps({"pytorchddp": {"enabled": True}}, **v) == expected


def test_modelparallel_sends_mp_parameters():
    got = hps(
        {
            "smdistributed": {"modelparallel": {"enabled": True, "parameters": {"partitions": 2}}},
            "mpi": {"enabled": True, "processes_per_host": 8},
        }
    )
    assert got["mp_parameters"] == {"partitions": 2}
    assert got["sagemaker_distributed_dataparallel_enabled"] is False
    assert got["sagemaker_mpi_enabled"] is True


def test_modelparallel_parameters_from_a_json_file(tmp_path):
    path = tmp_path / "mp.json"
    path.write_text(json.dumps({"partitions": 4, "microbatches": 2}))
    got = hps({"smdistributed": {"modelparallel": {"enabled": True, "parameters": str(path)}}})
    assert got["mp_parameters"] == {"partitions": 4, "microbatches": 2}


def test_tensorflow_strategies():
    assert hps({"parameter_server": {"enabled": True}}, instance_type="ml.c5.xlarge", **TF) == {
        "sagemaker_parameter_server_enabled": True
    }
    assert hps(
        {"multi_worker_mirrored_strategy": {"enabled": True}}, instance_type="ml.c5.xlarge", **TF
    ) == {"sagemaker_multi_worker_mirrored_strategy_enabled": True}


def test_launcher_names():
    def launcher(d, **kw):
        return parse_distribution(d, instance_type="local_process", **{**PT, **kw}).launcher

    assert launcher({}) == "plain"
    assert launcher({"torch_distributed": {"enabled": True}}) == "torchrun"
    assert launcher({"mpi": {"enabled": True}}) == "mpi"
    assert launcher({"pytorchddp": {"enabled": True}}) == "smddp"
    assert launcher({"parameter_server": {"enabled": True}}, **TF) == "parameter_server"
    assert isinstance(parse_distribution({}, framework=None), Distribution)


def test_instance_groups_name_the_training_group():
    groups = [
        InstanceGroup("train", "ml.p4d.24xlarge", 2),
        InstanceGroup("data", "ml.c5.xlarge", 1),
    ]
    got = parse_distribution(
        {"mpi": {"enabled": True}, "instance_groups": [groups[0]]},
        framework="pytorch",
        framework_version="2.3.0",
        py_version="py311",
        instance_groups=groups,
    ).to_hyperparameters()
    assert got["sagemaker_distribution_instance_groups"] == ["train"]


@pytest.mark.parametrize(
    ("distribution", "kwargs", "fragments"),
    [
        ("mpi", {}, ["distribution='mpi'", "expected a dict"]),
        ({"mpii": {"enabled": True}}, {}, ["'mpii'", "Did you mean 'mpi'"]),
        (
            {"mpi": {"enabled": "yes"}},
            {},
            ["distribution['mpi']['enabled']='yes'", "True or False"],
        ),
        (
            {"mpi": {"enabled": True, "processes_per_host": "8"}},
            {},
            ["['processes_per_host']='8'", "positive integer"],
        ),
        ({"mpi": {"enabled": True, "processes_per_host": -1}}, {}, ["=-1", "positive integer"]),
        ({"mpi": {"enabled": True, "processes_per_host": 0}}, {}, ["=0", "positive integer"]),
        (
            {"mpi": {"enabled": True, "custom_mpi_options": 3}},
            {},
            ["custom_mpi_options']=3", "string"],
        ),
        ({"mpi": {"enabled": True, "processes": 2}}, {}, ["'processes'", "Accepted keys"]),
        (
            {"mpi": {"enabled": True}, "torch_distributed": {"enabled": True}},
            {},
            ["both 'mpi' and 'torch_distributed'"],
        ),
        (
            {
                "smdistributed": {
                    "dataparallel": {"enabled": True},
                    "modelparallel": {"enabled": True},
                }
            },
            {},
            ["one smdistributed strategy"],
        ),
        ({"smdistributed": {"pipeline": {}}}, {}, ["'pipeline'", "Accepted keys"]),
        (
            {"pytorchddp": {"enabled": True}, "smdistributed": {"dataparallel": {"enabled": True}}},
            {},
            ["both 'pytorchddp' and 'smdistributed'"],
        ),
        (
            {"smdistributed": {"dataparallel": {"enabled": True}}},
            {"framework_version": "2.8.0"},
            ["framework_version='2.8.0'", "2.2.0"],
        ),
        (
            {"smdistributed": {"dataparallel": {"enabled": True}}},
            {"framework_version": "2.2.0", "py_version": "py2"},
            ["py_version='py2'"],
        ),
        (
            {"torch_distributed": {"enabled": True}},
            {"instance_type": "ml.m5.xlarge"},
            ["instance_type='ml.m5.xlarge'", "GPU"],
        ),
        (
            {"torch_distributed": {"enabled": True}},
            {"framework_version": "1.5.0"},
            ["framework_version='1.5.0'", "2.8.0"],
        ),
        (
            {"torch_distributed": {"enabled": True}},
            {"entry_point": "run.sh"},
            ["entry_point='run.sh'", ".py"],
        ),
        ({"torch_distributed": {"enabled": True}}, TF, ["PyTorch-only"]),
        (
            {"mpi": {"enabled": True}},
            {"instance_type": "ml.trn1.32xlarge"},
            ["Trainium", "['torch_distributed']"],
        ),
        ({"multi_worker_mirrored_strategy": {"enabled": True}}, {}, ["TensorFlow-only"]),
        (
            {"multi_worker_mirrored_strategy": {"enabled": True}},
            {**TF, "framework_version": "2.8"},
            ["framework_version='2.8'", "2.9"],
        ),
        (
            {
                "multi_worker_mirrored_strategy": {"enabled": True},
                "parameter_server": {"enabled": True},
            },
            TF,
            ["cannot be combined", "parameter_server"],
        ),
        (
            {"smdistributed": {"dataparallel": {"enabled": True}}},
            {"instance_type": "ml.p5.48xlarge", "framework_version": "2.2.0"},
            ["p5", "torch_distributed"],
        ),
        (
            {
                "smdistributed": {
                    "modelparallel": {"enabled": True, "parameters": {"partitions": 0}}
                }
            },
            {},
            ["['partitions']=0", "positive integer"],
        ),
        (
            {
                "smdistributed": {
                    "modelparallel": {"enabled": True, "parameters": {"pipeline": "fast"}}
                }
            },
            {},
            ["'fast'", "interleaved"],
        ),
        (
            {"smdistributed": {"modelparallel": {"enabled": True, "parameters": "/no/such.json"}}},
            {},
            ["'/no/such.json'", "existing JSON file"],
        ),
        ({"pytorchxla": {"enabled": True}}, {}, ["pytorchxla", "Training Compiler"]),
        ({"pytorchddp": {"enabled": True}}, TF, ["PyTorch strategy"]),
        (
            {"instance_groups": ["x"], "mpi": {"enabled": True}},
            {},
            ["instance_groups", "no instance_groups"],
        ),
    ],
)
def test_errors_name_key_value_and_accepted(distribution, kwargs, fragments):
    args = {**PT, "instance_type": "ml.p4d.24xlarge", **kwargs}
    with pytest.raises(DistributionError) as info:
        parse_distribution(distribution, **args)
    assert isinstance(info.value, ValueError)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


def test_local_instance_types_accept_torch_distributed_and_smdistributed_on_cpu():
    for itype in ("local", "local_gpu", "local_process"):
        parse_distribution({"torch_distributed": {"enabled": True}}, instance_type=itype, **PT)
        parse_distribution(
            {"smdistributed": {"dataparallel": {"enabled": True, "processes_per_host": 2}}},
            instance_type=itype,
            **PT,
        )


def test_short_framework_version_resolves_for_torch_distributed():
    # SDK v2 rejects "2.3" here although its image resolves "2.3" to 2.3.0.
    parse_distribution(
        {"torch_distributed": {"enabled": True}},
        framework="pytorch",
        framework_version="2.3",
        py_version="py311",
        instance_type="ml.p4d.24xlarge",
    )


def test_custom_image_skips_version_rules():
    parse_distribution(
        {"torch_distributed": {"enabled": True}},
        framework="pytorch",
        framework_version=None,
        py_version=None,
        image_uri="my/image:1",
        instance_type="ml.g5.xlarge",
    )
