"""The local tuner's parts as small objects chosen by the plan: a searcher per strategy,
the stoppers (median rule, Hyperband's rungs, completion criteria) and the slots."""

from __future__ import annotations

import dataclasses

import pytest

from launchbay.backends.plan import place, plan_request
from launchbay.pytorch import PyTorch
from launchbay.tuner import CategoricalParameter, ContinuousParameter, HyperparameterTuner
from launchbay.tuning.scheduler import Slots, plan_slots
from launchbay.tuning.search import (
    SEARCHERS,
    GridSearcher,
    HyperbandSearcher,
    RandomSearcher,
    Searcher,
    make_searcher,
)
from launchbay.tuning.stopping import (
    CONVERGENCE_WINDOW,
    CompletionCriteria,
    HyperbandRungs,
    MedianRule,
    Stopper,
    make_stopper,
)

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")


def _tuner(strategy="Random", instance_type="local_process", **options):
    estimator = PyTorch(
        entry_point="train.py", source_dir="src", role=None, instance_type=instance_type,
        instance_count=1, framework_version="2.8.0", py_version="py312",
    )  # fmt: skip
    ranges = (
        {"opt": CategoricalParameter(["sgd", "adam"])}
        if strategy == "Grid"
        else {"lr": ContinuousParameter(0.01, 0.1)}
    )
    return HyperparameterTuner(
        estimator, "loss", ranges, metric_definitions=[{"Name": "loss", "Regex": "loss=(.*)"}],
        strategy=strategy, objective_type="Minimize", max_jobs=4, **options,
    )  # fmt: skip


@pytest.mark.parametrize(
    "strategy, kind",
    [("Random", RandomSearcher), ("Grid", GridSearcher), ("Hyperband", HyperbandSearcher)],
)
def test_each_strategy_is_a_searcher_chosen_by_the_plan(src, strategy, kind):
    plan = _tuner(strategy).tuning_plan(job_name="t-strategy")
    searcher = make_searcher(plan)
    assert type(searcher) is kind and isinstance(searcher, Searcher)
    assert SEARCHERS[strategy] is kind
    definition, values, _ = searcher.ask()
    assert definition is None and set(values) == ({"opt"} if strategy == "Grid" else {"lr"})


def test_the_searcher_interface_cannot_be_made_itself(src):
    plan = _tuner().tuning_plan(job_name="t-abstract")
    with pytest.raises(TypeError):
        Searcher(plan)  # type: ignore[abstract]


def test_the_plan_chooses_its_stoppers(src):
    hyperband = make_stopper(_tuner("Hyperband").tuning_plan(job_name="t-hb"))
    assert [type(s) for s in hyperband.stoppers] == [HyperbandRungs, CompletionCriteria]
    median = make_stopper(_tuner(early_stopping_type="Auto").tuning_plan(job_name="t-auto"))
    assert [type(s) for s in median.stoppers] == [MedianRule, CompletionCriteria]
    assert median.watches_trials
    plain = make_stopper(_tuner().tuning_plan(job_name="t-plain"))
    assert [type(s) for s in plain.stoppers] == [CompletionCriteria]
    assert not plain.watches_trials
    assert not plain.stops_trial([9.0], [[1.0]], [])


def test_the_median_rule_stops_a_trial_behind_the_ended_ones():
    rule = MedianRule("Minimize")
    assert rule.stops_trial([5.0], [[1.0], [2.0], []], [[0.0]])
    assert not rule.stops_trial([1.5], [[1.0], [2.0]], [])
    assert not rule.stops_trial([5.0], [], [[0.0]])  # running trials do not count


def test_hyperband_rungs_count_running_and_ended_trials():
    rungs = HyperbandRungs("Maximize", 1, 9)
    assert rungs.stops_trial([0.1], [[0.9]], [[0.8]])  # rung 1: not in the best third of 3
    assert not rungs.stops_trial([0.1], [[0.9]], [])  # fewer than 3 at the rung
    assert rungs.stops_trial([0.5] * 9, [], [])  # its budget: MaxResource steps


def test_completion_criteria_end_the_search_with_a_reason():
    target = CompletionCriteria({"TargetObjectiveMetricValue": 0.5}, "Minimize", 1)
    assert target.stops_search(None) is None and target.stops_search(0.6) is None
    assert target.stops_search(0.5) == "TargetObjectiveMetricValue 0.5 reached"
    patience = CompletionCriteria(
        {"BestObjectiveNotImproving": {"MaxNumberOfTrainingJobsNotImproving": 2}}, "Minimize", 1
    )
    patience.trial_ended(1.0, None)
    patience.trial_ended(2.0, 1.0)
    assert patience.stops_search(1.0) is None
    patience.trial_ended(None, 1.0)  # no objective: not counted
    patience.trial_ended(3.0, 1.0)
    assert patience.stops_search(1.0) == "2 training jobs in a row did not improve the best"
    converged = CompletionCriteria(
        {"ConvergenceDetected": {"CompleteOnConvergence": "Enabled"}}, "Minimize", 1
    )
    converged.trial_ended(1.0, None)
    for _ in range(CONVERGENCE_WINDOW):
        assert converged.stops_search(1.0) is None
        converged.trial_ended(1.0, 1.0)
    assert converged.stops_search(1.0) == f"converged ({CONVERGENCE_WINDOW} trials without a gain)"
    assert Stopper().stops_search(0.0) is None


def test_slots_are_taken_lowest_first_and_given_back():
    slots = Slots(3, [None, None, None])
    assert [slots.take(), slots.take()] == [0, 1]
    slots.give_back(0)
    assert slots.take() == 0 and slots.take() == 2 and slots.free == []


def test_this_machines_rank_limit_caps_local_trials_but_not_a_ray_clusters(src, monkeypatch):
    monkeypatch.setenv("LAUNCHBAY_MAX_LOCAL_RANKS", "2")
    here = _tuner(max_parallel_jobs=4).tuning_plan(job_name="t-here")
    bases = [plan_request(d.training_request) for d in here.definitions]
    assert bases[0].local and bases[0].on_this_machine
    assert plan_slots(here.name, 4, bases).parallel == 2
    # a Ray job's plan: the same hosts on a Ray cluster's nodes (planning it needs no cluster)
    ray = [dataclasses.replace(b, placement=place("ray", None), gpus=None) for b in bases]
    assert ray[0].local and not ray[0].on_this_machine  # client-driven, hosts elsewhere
    assert plan_slots(here.name, 4, ray).parallel == 4
