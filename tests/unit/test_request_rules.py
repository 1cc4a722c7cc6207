"""Defect 6: every argument is checked against what CreateTrainingJob accepts.

The limits come from botocore's service model (schemas/create_training_job.json,
made by tools/gen_request_shapes.py). Each message names the argument, the
value, what is accepted and the request field; the type is always our
ConfigurationError (a ValueError), never a raw TypeError.
"""

from __future__ import annotations

import importlib.util
import pathlib
from pathlib import Path

import pytest

from factories import source_dir
from launchbay import ConfigurationError, Estimator
from launchbay import _request_rules as rules
from launchbay.backends.sagemaker import check_request as sagemaker_check_request
from launchbay.debugger import DebuggerHookConfig
from launchbay.inputs import FileSystemInput
from launchbay.pytorch import PyTorch

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    return source_dir(tmp_path_factory.mktemp("rules"), "print('hi')\n")


def torch(src, **kwargs):
    args = dict(
        entry_point="train.py",
        source_dir=str(src),
        role=ROLE,
        framework_version="2.3",
        py_version="py311",
        instance_type="ml.m5.xlarge",
        instance_count=1,
    )
    args.update(kwargs)
    return PyTorch(**args)


def refused(src, *fragments: str, argument: str | None = None, **kwargs) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as info:
        torch(src, **kwargs)
    exc = info.value
    assert type(exc) is ConfigurationError  # ours, and not also a TypeError
    for fragment in fragments:
        assert fragment in str(exc), str(exc)
    if argument is not None:
        assert exc.argument == argument
    return exc


def test_shape_table_matches_installed_botocore():
    spec = importlib.util.spec_from_file_location("gen", ROOT / "tools/gen_request_shapes.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.main(["--check"]) == 0, "run python tools/gen_request_shapes.py"


# -- the examples ---------------------------------------------------------------------


def test_volume_kms_key_must_be_a_key_id(src):
    refused(
        src,
        "Invalid volume_kms_key=5: it is int, not a string. Accepted: a KMS key ID, alias or ARN",
        "(CreateTrainingJob ResourceConfig.VolumeKmsKeyId)",
        argument="volume_kms_key",
        volume_kms_key=5,
    )
    refused(src, "Invalid output_kms_key='alias/my key': it does not match [a-zA-Z0-9:/_-]*",
            output_kms_key="alias/my key")  # fmt: skip
    torch(src, volume_kms_key="alias/my-key", output_kms_key="arn:aws:kms:us-west-2:1:key/a-b")


@pytest.mark.parametrize(
    "argument",
    [
        "encrypt_inter_container_traffic",
        "enable_network_isolation",
        "disable_profiler",
        "disable_output_compression",
        "enable_sagemaker_metrics",
        "use_spot_instances",
    ],
)
@pytest.mark.parametrize("value", ["false", "False", 0, 1, [], "yes"])
def test_bool_arguments_must_be_bools(src, argument, value):
    refused(src, f"Invalid {argument}={value!r}", "Accepted: True or False", **{argument: value})


def test_false_string_is_not_sent_as_true(src):
    exc = refused(src, argument="encrypt_inter_container_traffic",
                  encrypt_inter_container_traffic="false")  # fmt: skip
    assert "A string would be sent as True whatever it says" in str(exc)
    exc = refused(src, argument="enable_network_isolation", enable_network_isolation=1)
    assert "It is int, not a bool" in str(exc)
    est = torch(src, encrypt_inter_container_traffic=False, enable_network_isolation=None)
    assert est.encrypt_inter_container_traffic is False


def test_hyperparameter_limits(src):
    refused(src, "Invalid hyperparameters={", ": 101 entries. Accepted: at most 100 entries",
            "(CreateTrainingJob HyperParameters)",
            hyperparameters={f"k{i}": i for i in range(101)})  # fmt: skip
    key = "k" * 257
    refused(src, f"Invalid hyperparameters['{key[:20]}", "the key has 257 characters",
            "at most 256 characters", hyperparameters={key: 1})  # fmt: skip
    refused(src, "Invalid hyperparameters['lr']=", "it has 2502 characters",
            "Accepted: a string (at most 2500 characters)",
            argument="hyperparameters['lr']", hyperparameters={"lr": "x" * 2500})  # fmt: skip
    est = torch(src, hyperparameters={"lr": "x" * 2498})  # '"x..."' is 2500 characters
    with pytest.raises(ConfigurationError, match="hyperparameters\\['more'\\]"):
        est.set_hyperparameters(more=list(range(1000)))
    assert "more" not in est.hyperparameters()


def test_hyperparameters_with_the_ones_launchbay_adds(src, tmp_path):
    est = torch(src, instance_type="local_process", role=None, framework_version="2.13",
                hyperparameters={f"k{i}": i for i in range(98)})  # fmt: skip
    with pytest.raises(ConfigurationError) as info:
        est.create_training_job_request()
    message = str(info.value)
    assert "98 given, and launchbay adds 5 for the job (sagemaker_container_log_level" in message
    assert "103 in all. Accepted: at most 100 hyperparameters in all" in message
    assert "give at most 95" in message


@pytest.mark.parametrize("value", [5, 3.5, b"src", ["src"], {"dir": "src"}, object()])
def test_source_dir_that_is_not_a_path(src, value):
    exc = refused(src, "Invalid source_dir=", "Accepted: the path of a local directory",
                  argument="source_dir", source_dir=value)  # fmt: skip
    assert not isinstance(exc, TypeError)


def test_paths_may_be_pathlike(src):
    est = torch(src, source_dir=pathlib.Path(src), entry_point=pathlib.PurePath("train.py"))
    assert est.source_dir == str(src) and est.entry_point == "train.py"
    refused(src, "Invalid entry_point=7", argument="entry_point", entry_point=7)


# -- every other argument ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "fragments"),
    [
        ({"role": "arn:aws:iam::123:role/R"},
         ["Invalid role='arn:aws:iam::123:role/R'", "an IAM role ARN", "(CreateTrainingJob RoleArn)"]),
        ({"tags": [{"Key": f"k{i}", "Value": "v"} for i in range(51)]},
         ["Invalid tags=", "51 items. Accepted: at most 50 items", "(CreateTrainingJob Tags)"]),
        ({"tags": {"k" * 129: "v"}}, ["Invalid tags[0]['Key']=", "it has 129 characters",
                                      "1 to 128 characters", "Tags[0].Key"]),
        ({"tags": {"team": "a<b"}}, ["Invalid tags[0]['Value']='a<b': it does not match"]),
        ({"tags": [{"Key": "team", "Value": 5}]},
         ["Invalid tags[0]['Value']=5: it is int, not a string"]),
        ({"environment": {f"K{i}": "v" for i in range(101)}},
         ["Invalid environment=", "101 entries. Accepted: at most 100 entries"]),
        ({"environment": {"MY VAR": "v"}},
         ["Invalid environment['MY VAR']='MY VAR': the key does not match",
          "an environment variable name", "(CreateTrainingJob Environment['MY VAR'] key)"]),
        ({"environment": {"K": "v" * 513}},
         ["Invalid environment['K']=", "it has 513 characters", "at most 512 characters"]),
        ({"max_run": 2**31}, ["Invalid max_run=2147483648: out of range. Accepted: an integer "
                              "from 1 to 2147483647 (CreateTrainingJob StoppingCondition."
                              "MaxRuntimeInSeconds)"]),
        ({"use_spot_instances": True, "max_run": 60, "max_wait": 2**31},
         ["Invalid max_wait=2147483648: out of range", "StoppingCondition.MaxWaitTimeInSeconds"]),
        ({"volume_size": 2**31}, ["Invalid volume_size=2147483648", "ResourceConfig.VolumeSizeInGB"]),
        ({"keep_alive_period_in_seconds": 21601},
         ["Invalid keep_alive_period_in_seconds=21601", "from 0 to 21600"]),
        ({"instance_count": 2**31}, ["Invalid instance_count=2147483648: out of range"]),
        ({"instance_count": 0}, ["Invalid instance_count=0"]),
        ({"output_path": "s3://bucket/" + "a" * 1100},
         ["Invalid output_path=", "it has 1112 characters", "OutputDataConfig.S3OutputPath"]),
        ({"checkpoint_s3_uri": "s3://bucket/" + "a" * 1100},
         ["Invalid checkpoint_s3_uri=", "CheckpointConfig.S3Uri"]),
        ({"checkpoint_local_path": "/" + "a" * 4096},
         ["Invalid checkpoint_local_path=", "it has 4097 characters"]),
        ({"subnets": ["subnet_1"], "security_group_ids": ["sg-1"]},
         ["Invalid subnets[0]='subnet_1': it does not match [-0-9a-zA-Z]+", "a subnet ID"]),
        ({"subnets": [f"subnet-{i}" for i in range(17)], "security_group_ids": ["sg-1"]},
         ["Invalid subnets=", "17 items. Accepted: 1 to 16 items"]),
        ({"subnets": ["subnet-1"], "security_group_ids": [f"sg-{i}" for i in range(6)]},
         ["Invalid security_group_ids=", "6 items. Accepted: 1 to 5 items"]),
        ({"subnets": ["subnet-1"], "security_group_ids": ["sg-" + "0" * 30]},
         ["Invalid security_group_ids[0]=", "it has 33 characters"]),
        ({"metric_definitions": [{"Name": f"m{i}", "Regex": "x"} for i in range(41)]},
         ["Invalid metric_definitions=", "41 items. Accepted: at most 40 items"]),
        ({"metric_definitions": [{"Name": "", "Regex": "loss=(.*)"}]},
         ["Invalid metric_definitions[0]['Name']='': it has 0 characters"]),
        ({"metric_definitions": [{"Name": "loss", "Regex": "x" * 501}]},
         ["Invalid metric_definitions[0]['Regex']=", "1 to 500 characters"]),
        ({"metric_definitions": [{"Name": 3, "Regex": "x"}]},
         ["Invalid metric_definitions[0]['Name']=3: it is int, not a string"]),
        ({"container_arguments": ["a"] * 101}, ["Invalid container_arguments=", "101 items"]),
        ({"container_arguments": ["a" * 257]},
         ["Invalid container_arguments[0]=", "it has 257 characters"]),
        ({"container_entry_point": []}, ["Invalid container_entry_point=[]"]),
        ({"image_uri": "i" * 256}, ["Invalid image_uri=", "it has 256 characters",
                                    "AlgorithmSpecification.TrainingImage"]),
        ({"model_channel_name": "my model"},
         ["Invalid model_channel_name='my model': it does not match", "a channel name"]),
        ({"debugger_hook_config": DebuggerHookConfig(
            hook_parameters={f"p{i}": "1" for i in range(21)})},
         ["Invalid debugger_hook_config['HookParameters']=", "21 entries",
          "at most 20 entries"]),
        ({"max_retry_attempts": 31}, ["Invalid max_retry_attempts=31"]),
        ({"input_mode": "file"}, ["Invalid input_mode='file'"]),
    ],
)  # fmt: skip
def test_each_argument_against_the_model(src, kwargs, fragments):
    refused(src, *fragments, **kwargs)


def test_what_sagemaker_accepts_is_accepted(src):
    torch(
        src,
        role="SageMakerRole",  # a name, expanded at fit()
        tags={"team": "ml ops", "cost:center": "é-1 @x"},
        environment={"A_1": "v" * 512, "_B": "line\nbreak"},
        keep_alive_period_in_seconds=21600,
        volume_size=0,
        max_run=2**31 - 1,
        subnets=["subnet-0123456789abcdef0"] * 16,
        security_group_ids=["sg-0123456789abcdef0"],
        metric_definitions=[{"Name": "loss", "Regex": "loss=(\\S+)"}] * 40,
        container_arguments=["--flag", ""],
        hyperparameters={f"k{i}": i for i in range(95)},
    ).hyperparameters()


def test_local_modes_take_file_uris_and_any_role(src, tmp_path):
    est = torch(src, instance_type="local_process", role="any role",
                output_path=f"file://{tmp_path}/out", checkpoint_s3_uri=f"file://{tmp_path}/ck")  # fmt: skip
    request = est.create_training_job_request(job_name="local-ok")
    rules.check_request(request, local=True)
    with pytest.raises(ConfigurationError, match="S3OutputPath"):
        rules.check_request(request, local=False)


def test_inputs_are_checked_in_the_dry_run(src, tmp_path):
    est = torch(src, instance_type="local_process", role=None, framework_version="2.13")
    with pytest.raises(ConfigurationError) as info:
        est.create_training_job_request({"fsx": FileSystemInput("fs-123", "FSxLustre", "/fsx")})
    assert "Invalid inputs[0]['DataSource']['FileSystemDataSource']['FileSystemId']='fs-123'" in (
        str(info.value)
    )


def test_sagemaker_backend_checks_a_raw_request():
    request = {
        "TrainingJobName": "raw",
        "RoleArn": ROLE,
        "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
        "OutputDataConfig": {"S3OutputPath": "s3://b/out"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1,
                           "VolumeSizeInGB": 30, "VolumeKmsKeyId": 5},
        "StoppingCondition": {"MaxRuntimeInSeconds": 60},
        "EnableNetworkIsolation": "false",
    }  # fmt: skip
    with pytest.raises(ConfigurationError, match="Invalid volume_kms_key=5"):
        sagemaker_check_request(request)
    request["ResourceConfig"]["VolumeKmsKeyId"] = "alias/k"
    with pytest.raises(ConfigurationError, match="Invalid enable_network_isolation='false'"):
        sagemaker_check_request(request)
    request["EnableNetworkIsolation"] = False
    sagemaker_check_request(request)


def test_generic_estimator_hyperparameters_are_checked_as_sent():
    with pytest.raises(ConfigurationError, match="it has 2501 characters"):
        Estimator(image_uri="img", role=ROLE, instance_type="ml.m5.xlarge", instance_count=1,
                  hyperparameters={"x": "y" * 2501})  # fmt: skip
    Estimator(image_uri="img", role=ROLE, instance_type="ml.m5.xlarge", instance_count=1,
              hyperparameters={"x": "y" * 2500})  # fmt: skip


def test_java_patterns_read_as_the_service_reads_them():
    tag = rules._matcher(rules.shape("Tags", "[]", "Key")["pattern"])
    assert tag("Team 1_.:/=+-@") and tag("équipe") and tag("")
    assert not tag("a<b") and not tag("a\tb") and not tag("a#b")
    lam = rules._matcher("arn:[\\p{Alnum}\\-]+:lambda:[\\p{Alnum}\\-]+:[0-9]{12}:function:.*")
    assert lam("arn:aws:lambda:us-west-2:123456789012:function:f")
    assert not lam("arn:aws:lambda:us_west:123456789012:function:f")
    role = rules._matcher(rules.shape("RoleArn")["pattern"])
    assert role(ROLE) and not role(ROLE + " ") and not role("x" + ROLE)


def test_job_name_pattern_is_the_models_and_instance_types_follow_the_models_list():
    """JOB_NAME_RE is the botocore model's TrainingJobName pattern; every type it lists passes."""
    assert rules.JOB_NAME_RE.pattern == "^" + rules.shape("TrainingJobName")["pattern"] + "$"
    types = rules.shape("ResourceConfig", "InstanceType")["enum"]
    assert types and all(rules.INSTANCE_TYPE_RE.match(t) for t in types)
    assert not rules.INSTANCE_TYPE_RE.match("local_process")


def test_errors_name_the_argument_the_table_says_fills_the_field(monkeypatch):
    """The field -> argument map is the argument table's (issue 21): no second list to drift."""
    from launchbay import arguments

    for argument in arguments.ARGUMENTS:
        if argument.request:
            path = tuple(argument.request.split("."))
            assert rules._argument((*path, "Sub"), None) == f"{argument.name}['Sub']"
    assert rules._argument(("TrainingJobName",), None) == "job_name"
    assert (
        rules._argument(("InputDataConfig", 0, "ChannelName"), None) == "inputs[0]['ChannelName']"
    )
    # A field the table gains is named at once.
    extra = arguments.Argument("new_one", arguments.Kind(), "doc.", request="Brand.NewField")
    monkeypatch.setattr(arguments, "ARGUMENTS", (*arguments.ARGUMENTS, extra))
    assert rules._argument(("Brand", "NewField"), None) == "new_one"
