"""Property: random distribution dicts and hyperparameters give a valid estimator or our error.

Nothing else may come out: no KeyError, AttributeError or TypeError from deep inside.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from factories import source_dir
from launchbay import LaunchbayError
from launchbay.pytorch import PyTorch
from launchbay.tensorflow import TensorFlow

KEYS = [
    "mpi", "smdistributed", "torch_distributed", "pytorchddp", "parameter_server",
    "multi_worker_mirrored_strategy", "instance_groups", "pytorchxla", "enabled",
    "processes_per_host", "custom_mpi_options", "dataparallel", "modelparallel", "parameters",
    "partitions", "microbatches", "pipeline", "ddp", "horovod", "mpii",
]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 10),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "yes", "8", "-x A", "simple", "/no/such.json"]),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(KEYS), children, max_size=4),
    ),
    max_leaves=12,
)
distributions = st.one_of(values, st.dictionaries(st.sampled_from(KEYS), values, max_size=4))
hyperparameters = st.one_of(
    st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), values, max_size=4),
    values,
)
instance_types = st.sampled_from(
    [
        "ml.p4d.24xlarge",
        "ml.p5.48xlarge",
        "ml.m5.xlarge",
        "ml.trn1.32xlarge",
        "local_process",
        "ml.g5.xlarge",
    ]
)


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    return source_dir(tmp_path_factory.mktemp("fuzz"), "")


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    distribution=distributions,
    hps=hyperparameters,
    instance_type=instance_types,
    framework=st.sampled_from(["pytorch", "tensorflow"]),
    version=st.sampled_from(["2.3", "2.3.0", "2.2.0", "2.14", "2.8", "1.5", "x"]),
)
def test_only_launchbay_errors_come_out(src, distribution, hps, instance_type, framework, version):
    cls = PyTorch if framework == "pytorch" else TensorFlow
    try:
        est = cls(
            entry_point="train.py",
            source_dir=str(src),
            role="arn:aws:iam::123456789012:role/R",
            instance_count=2,
            instance_type=instance_type,
            framework_version=version,
            py_version="py311",
            distribution=distribution,
            hyperparameters=hps,
        )
    except LaunchbayError as exc:
        assert isinstance(exc, ValueError)
        assert str(exc)
        return
    # Whatever was accepted can be encoded and sent.
    for value in est.hyperparameters().values():
        assert isinstance(value, str)
    for value in est.distribution_config.to_hyperparameters().values():
        json.dumps(value, allow_nan=False)


# -- every estimator argument, wrong types and sizes -------------------------------------------

ARGUMENTS = [
    "role", "instance_count", "instance_type", "keep_alive_period_in_seconds", "volume_size",
    "volume_kms_key", "max_run", "input_mode", "output_path", "output_kms_key", "base_job_name",
    "tags", "subnets", "security_group_ids", "model_uri", "model_channel_name",
    "metric_definitions", "encrypt_inter_container_traffic", "use_spot_instances", "max_wait",
    "checkpoint_s3_uri", "checkpoint_local_path", "debugger_hook_config",
    "enable_sagemaker_metrics", "enable_network_isolation", "disable_profiler", "environment",
    "max_retry_attempts", "source_dir", "hyperparameters", "container_log_level",
    "code_location", "entry_point", "dependencies", "container_entry_point",
    "container_arguments", "disable_output_compression", "image_uri", "distribution",
]  # fmt: skip

junk_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**31 - 2, max_value=2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.text(min_size=250, max_size=3000),
    st.binary(max_size=8),
    st.sampled_from(["false", "True", "0", "s3://", "s3://b/k", "file:///tmp/x", "alias/k",
                     "arn:aws:iam::123:role/x", "subnet_1", "MY VAR", "a<b", "/abs/path",
                     "train.py", "ml.m5.xlarge", "local_process", "File", "Pipe"]),
    st.builds(object),
)  # fmt: skip
junk = st.recursive(
    junk_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(
            st.one_of(
                st.text(max_size=6),
                st.integers(),
                st.sampled_from(["Key", "Value", "Name", "Regex", "k" * 300]),
            ),
            children,
            max_size=4,
        ),
    ),
    max_leaves=8,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    argument=st.sampled_from(ARGUMENTS),
    value=junk,
    instance_type=st.sampled_from(["local_process", "ml.m5.xlarge"]),
)
def test_wrong_argument_values_give_only_launchbay_errors(src, argument, value, instance_type):
    """Any value of any argument: a valid estimator and request, or our ValueError; nothing else."""
    from launchbay import _request_rules

    kwargs = dict(
        entry_point="train.py",
        source_dir=str(src),
        role="arn:aws:iam::123456789012:role/R",
        instance_count=1,
        instance_type=instance_type,
        framework_version="2.13",
        py_version="py311",
    )
    kwargs[argument] = value
    try:
        est = PyTorch(**kwargs)
        if est.is_local:  # the dry run needs no AWS for local jobs
            request = est.create_training_job_request(job_name="fuzz")
            json.dumps(request, allow_nan=False)
            _request_rules.check_request(request, local=True)
    except LaunchbayError as exc:
        assert isinstance(exc, ValueError), repr(exc)
        assert str(exc)
