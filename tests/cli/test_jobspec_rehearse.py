"""A job spec's ``rehearse:`` key: the rehearsal setting of a local job, checked at its line."""

from __future__ import annotations

import pytest

from launchbay import Estimator
from launchbay.jobspec import JobSpecError, loads

SPEC = "image_uri: img\ninstance_type: {type}\nuse_spot_instances: true\nmax_wait: 90000\n"


@pytest.mark.parametrize("value", ['"60s,host-loss:30s"', "[60s, host-loss:30s]"])
def test_rehearse_becomes_the_jobs_setting(value):
    spec = loads(
        SPEC.format(type="local_process")
        + "environment: {A: b}\n"
        + f"rehearse:\n  interruptions: {value}\n"
    )
    estimator = Estimator.from_spec(spec)
    assert estimator.environment == {
        "A": "b",
        "LAUNCHBAY_REHEARSE_INTERRUPTIONS": "60s,host-loss:30s",
    }


def test_a_bad_item_is_reported_at_its_line_naming_the_value_and_what_is_accepted():
    with pytest.raises(JobSpecError) as info:
        loads(SPEC.format(type="local_process") + "rehearse:\n  interruptions: 60s,soon\n")
    (problem,) = info.value.problems
    assert (problem.line, problem.key) == (6, "rehearse.interruptions")
    assert "Invalid rehearse.interruptions='60s,soon'. 'soon' is not an item." in str(problem)
    assert "Accepted: a comma-separated list" in str(problem)


def test_rehearse_is_refused_for_a_sagemaker_job():
    with pytest.raises(JobSpecError) as info:
        loads(SPEC.format(type="ml.m5.xlarge") + "rehearse:\n  interruptions: 60s\n")
    assert "rehearse applies to local jobs" in str(info.value)
    assert "'ml.m5.xlarge'" in str(info.value)


def test_rehearse_takes_only_interruptions():
    with pytest.raises(JobSpecError) as info:
        loads(SPEC.format(type="local_process") + "rehearse:\n  interruption: 60s\n")
    assert "rehearse" in str(info.value)
