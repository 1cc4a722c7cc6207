"""Debugger rules and the profiler (docs/debugger.md): errors, job specs, local jobs, laziness.

The requests themselves are compared with SDK v2's in tests/compat (the ``rules-*`` and
``profiler-*`` cases); these tests cover what the comparison cannot.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from typing import Any

import pytest

from factories import sagemaker_estimator
from launchbay import _resolve, arguments
from launchbay.debugger import (
    FrameworkProfile,
    Profiler,
    ProfilerConfig,
    ProfilerRule,
    Rule,
    rule_configs,
)
from launchbay.errors import ConfigurationError
from launchbay.pytorch import PyTorch

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


@pytest.fixture(autouse=True)
def _region(monkeypatch: Any) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")


def _estimator(tmp_path: Any, **kwargs: Any) -> PyTorch:
    (tmp_path / "train.py").write_text("print('hi')\n")
    values = {
        "framework_version": "2.3.0",
        "instance_type": "ml.g5.xlarge",
        "output_path": "s3://out-bucket/",
        **kwargs,
    }
    return sagemaker_estimator("train.py", tmp_path, **values)


def test_rule_configs_load_smdebug_rulesconfig_only_when_used() -> None:
    code = (
        "import sys; import launchbay.debugger as d; from launchbay.debugger import rule_configs;"
        "assert 'smdebug_rulesconfig' not in sys.modules;"
        "rule_configs.vanishing_gradient(); assert 'smdebug_rulesconfig' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_errors_name_the_argument_the_value_and_what_is_accepted() -> None:
    with pytest.raises(ConfigurationError, match=r"base_config=.*rule_configs"):
        Rule.sagemaker({"not": "a rule"})
    with pytest.raises(ConfigurationError, match=r"rule_to_invoke.*Rule.custom"):
        Rule.sagemaker(rule_configs.overfit(), rule_parameters={"rule_to_invoke": "X"})
    with pytest.raises(ConfigurationError, match=r"source is given without rule_to_invoke"):
        Rule.custom("R", "img", "ml.t3.medium", 30, source="s3://b/r.py")
    with pytest.raises(ConfigurationError, match=r"email_address='Not An Address'"):
        rule_configs.Email("Not An Address")
    with pytest.raises(ConfigurationError, match=r"phone_number='555'.*E.164"):
        rule_configs.SMS("555")
    with pytest.raises(ConfigurationError, match=r"system_monitor_interval_millis=250"):
        ProfilerConfig(system_monitor_interval_millis=250)
    with pytest.raises(ConfigurationError, match=r"profile_params .*framework_profile_params"):
        ProfilerConfig(framework_profile_params=FrameworkProfile(), profile_params=Profiler())
    with pytest.raises(ConfigurationError, match=r"start_step/num_steps"):
        FrameworkProfile(start_step=1, duration=5)


def test_estimator_refuses_bad_rules_and_clashing_profiler_settings(tmp_path: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"rules\[0\]='overfit'"):
        _estimator(tmp_path, rules=["overfit"])
    twice = [Rule.sagemaker(rule_configs.overfit())] * 2
    with pytest.raises(ConfigurationError, match="distinct names"):
        _estimator(tmp_path, rules=twice)
    estimator = _estimator(
        tmp_path,
        disable_profiler=True,
        rules=[ProfilerRule.sagemaker(rule_configs.ProfilerReport())],
    )
    with pytest.raises(ConfigurationError, match=r"ProfilerReport.*disable_profiler=True"):
        estimator.create_training_job_request(job_name="j")
    estimator = _estimator(
        tmp_path,
        disable_profiler=True,
        profiler_config=ProfilerConfig(system_monitor_interval_millis=500),
    )
    with pytest.raises(ConfigurationError, match=r"profiler_config=.*disable_profiler=True"):
        estimator.create_training_job_request(job_name="j")


def test_rules_in_a_region_without_debugger_are_refused(tmp_path: Any, monkeypatch: Any) -> None:
    estimator = _estimator(tmp_path, rules=[Rule.sagemaker(rule_configs.vanishing_gradient())])
    monkeypatch.setattr(_resolve, "region", lambda args: "eu-central-2")
    with pytest.raises(ConfigurationError, match=r"rules=\['VanishingGradient'\].*'eu-central-2'"):
        estimator.create_training_job_request(job_name="j")


def test_custom_rule_local_source_is_named_by_its_content(tmp_path: Any, monkeypatch: Any) -> None:
    source = tmp_path / "my_rule.py"
    source.write_text("class MyRule: pass\n")
    rule = Rule.custom(
        "MyRule", "img:1", "ml.t3.medium", 30, source=str(source), rule_to_invoke="MyRule"
    )
    estimator = _estimator(tmp_path, rules=[rule])
    session = estimator.session
    monkeypatch.setattr(type(session), "default_bucket_name", lambda self: "sagemaker-bucket")
    request = estimator.create_training_job_request(job_name="j")
    uri = request["DebugRuleConfigurations"][0]["RuleParameters"]["source_s3_uri"]
    import hashlib

    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    assert uri == f"s3://sagemaker-bucket/MyRule/{digest}/my_rule.py"
    assert rule.rule_parameters["source_s3_uri"] == str(source)  # the rule is not changed


def test_a_local_job_sends_the_rules_and_says_they_run_here(tmp_path: Any, caplog: Any) -> None:
    rules = [
        Rule.sagemaker(rule_configs.vanishing_gradient()),
        ProfilerRule.sagemaker(rule_configs.ProfilerReport()),
    ]
    estimator = _estimator(tmp_path, instance_type="local_process", output_path=None, rules=rules)
    request = estimator.create_training_job_request(job_name="local-rules")
    assert request["DebugRuleConfigurations"][0]["RuleConfigurationName"] == "VanishingGradient"
    assert request["ProfilerRuleConfigurations"][0]["RuleConfigurationName"] == "ProfilerReport"
    with caplog.at_level(logging.INFO, logger="launchbay"):
        _resolve.notice_local_rules(estimator)
    notices = [r.getMessage() for r in caplog.records if "Debugger rules" in r.getMessage()]
    assert len(notices) == 1 and "VanishingGradient, ProfilerReport" in notices[0]


def test_job_spec_round_trip() -> None:
    rules = [
        Rule.sagemaker(
            rule_configs.loss_not_decreasing(),
            rule_parameters={"num_steps": 20},
            actions=rule_configs.ActionList(
                rule_configs.StopTraining(), rule_configs.Email("me@example.com")
            ),
        ),
        ProfilerRule.sagemaker(rule_configs.ProfilerReport(CPUBottleneck_threshold=90)),
        Rule.custom(
            "Mine", "img:1", "ml.t3.medium", 30, source="s3://b/r.py", rule_to_invoke="Mine"
        ),
    ]
    spec = arguments._by_name()["rules"].to_spec(rules, None)
    assert spec[0]["builtin"] == "loss_not_decreasing"
    assert spec[0]["actions"] == [{"stop_training": True}, {"email": "me@example.com"}]
    assert spec[1] == {"profiler": "ProfilerReport", "parameters": {"CPUBottleneck_threshold": 90}}
    back = arguments._by_name()["rules"].from_spec(spec)
    for mine, theirs in zip(rules, back, strict=True):
        if isinstance(mine, Rule):
            assert mine.to_debugger_rule_config_dict(
                "i", "j"
            ) == theirs.to_debugger_rule_config_dict("i", "j")
        else:
            assert mine.to_profiler_rule_config_dict("i") == theirs.to_profiler_rule_config_dict(
                "i"
            )
    config = ProfilerConfig(
        system_monitor_interval_millis=500,
        framework_profile_params=FrameworkProfile(start_step=5, num_steps=2),
    )
    profiler = arguments._by_name()["profiler_config"]
    again = profiler.from_spec(profiler.to_spec(config, None))
    assert again.to_request_dict("s3://o/") == config.to_request_dict("s3://o/")


def test_without_smdebug_every_debugging_rule_of_the_process_is_error_naming_the_extra(tmp_path):
    """The job's debugging rules share one process: each gets the Error naming the extra."""
    rules = [
        {"name": name, "parameters": {}, "out": str(tmp_path / f"{name}.json")}
        for name in ("VanishingGradient", "LossNotDecreasing")
    ]
    config = {"kind": "debug", "job": "no-smdebug", "trial": str(tmp_path), "rules": rules}
    code = (
        "import sys; sys.modules['smdebug'] = None\n"  # find_spec('smdebug') is None
        "from launchbay.debugger.evaluate import rule_main\n"
        "sys.exit(rule_main(sys.argv[1]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(config)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    for rule in rules:
        status = json.loads(open(rule["out"], encoding="utf-8").read())
        assert status["RuleConfigurationName"] == rule["name"]
        assert status["RuleEvaluationStatus"] == "Error"
        assert "Rules need smdebug (pip install 'launchbay[debugger]')" in status["StatusDetails"]
        assert f"smdebug is not installed in {sys.executable}" in status["StatusDetails"]
