"""The real command on bad specs and arguments: exit 2, file:line: key.path messages, no traceback."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap

import pytest

GOOD = textwrap.dedent(
    """
    framework: pytorch
    framework_version: "2.3"
    py_version: py311
    entry_point: train.py
    source_dir: src
    role: arn:aws:iam::123456789012:role/SageMakerRole
    instance_type: ml.m5.xlarge
    hyperparameters:
      epochs: 1
"""
).lstrip()


def check_usage_error(result: subprocess.CompletedProcess, *expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    for text in expected:
        assert text in result.stderr, result.stderr


def test_version_help_and_console_script(run_cli):
    result = run_cli("--version")
    assert result.returncode == 0 and result.stdout.startswith("launchbay ")
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("submit", "status", "logs", "stop", "list"):
        assert command in result.stdout
    submit_help = run_cli("submit", "--help").stdout
    for option in ("--no-wait", "--instance-type", "--set", "--dry-run", "--output",
                   "--stop-on-interrupt", "--job-name"):  # fmt: skip
        assert option in submit_help
    script = shutil.which("launchbay")
    assert script, "the launchbay console script is not installed"
    assert subprocess.run([script, "--version"], capture_output=True, text=True).returncode == 0


def test_unknown_key_suggests_and_names_line(run_cli, project):
    spec = project.spec(GOOD.replace("entry_point:", "entry_pont:"))
    check_usage_error(
        run_cli("submit", spec, "--dry-run"),
        "job.yaml:4: entry_pont: unknown key. Did you mean 'entry_point'?",
        "entry_point: missing required key",
    )


def test_env_key_suggests_environment(run_cli, project):
    # A v2 user's 'env' is too far from 'environment' for difflib: the table of v2
    # mistakes (launchbay.errors.MEANT_ARGUMENTS) names it, in a spec and in --set.
    spec = project.spec(GOOD + "env:\n  TOKEN: abc\n")
    check_usage_error(
        run_cli("validate", spec), "job.yaml:10: env: unknown key. Did you mean 'environment'?"
    )
    check_usage_error(
        run_cli("validate", project.spec(GOOD), "--set", "env.TOKEN=abc"),
        "--set env.TOKEN=abc: env: unknown key. Did you mean 'environment'?",
    )


def test_wrong_types_name_key_path_and_line(run_cli, project):
    spec = project.spec(
        """
        framework: pytorch
        framework_version: 2.3
        py_version: py311
        entry_point: train.py
        source_dir: src
        role: arn:aws:iam::123456789012:role/SageMakerRole
        instance_type: ml.m5.xlarge
        instance_count: two
        inputs:
          train:
            s3_data: 3
        """
    )
    result = run_cli("validate", spec)
    check_usage_error(
        result,
        "job.yaml:2: framework_version: expected a string, got the number 2.3 (put it in quotes",
        "job.yaml:8: instance_count: expected an integer, got the string 'two'",
        "job.yaml:11: inputs.train.s3_data: expected a string, got the number 3",
    )
    # One line per problem, in file order.
    lines = [line for line in result.stderr.splitlines() if line.startswith("launchbay: error:")]
    assert len(lines) == 3


def test_missing_required_keys(run_cli, project):
    spec = project.spec("entry_point: train.py\nrole: r\n")
    check_usage_error(
        run_cli("submit", spec),
        "the job spec needs: framework (pytorch, tensorflow, huggingface, sklearn, xgboost or mxnet) or image_uri",
        "the job spec needs: instance_type (or instance_groups)",
    )


def test_unset_variable_names_it_and_the_key(run_cli, project, cli_env):
    spec = project.spec(
        GOOD.replace("role: arn:aws:iam::123456789012:role/SageMakerRole", "role: ${LB_TEST_ROLE}")
    )
    env = {k: v for k, v in cli_env.items() if k != "LB_TEST_ROLE"}
    check_usage_error(
        run_cli("submit", spec, "--dry-run", env=env),
        "job.yaml:6: role: environment variable LB_TEST_ROLE is not set",
    )


def test_variables_and_set_overrides_reach_the_request(run_cli, project, cli_env):
    spec = project.spec(
        GOOD.replace("epochs: 1", "epochs: ${LB_EPOCHS}\n  name: '${LB_EPOCHS}'")
        + "instance_count: ${LB_COUNT:-1}\nenvironment: {TOKEN: '${LB_TOKEN}'}\n"
    )
    env = dict(cli_env, LB_EPOCHS="7", LB_TOKEN="s3cr$t")
    result = run_cli(
        "submit", spec, "--dry-run", "--instance-type", "local_process",
        "--set", "instance_count=2", "--set", "hyperparameters.lr=0.5",
        "--set", "hyperparameters.tag=abc", "--set", "distribution.torch_distributed.enabled=true",
        "--job-name", "override-test", env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    request = json.loads(result.stdout)
    hps = request["HyperParameters"]
    assert hps["epochs"] == "7"  # a plain ${VAR} takes the YAML type of its value
    assert hps["name"] == '"7"'  # a quoted one stays a string
    assert hps["lr"] == "0.5" and hps["tag"] == '"abc"'
    assert hps["sagemaker_torch_distributed_enabled"] == "true"
    assert request["ResourceConfig"] == {
        "VolumeSizeInGB": 30,
        "InstanceCount": 2,
        "InstanceType": "local_process",
    }
    assert request["Environment"] == {"TOKEN": "s3cr$t"}
    assert request["TrainingJobName"] == "override-test"


def test_bad_overrides(run_cli, project):
    spec = project.spec(GOOD)
    check_usage_error(
        run_cli("validate", spec, "--set", "nokey"), "--set nokey: expected KEY.PATH=VALUE"
    )
    check_usage_error(
        run_cli("validate", spec, "--set", "hyperparameter.epochs=3"),
        "--set hyperparameter.epochs=3: hyperparameter: unknown key. "
        "Did you mean 'hyperparameters'?",
    )
    check_usage_error(
        run_cli("validate", spec, "--set", "instance_count=zero"),
        "--set instance_count=zero: instance_count: expected an integer",
    )
    check_usage_error(
        run_cli("submit", spec, "--instance-type", "ml.huge"),
        "--instance-type ml.huge: instance_type: the string 'ml.huge' is not accepted",
    )


def test_estimator_errors_point_at_the_key(run_cli, project):
    spec = project.spec(GOOD + "use_spot_instances: true\nmax_run: 3600\nmax_wait: 60\n")
    check_usage_error(run_cli("validate", spec), "job.yaml:12: max_wait: Invalid max_wait=60")
    spec = project.spec(GOOD.replace("role: arn:aws:iam::123456789012:role/SageMakerRole\n", ""))
    check_usage_error(run_cli("validate", spec), "role is required for SageMaker jobs")
    spec = project.spec(GOOD.replace("entry_point: train.py", "entry_point: missing.py"))
    check_usage_error(run_cli("validate", spec), "job.yaml:4: entry_point:")
    check_usage_error(
        run_cli("validate", project.spec(GOOD), "--set", "framework_version=9.9"),
        "--set framework_version=9.9: framework_version: Invalid framework_version='9.9'",
    )


def test_reserved_and_unsupported(run_cli, project):
    spec = project.spec(GOOD + "vpc:\n  stack: my-vpc\nsubnets: [subnet-1]\n")
    check_usage_error(
        run_cli("validate", spec), "job.yaml:12: subnets: subnets cannot be combined with vpc"
    )
    spec = project.spec(GOOD)
    check_usage_error(
        run_cli("submit", spec, "--instance-type", "local"),
        "launchbay images build pytorch --framework-version",
    )


def test_yaml_syntax_error_and_missing_file(run_cli, project):
    spec = project.spec("framework: pytorch\nhyperparameters: {epochs: 1\nrole: x\n")
    check_usage_error(run_cli("validate", spec), "job.yaml:3: invalid YAML")
    check_usage_error(run_cli("validate", project.root / "nope.yaml"), "cannot read the job spec")


@pytest.mark.parametrize(
    "args",
    [("submit",), ("submit", "job.yaml", "--output", "xml"), ("list", "--max", "0"),
     ("status",), ("stop", "bad name!")],
)  # fmt: skip
def test_argument_errors_exit_2(run_cli, project, args):
    project.spec(GOOD)
    result = run_cli(*args)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
