"""Debugger rules evaluated on local jobs, and the profiler's system metrics (real smdebug, torch CPU).

Each rule of a ``local_process`` job runs in a niced process of its own through smdebug's
rule invoker over the job's debug tensors (both hosts' tensors linked into one tree);
its status is in ``describe()``, ``rule_job_summary()`` and ``launchbay status``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from factories import estimator as make_estimator
from launchbay import CollectionConfig, DebuggerHookConfig, JobFailedError
from launchbay.debugger import ProfilerConfig, ProfilerRule, Rule, rule_configs
from launchbay.pytorch import PyTorch

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "local_process_scripts"
EVERY_STEP = {"save_interval": "1"}


def estimator(out: Path, rules, hosts: int = 1, **kwargs) -> PyTorch:
    hyperparameters = kwargs.pop("hyperparameters", {})
    distribution = (
        {"torch_distributed": {"enabled": True, "processes_per_host": 1}} if hosts > 1 else None
    )
    return make_estimator(
        "smdebug_rules.py",
        SCRIPTS,
        out=out,
        instance_count=hosts,
        distribution=distribution,
        hyperparameters=hyperparameters,
        debugger_hook_config=DebuggerHookConfig(
            hook_parameters={"include_workers": "all", **EVERY_STEP}
        ),
        rules=rules,
        **kwargs,
    )


def statuses(description) -> dict[str, str]:
    found = description.get("DebugRuleEvaluationStatuses", []) + description.get(
        "ProfilerRuleEvaluationStatuses", []
    )
    return {s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in found}


def vanishing_rule() -> Rule:
    return Rule.sagemaker(
        rule_configs.vanishing_gradient(),
        collections_to_save=[CollectionConfig("gradients", EVERY_STEP)],
    )


@pytest.mark.parametrize(
    ("mode", "verdict"), [("vanishing", "IssuesFound"), ("healthy", "NoIssuesFound")]
)
def test_vanishing_gradient_on_two_hosts(home, tmp_path, mode, verdict):
    est = estimator(
        tmp_path / "out", [vanishing_rule()], hosts=2, hyperparameters={"mode": mode, "steps": 6}
    )
    est.fit(logs=False)
    job = est.latest_training_job
    description = job.describe()
    assert description["TrainingJobStatus"] == "Completed"
    assert statuses(description) == {"VanishingGradient": verdict}
    (summary,) = job.rule_job_summary()
    assert summary["RuleEvaluationStatus"] == verdict
    assert summary["LastModifiedTime"].tzinfo is not None
    if verdict == "IssuesFound":
        assert "RuleEvaluationConditionMet" in summary["StatusDetails"]
        assert "gradient" in summary["StatusDetails"]
    # The rule read both hosts' workers (2 hosts x 1 process).
    linked = Path(description["LocalJobDir"]) / "rules" / "debug-output"
    assert {p.name.split("_", 1)[1] for p in (linked / "events").rglob("*.tfevents")} == {
        "worker_0.tfevents",
        "worker_1.tfevents",
    }
    # launchbay status shows them too.
    shown = subprocess.run(
        [sys.executable, "-m", "launchbay.cli", "status", job.name, "--output", "json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    rules = json.loads(shown.stdout)["rules"]
    assert [(r["name"], r["status"]) for r in rules] == [("VanishingGradient", verdict)]


def test_loss_not_decreasing_stop_training_stops_the_job(home, tmp_path, caplog):
    actions = rule_configs.ActionList(
        rule_configs.StopTraining(), rule_configs.Email("me@example.com")
    )
    rule = Rule.sagemaker(
        rule_configs.loss_not_decreasing(),
        rule_parameters={"num_steps": 3},
        collections_to_save=[CollectionConfig("losses", EVERY_STEP)],
        actions=actions,
    )
    est = estimator(
        tmp_path / "out", [rule], hyperparameters={"mode": "flat", "steps": 400, "sleep": 0.1}
    )
    with pytest.raises(JobFailedError):
        est.fit(logs=False)
    description = est.latest_training_job.describe()
    assert description["TrainingJobStatus"] == "Stopped"
    assert "LossNotDecreasing" in description["FailureReason"]
    assert "StopTraining" in description["FailureReason"]
    assert statuses(description) == {"LossNotDecreasing": "IssuesFound"}
    logs = Path(description["LocalJobDir"], "logs", "algo-1.log").read_text()
    assert "step 399" not in logs  # stopped well before its end
    assert any(
        "would have sent" in r.getMessage() and "me@example.com" in r.getMessage()
        for r in caplog.records
    )


CUSTOM = """
from smdebug.rules.rule import Rule


class BiasTooLarge(Rule):
    def __init__(self, base_trial, limit="0.0"):
        super().__init__(base_trial, action_str="")
        self.limit = float(limit)

    def invoke_at_step(self, step):
        for name in self.base_trial.tensor_names(regex=".*bias"):
            if abs(float(self.base_trial.tensor(name).value(step).max())) > self.limit:
                return True
        return False
"""


def test_custom_rule_and_a_failing_rule(home, tmp_path):
    source = tmp_path / "my_rule.py"
    source.write_text(CUSTOM)
    custom = Rule.custom(
        name="BiasTooLarge",
        image_uri="123456789012.dkr.ecr.us-west-2.amazonaws.com/rules:1",
        instance_type="ml.t3.medium",
        volume_size_in_gb=10,
        source=str(source),
        rule_to_invoke="BiasTooLarge",
        rule_parameters={"limit": "0.0"},
        collections_to_save=[CollectionConfig("weights", EVERY_STEP)],
    )
    broken = Rule.sagemaker(
        rule_configs.vanishing_gradient(),
        name="Broken",
        rule_parameters={"threshold": "not-a-number"},
    )
    unknown = Rule.sagemaker(rule_configs.dead_relu())
    est = estimator(tmp_path / "out", [custom, broken, unknown], hyperparameters={"steps": 4})
    est.fit(logs=False)
    description = est.latest_training_job.describe()
    assert description["TrainingJobStatus"] == "Completed"  # failing rules never fail the job
    assert statuses(description) == {
        "BiasTooLarge": "IssuesFound",
        "Broken": "Error",
        "DeadRelu": "Error",
    }
    details = {
        s["RuleConfigurationName"]: s["StatusDetails"]
        for s in description["DebugRuleEvaluationStatuses"]
    }
    assert (
        "ValueError" in details["Broken"]
        and "Traceback" in details["Broken"]
        or "float" in details["Broken"]
    )
    assert len(details["Broken"]) <= 1024
    assert "not evaluated in local jobs" in details["DeadRelu"]


def test_system_metrics_read_back_with_smdebug_and_profiler_report(home, tmp_path):
    from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader

    out = tmp_path / "out"
    est = estimator(
        out,
        [ProfilerRule.sagemaker(rule_configs.ProfilerReport())],
        hosts=2,
        hyperparameters={"steps": 20, "sleep": 0.1},
        profiler_config=ProfilerConfig(system_monitor_interval_millis=100),
    )
    est.fit(logs=False)
    job = est.latest_training_job
    root = out / job.name / "profiler-output"
    reader = LocalSystemMetricsReader(str(root))
    events = reader.get_events(0, 10**17)
    assert {e.node_id for e in events} == {"algo-1", "algo-2"}
    assert {e.dimension for e in events} >= {"CPUUtilization", "Memory"}
    assert len({e.timestamp for e in events}) >= 5
    assert statuses(job.describe()) == {"ProfilerReport": "NoIssuesFound"}
    report = (
        out / job.name / "rule-output" / "ProfilerReport" / "profiler-output" / "profiler-report.md"
    )
    text = report.read_text()
    assert "algo-1" in text and "algo-2" in text and "Needs SageMaker" in text
