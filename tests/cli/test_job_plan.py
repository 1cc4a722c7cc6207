"""One rule says where a job runs: the dry run, the estimator, ``fit()``, ``launchbay
validate``/``submit`` and ``attach`` agree on the backend and the hosts (issue 21).

For every form of resources: each local instance type, an ``ml.*`` type, local and
``ml.*`` instance groups, and a mix of local and ``ml.*`` groups, which every entry point
refuses with the same clear error. ``ml.*`` jobs go to moto's server; ``local_process``
jobs run for real; the Docker types are checked up to the point where a container would
start (tests/docker runs them). Local instance groups were sent to SageMaker by ``fit()``
while ``launchbay submit`` ran them locally, before the rule was one.
"""

from __future__ import annotations

import json
import os

import pytest

from factories import OMIT, job_spec
from launchbay import ConfigurationError, Estimator
from launchbay.backends.plan import plan_request
from launchbay.inputs import InstanceGroup
from launchbay.pytorch import PyTorch

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"

FORMS = {
    # form: (estimator resources, spec resources, backend, hosts, runs here)
    "local_process": (
        {"instance_type": "local_process", "instance_count": 2},
        "instance_type: local_process\ninstance_count: 2\n",
        "local_process",
        2,
    ),
    "local": (
        {"instance_type": "local", "instance_count": 2},
        "instance_type: local\ninstance_count: 2\n",
        "docker",
        2,
    ),
    "local_gpu": (
        {"instance_type": "local_gpu", "instance_count": 2},
        "instance_type: local_gpu\ninstance_count: 2\n",
        "docker",
        2,
    ),
    "ml": (
        {"instance_type": "ml.m5.xlarge", "instance_count": 2},
        "instance_type: ml.m5.xlarge\ninstance_count: 2\n",
        "sagemaker",
        2,
    ),
    "local-groups": (
        {
            "instance_groups": [
                InstanceGroup("first", "local_process", 1),
                InstanceGroup("second", "local_process", 2),
            ]
        },
        "instance_groups:\n"
        "  - {instance_group_name: first, instance_type: local_process, instance_count: 1}\n"
        "  - {instance_group_name: second, instance_type: local_process, instance_count: 2}\n",
        "local_process",
        3,
    ),
    "ml-groups": (
        {
            "instance_groups": [
                InstanceGroup("first", "ml.m5.xlarge", 1),
                InstanceGroup("second", "ml.c5.xlarge", 2),
            ]
        },
        "instance_groups:\n"
        "  - {instance_group_name: first, instance_type: ml.m5.xlarge, instance_count: 1}\n"
        "  - {instance_group_name: second, instance_type: ml.c5.xlarge, instance_count: 2}\n",
        "sagemaker",
        3,
    ),
}


def _estimator(project, resources):
    return PyTorch(
        entry_point="train.py",
        source_dir=str(project.root / "src"),
        role=ROLE,
        framework_version="2.3",
        py_version="py311",
        output_path="s3://plan-bucket/out",
        **resources,
    )


def _spec(project, resources: str):
    return project.spec(
        job_spec(
            resources,
            output_path="s3://plan-bucket/out",
            instance_type=OMIT,
            instance_count=OMIT,
        )
    )


@pytest.mark.parametrize("form", list(FORMS))
def test_every_entry_point_agrees_on_the_backend_and_the_hosts(
    form, project, run_cli, moto_env, monkeypatch, fake_gpus, session
):
    for name, value in moto_env.items():
        monkeypatch.setenv(name, value)
    fake_gpus(4)
    moto_env = dict(moto_env, PATH=os.environ["PATH"])  # the commands see the same GPUs
    session.s3_client.create_bucket(
        Bucket="plan-bucket", CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
    )
    resources, spec_resources, backend, count = FORMS[form]
    form = form.replace("_", "-")  # job names take hyphens
    hosts = tuple(f"algo-{i}" for i in range(1, count + 1))
    est = _estimator(project, resources)
    # The estimator and its dry run.
    assert est.placement.backend == backend
    assert est.is_local == (backend != "sagemaker")
    dry = plan_request(est.create_training_job_request(job_name=f"plan-{form}"))
    assert (dry.backend, dry.hosts) == (backend, hosts)
    # The CLI: validate, and the request submit --dry-run prints.
    spec = _spec(project, spec_resources)
    validated = run_cli("validate", spec, env=moto_env)
    assert validated.returncode == 0, validated.stderr
    printed = run_cli("submit", spec, "--dry-run", "--job-name", f"plan-{form}", env=moto_env)
    assert printed.returncode == 0, printed.stderr
    from_cli = plan_request(json.loads(printed.stdout))
    assert (from_cli.backend, from_cli.hosts) == (backend, hosts)
    assert from_cli.request["ResourceConfig"] == dry.request["ResourceConfig"]
    if backend == "docker":
        return  # fit() and submit need the engine and an image: tests/docker
    # fit(): the job runs where the dry run said, on those hosts.
    job = est.fit(job_name=f"plan-fit-{form}", wait=backend == "local_process", logs=False)
    assert job.backend.name == backend
    description = job.describe()
    assert plan_request(description).hosts == hosts
    # launchbay submit runs it in the same place.
    submitted = run_cli(
        "submit", spec, "--job-name", f"plan-cli-{form}", "--output", "json", env=moto_env
    ) if backend == "local_process" else run_cli(
        "submit", spec, "--no-wait", "--job-name", f"plan-cli-{form}", "--output", "json",
        env=moto_env,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    assert json.loads(submitted.stdout)["backend"] == backend
    # attach (SageMaker jobs) rebuilds the estimator with the same placement.
    if backend == "sagemaker":
        attached = Estimator.attach(f"plan-fit-{form}", sagemaker_session=session)
        assert attached.placement.backend == backend
        assert plan_request(attached.latest_training_job.describe()).hosts == hosts


def test_local_and_ml_groups_mixed_are_refused_everywhere(project, run_cli, moto_env):
    mixed = {
        "instance_groups": [
            InstanceGroup("here", "local_process", 1),
            InstanceGroup("there", "ml.m5.xlarge", 1),
        ]
    }
    with pytest.raises(ConfigurationError) as raised:
        _estimator(project, mixed)
    message = str(raised.value)
    assert "instance_groups" in message and "mixed" in message
    assert "'here': 'local_process'" in message and "'there': 'ml.m5.xlarge'" in message
    spec = _spec(
        project,
        "instance_groups:\n"
        "  - {instance_group_name: here, instance_type: local_process, instance_count: 1}\n"
        "  - {instance_group_name: there, instance_type: ml.m5.xlarge, instance_count: 1}\n",
    )
    for command in (["validate", spec], ["submit", spec, "--dry-run"], ["submit", spec]):
        result = run_cli(*command, env=moto_env)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert "instance_groups" in result.stderr and "mixed" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


def test_two_local_types_in_groups_are_refused(project):
    with pytest.raises(ConfigurationError, match="one local type"):
        _estimator(
            project,
            {
                "instance_groups": [
                    InstanceGroup("procs", "local_process", 1),
                    InstanceGroup("containers", "local", 1),
                ]
            },
        )
