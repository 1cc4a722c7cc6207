"""distribution dicts: typed parsing, SDK v2's hyperparameters, and errors that name key and value."""

from __future__ import annotations

import dataclasses
import json
import warnings
from types import MappingProxyType

import jsonschema
import pytest

from fresh_interpreter import loaded_after
from launchbay import _attach
from launchbay import distribution as d
from launchbay.distribution import (
    Distribution,
    distribution_from_hyperparameters,
    parse_distribution,
    schema,
    schema_defs,
)
from launchbay.errors import DistributionError
from launchbay.inputs import InstanceGroup
from launchbay.runtime import names

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


def test_each_launcher_is_asked_for_by_its_hyperparameter():
    """The runtime picks the launcher from these keys (runtime/launchers); the client only sends them."""

    def enabled(d, **kw):
        got = parse_distribution(d, instance_type="local_process", **{**PT, **kw})
        return sorted(
            k for k, v in got.to_hyperparameters().items() if k.endswith("_enabled") and v
        )

    assert enabled({}) == []
    assert enabled({"torch_distributed": {"enabled": True}}) == [
        "sagemaker_torch_distributed_enabled"
    ]
    assert enabled({"mpi": {"enabled": True}}) == ["sagemaker_mpi_enabled"]
    assert enabled({"pytorchddp": {"enabled": True}}) == [
        "sagemaker_distributed_dataparallel_enabled"
    ]
    assert enabled({"parameter_server": {"enabled": True}}, **TF) == [
        "sagemaker_parameter_server_enabled"
    ]
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


# -- the schema ---------------------------------------------------------------------------------


def test_schema_is_valid_2020_12_with_descriptions_and_cached():
    doc = d.schema()
    jsonschema.Draft202012Validator.check_schema(doc)
    assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert d.schema() is doc
    assert doc["description"]
    for name, node in doc["$defs"].items():
        assert name.startswith("distribution."), name
        assert node.get("description"), name
    assert list(doc["properties"]) == [
        "mpi", "smdistributed", "torch_distributed", "pytorchddp", "parameter_server",
        "multi_worker_mirrored_strategy", "instance_groups",
    ]  # fmt: skip


def test_schema_section_keys_are_the_config_fields():
    """parse_distribution builds each config from its checked section by keyword."""
    defs = d.schema()["$defs"]
    for section, config in [
        ("distribution.mpi", d.MPIConfig),
        ("distribution.dataparallel", d.SMDataParallelConfig),
        ("distribution.modelparallel", d.SMModelParallelConfig),
        ("distribution.torch_distributed", d.TorchDistributedConfig),
        ("distribution.parameter_server", d.ParameterServerConfig),
        ("distribution.multi_worker_mirrored_strategy", d.MultiWorkerMirroredStrategyConfig),
    ]:
        fields = {f.name for f in dataclasses.fields(config)}
        assert set(defs[section]["properties"]) == fields, section


def test_schema_accepts_what_parse_distribution_accepts_as_plain_data():
    """The schema alone (as a job spec would use it) accepts each form and refuses bad types."""
    validator = jsonschema.Draft202012Validator(schema())
    for good in [
        {"mpi": {"enabled": True, "processes_per_host": 8, "custom_mpi_options": "-x A"}},
        {"mpi": {"enabled": True, "processes_per_host": None}},
        {"smdistributed": {"dataparallel": {"enabled": True, "processes_per_host": 2}}},
        {"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"partitions": 2}}}},
        {"smdistributed": {"modelparallel": {"enabled": True, "parameters": "mp.json"}}},
        {"smdistributed": {"modelparallel": {"enabled": False, "parameters": [1]}}},
        {"torch_distributed": {"enabled": True, "processes_per_host": 2}},
        {"pytorchddp": {"enabled": True, "custom_mpi_options": "-v"}},
        {"parameter_server": {"enabled": True}},
        {"multi_worker_mirrored_strategy": {"enabled": True}},
        {"instance_groups": ["train"], "mpi": {"enabled": True}},
    ]:
        assert not list(validator.iter_errors(good)), good
    for bad in [
        [],
        {"mpii": {}},
        {"mpi": {"enabled": "yes"}},
        {"mpi": {"processes_per_host": 0}},
        {"torch_distributed": {"enabled": True, "nproc": 2}},
        {"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"pipeline": "x"}}}},
        {"instance_groups": "train"},
    ]:
        assert list(validator.iter_errors(bad)), bad


def test_schema_defs_embed_in_another_schema():
    """How the job-spec schema references it: merge schema_defs() into its root $defs."""
    host = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"distribution": {"$ref": "#/$defs/distribution"}},
        "$defs": {"channel": {"type": "string"}, **schema_defs()},
    }
    jsonschema.Draft202012Validator.check_schema(host)
    validator = jsonschema.Draft202012Validator(host)
    good = {"mpi": {"enabled": True, "processes_per_host": 2}, "instance_groups": ["train"]}
    assert not list(validator.iter_errors({"distribution": good}))
    bad = {"mpi": {"enabled": "yes"}, "pytorchddp": {"enabeld": True}}
    errors = {
        (tuple(e.absolute_path), e.validator) for e in validator.iter_errors({"distribution": bad})
    }
    assert errors == {
        (("distribution", "mpi", "enabled"), "type"),
        (("distribution", "pytorchddp"), "additionalProperties"),
    }
    assert schema_defs() is not schema_defs()


def test_import_launchbay_does_not_import_jsonschema():
    code = (
        "import launchbay, launchbay.distribution; from launchbay.pytorch import PyTorch; "
        "launchbay.distribution.parse_distribution({}, framework='pytorch')"
    )
    assert "jsonschema" not in loaded_after(code, "m == 'jsonschema'")


@pytest.mark.parametrize(
    ("distribution", "fragments"),
    [
        # Python's types, not JSON's: 2.0 is not a count, NaN and True are not weights.
        ({"mpi": {"enabled": True, "processes_per_host": 2.0}}, ["=2.0", "positive integer"]),
        (
            {"torch_distributed": {"enabled": True, "process_per_host": 2}},
            ["'process_per_host'", "Did you mean 'processes_per_host'?", "Accepted keys"],
        ),
        (
            {"pytorchddp": {"enabled": 1}},
            ["distribution['pytorchddp']['enabled']=1", "True or False"],
        ),
        (
            {"smdistributed": {"modelparallel": {"enabled": True, "parameters": [2]}}},
            ["['parameters']=[2]", "a dict or the path of an existing JSON file"],
        ),
        (
            {
                "smdistributed": {
                    "modelparallel": {"enabled": True, "parameters": {"memory_weight": True}}
                }
            },
            ["['memory_weight']=True", "between 0.0 and 1.0"],
        ),
        (
            {
                "smdistributed": {
                    "modelparallel": {
                        "enabled": True,
                        "parameters": {"memory_weight": float("nan")},
                    }
                }
            },
            ["['memory_weight']=nan", "between 0.0 and 1.0"],
        ),
        (
            {
                "smdistributed": {
                    "modelparallel": {"enabled": True, "parameters": {"ddp": True, "ddp_port": -1}}
                }
            },
            ["['ddp_port']=-1", "non-negative integer"],
        ),
        (
            {
                "smdistributed": {
                    "modelparallel": {
                        "enabled": True,
                        "parameters": {"partitions": 2, "default_partition": 2},
                    }
                }
            },
            ["['default_partition']=2", "below 'partitions'"],
        ),
        (
            {"instance_groups": [7], "mpi": {"enabled": True}},
            ["distribution['instance_groups'][0]=7", "InstanceGroup object or a group name"],
        ),
        (
            {"instance_groups": "train", "mpi": {"enabled": True}},
            ["distribution['instance_groups']='train'", "list of InstanceGroup objects"],
        ),
    ],
)
def test_schema_errors_name_key_value_and_accepted(distribution, fragments):
    with pytest.raises(DistributionError) as info:
        parse_distribution(distribution, instance_type="ml.p4d.24xlarge", **PT)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


def test_error_carries_argument_path_and_given_value():
    with pytest.raises(DistributionError) as info:
        parse_distribution({"mpi": {"enabled": True, "processes_per_host": "8"}}, **PT)
    assert info.value.argument == "distribution['mpi']['processes_per_host']"
    assert info.value.value == "8"
    with pytest.raises(DistributionError) as info:
        parse_distribution({"mpi": {"enabeld": True}}, **PT)
    assert info.value.argument == "distribution['mpi']['enabeld']"
    assert "Did you mean 'enabled'?" in str(info.value)


def test_processes_per_host_none_is_the_default_and_disabled_modelparallel_is_not_checked():
    got = hps({"mpi": {"enabled": True, "processes_per_host": None}}, instance_type="ml.m5.xlarge")
    assert "sagemaker_mpi_num_of_processes_per_host" not in got
    # SDK v2 reads modelparallel parameters only when it is enabled; so does launchbay.
    off = {"smdistributed": {"modelparallel": {"enabled": False, "parameters": "/no/such.json"}}}
    assert (
        parse_distribution(off, instance_type="ml.p4d.24xlarge", **PT).modelparallel.parameters
        == {}
    )


def test_modelparallel_parameters_file_is_checked_like_a_dict(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"partitions": 0}))
    listed = tmp_path / "list.json"
    listed.write_text("[1]")
    broken = tmp_path / "broken.json"
    broken.write_text("{")

    def error(path):
        d = {"smdistributed": {"modelparallel": {"enabled": True, "parameters": str(path)}}}
        with pytest.raises(DistributionError) as info:
            parse_distribution(d, instance_type="ml.p4d.24xlarge", **PT)
        return str(info.value)

    got = error(bad)
    assert "['parameters']['partitions']=0" in got and "positive integer" in got
    assert "must hold an object" in error(listed)
    assert "not readable JSON" in error(broken)


def test_mapping_and_tuple_values_are_accepted_as_dicts_and_lists():
    groups = [InstanceGroup("train", "ml.p4d.24xlarge", 2)]
    got = parse_distribution(
        MappingProxyType(
            {"mpi": MappingProxyType({"enabled": True}), "instance_groups": ("train",)}
        ),
        instance_groups=groups,
        **PT,
    )
    assert got.instance_groups == ("train",) and got.mpi.enabled


# -- names and the reverse mapping ---------------------------------------------------------------


def test_shared_names_and_reexports():
    assert d.LOCAL_INSTANCE_TYPES is names.LOCAL_INSTANCE_TYPES
    assert _attach.distribution_from_hyperparameters is d.distribution_from_hyperparameters


def _as_attach_gives(distribution):
    """What attach has given back for the compat forms (checked against _attach's own
    reverse before it moved here): pytorchddp as smdistributed dataparallel, groups by name."""
    out = {}
    for key, value in distribution.items():
        if key == "pytorchddp":
            out["smdistributed"] = {"dataparallel": dict(value)}
        elif key == "instance_groups":
            out[key] = [group[1]["instance_group_name"] for group in value]
        else:
            out[key] = value
    return out


def test_hyperparameters_round_trip_for_every_compat_form(tmp_path, monkeypatch):
    """Each compat case's distribution: sent, then read back as attach does, gives the dict
    attach gives, and that dict sends the same hyperparameters again."""
    monkeypatch.setenv("SAGEMAKER_SUPPRESS_V2_WARNING", "1")  # cases.py reads v2's config
    from compat import harness  # tests/ is on sys.path (its conftest.py is in no package)
    from compat.cases import CASES

    (tmp_path / "lib").mkdir()
    (tmp_path / "train.py").write_text("")
    tree = harness.SourceTree(tmp_path, tmp_path / "lib")
    checked = []
    for case in CASES:
        given = case.kwargs.get("distribution", case.kwargs.get("distributions"))
        if not isinstance(given, dict):
            continue
        classes = harness._ours_classes({case.estimator} | harness.class_names(case.kwargs))
        kwargs = harness.build({"role": harness.ROLE, **case.kwargs}, classes, tree)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            est = classes[case.estimator](**kwargs)
        config = est.distribution_config
        sent = {k: json.loads(json.dumps(v)) for k, v in config.to_hyperparameters().items()}
        back = distribution_from_hyperparameters(sent)
        assert back == _as_attach_gives(given), case.id
        again = parse_distribution(
            back,
            framework=config.framework,
            # HuggingFace checks its distribution against its base framework's version.
            framework_version=getattr(est, "base_framework_version", None)
            or kwargs.get("framework_version"),
            py_version=kwargs.get("py_version"),
            image_uri=kwargs.get("image_uri"),
            instance_type=config.instance_type,
            entry_point="train.py",
            instance_groups=kwargs.get("instance_groups"),
        )
        assert again.to_hyperparameters() == config.to_hyperparameters(), case.id
        checked.append(case.id)
    assert len(checked) >= 20, checked


@pytest.mark.parametrize(
    ("distribution", "framework"),
    [
        (
            {
                "torch_distributed": {"enabled": True},
                "smdistributed": {"modelparallel": {"enabled": True, "parameters": {}}},
            },
            PT,
        ),
        ({"mpi": {"enabled": True, "processes_per_host": 2, "custom_mpi_options": "-v"}}, TF),
        ({"torch_distributed": {"enabled": True, "processes_per_host": 2}}, PT),
        ({"smdistributed": {"dataparallel": {"enabled": True, "processes_per_host": 2}}}, PT),
        ({"mpi": {"enabled": False}}, PT),
    ],
)
def test_hyperparameters_round_trip_for_the_parity_forms(distribution, framework):
    sent = parse_distribution(distribution, instance_type="local_process", **framework)
    back = distribution_from_hyperparameters(json.loads(json.dumps(sent.to_hyperparameters())))
    assert back == distribution


def test_no_distribution_hyperparameters_give_no_distribution():
    assert distribution_from_hyperparameters({"sagemaker_program": "train.py", "lr": 1}) is None
