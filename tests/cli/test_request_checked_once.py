"""An ``ml.*`` request is checked once, where its plan is made (issue 21).

It used to be checked three times on the way to SageMaker: a placeholder request at
construction, the estimator's ``_request_rules.check_request`` on the finished
request, and the SageMaker backend's ``check_request``, which checked the name,
role, image and instance types again by hand (and then the model once more).
Now ``launchbay.backends.plan.plan_request`` calls the one validator
(``launchbay._request_rules.check_request``) for every plan, and a backend's
``check(plan)`` does not check the request again. The construction-time check of
the arguments (a placeholder request, errors naming the argument) stays.

Shown against moto's server with the real SageMaker backend: the dry run,
``fit()``, the tuner and ``launchbay submit`` (``--dry-run`` and not) each call the
validator once for the finished request, and a request that only the finished
request can show wrong (the SageMaker defaults file's tags added to the job's 50)
is refused by each of them with the same message.
"""

from __future__ import annotations

import json

import pytest
import yaml

import launchbay._request_rules as request_rules
from factories import job_spec
from launchbay import Session
from launchbay.backends.plan import plan_request
from launchbay.backends.sagemaker import SageMakerBackend
from launchbay.errors import ConfigurationError
from launchbay.pytorch import PyTorch
from launchbay.tuner import ContinuousParameter, HyperparameterTuner

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
BUCKET = "once-bucket"
METRICS = [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]


@pytest.fixture
def calls(monkeypatch):
    """The names of the requests the one validator checked, in order."""
    seen: list[str] = []
    real = request_rules.check_request

    def counted(request, *, local=False):
        seen.append(str(request.get("TrainingJobName")))
        return real(request, local=local)

    monkeypatch.setattr(request_rules, "check_request", counted)
    return seen


@pytest.fixture
def ml(project, moto_env, monkeypatch, session):
    for name, value in moto_env.items():
        monkeypatch.setenv(name, value)
    session.s3_client.create_bucket(
        Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
    )

    def make(sagemaker_session=session, **extra):
        return PyTorch(
            entry_point="train.py", source_dir=str(project.root / "src"), role=ROLE,
            framework_version="2.3", py_version="py311", output_path=f"s3://{BUCKET}/out",
            instance_type="ml.m5.xlarge", instance_count=1, sagemaker_session=sagemaker_session, **extra,
        )  # fmt: skip

    return make


def _tuner(estimator):
    return HyperparameterTuner(
        estimator, "loss", {"lr": ContinuousParameter(0.001, 0.1)},
        metric_definitions=METRICS, objective_type="Minimize", max_jobs=2, max_parallel_jobs=1,
    )  # fmt: skip


def test_the_dry_run_fit_and_the_tuner_check_the_request_once(ml, calls, session):
    est = ml()
    assert calls == ["placeholder"]  # the arguments, at construction (errors name them)
    calls.clear()
    est.create_training_job_request(f"s3://{BUCKET}/train", job_name="once-dry")
    assert calls == ["once-dry"]
    calls.clear()
    job = est.fit(f"s3://{BUCKET}/train", job_name="once-fit", wait=False, logs=False)
    assert job.backend.name == "sagemaker"
    assert calls == ["once-fit"]  # the backend's check(plan) and run(plan) add none
    described = session.sagemaker_client.describe_training_job(TrainingJobName="once-fit")
    assert described["TrainingJobName"] == "once-fit"
    calls.clear()
    _tuner(ml()).fit(f"s3://{BUCKET}/train", job_name="once-tune", wait=False)
    assert calls.count("placeholder") == 1 and len(calls) == 2, calls  # its estimator, its plan


def test_the_sagemaker_backend_makes_no_check_of_its_own(ml, calls, session):
    request = ml().create_training_job_request(f"s3://{BUCKET}/train", job_name="once-own")
    calls.clear()
    plan = plan_request(request)
    assert calls == ["once-own"]
    SageMakerBackend(session).check(plan)
    assert calls == ["once-own"]
    # The hand checks (name, role, image, instance types) are gone: a local instance
    # type is refused by the one validator, in its words (argument, then field).
    local = dict(request, ResourceConfig={"InstanceType": "local_process", "InstanceCount": 1})
    with pytest.raises(ConfigurationError, match=r"instance_type='local_process'.*this machine"):
        request_rules.check_request(local, local=False)
    with pytest.raises(ModuleNotFoundError):
        __import__("launchbay.backends._sagemaker_request")


def test_every_entry_point_refuses_a_bad_request_with_the_same_message(
    ml, project, run_cli, moto_env, tmp_path, monkeypatch
):
    # 50 tags on the job (the most CreateTrainingJob takes) and one more from the
    # SageMaker defaults file: only the finished request has 51.
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "SchemaVersion": "1.0",
                "SageMaker": {"TrainingJob": {"Tags": [{"Key": "team", "Value": "ml"}]}},
            }
        )
    )
    monkeypatch.setenv("SAGEMAKER_USER_CONFIG_OVERRIDE", str(tmp_path / "user"))
    defaults = Session(region_name="us-west-2")  # reads the file
    env = {**moto_env, "SAGEMAKER_USER_CONFIG_OVERRIDE": str(tmp_path / "user")}
    tags = [{"Key": f"k{i}", "Value": "v"} for i in range(50)]
    expected = "Invalid tags=[{'Key': 'k0', 'Value': 'v'}"
    messages = []
    for run in (
        lambda: ml(defaults, tags=tags).create_training_job_request(job_name="once-tags"),
        lambda: ml(defaults, tags=tags).fit(job_name="once-tags", wait=False, logs=False),
        lambda: _tuner(ml(defaults, tags=tags)).fit(job_name="once-tags", wait=False),
    ):
        with pytest.raises(ConfigurationError) as raised:
            run()
        messages.append(str(raised.value))
    assert messages[0].startswith(expected) and "51 items" in messages[0], messages[0]
    assert messages[1] == messages[0]
    assert messages[2] == messages[0]
    spec = project.spec(
        job_spec(
            "tags:\n" + "".join(f"  k{i}: v\n" for i in range(50)),
            output_path=f"s3://{BUCKET}/out",
        )
    )
    for command in (["submit", spec, "--dry-run"], ["submit", spec, "--no-wait"]):
        done = run_cli(*command, "--job-name", "once-tags", env=env)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "51 items" in done.stderr and "CreateTrainingJob Tags" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    assert json.dumps(messages[0])  # one message, plain text
