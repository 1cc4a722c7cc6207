"""The pure parts of local tuning: metric parsing, the median rule, Hyperband's rungs,
grid enumeration, sampling on each scale, and Bayesian (Optuna TPE) against Random."""

from __future__ import annotations

import json
import math
import os
import random
import socket
import statistics

import pytest

from launchbay.errors import ConfigurationError
from launchbay.metrics import (
    METRICS_FILE,
    BacktrackingRegexWarning,
    MetricRecorder,
    MetricsReader,
    compile_definitions,
    load_metrics,
    nested_quantifier,
    parse_line,
)
from launchbay.pytorch import PyTorch
from launchbay.tuner import (
    CategoricalParameter,
    ContinuousParameter,
    HyperparameterTuner,
    WarmStartConfig,
    WarmStartTypes,
)
from launchbay.tuning.parameter import IntegerParameter
from launchbay.tuning.search import GridSearcher, grid, make_searcher, sample
from launchbay.tuning.stopping import hyperband_stops, median_rule_stops, rungs

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")


# -- metrics ------------------------------------------------------------------------------
def test_a_line_gives_the_first_group_of_each_matching_definition():
    compiled = compile_definitions(
        [
            {"Name": "loss", "Regex": r"loss=([0-9.eE+-]+)"},
            {"Name": "acc", "Regex": r"acc: ([0-9.]+)"},
            {"Name": "seen", "Regex": r"[0-9]+(?= samples)"},  # no group: the whole match
        ]
    )
    assert parse_line(compiled, "epoch 3 loss=1.5e-2 acc: 0.9 after 128 samples") == [
        ("loss", 0.015), ("acc", 0.9), ("seen", 128.0),
    ]  # fmt: skip
    assert parse_line(compiled, "loss=nan acc: .") == []  # not finite numbers: skipped
    assert parse_line(compiled, "nothing here") == []


def test_a_bad_definition_is_refused_naming_it():
    with pytest.raises(ConfigurationError, match=r"metric_definitions\[0\]\['Regex'\]"):
        compile_definitions([{"Name": "loss", "Regex": "loss=(["}])
    with pytest.raises(ConfigurationError, match=r"metric_definitions\[1\]"):
        compile_definitions([{"Name": "a", "Regex": "a"}, {"Name": "b"}])


def test_the_recorder_keeps_every_value_in_order_and_a_last_line_only_at_the_end(tmp_path):
    log = tmp_path / "algo-1.log"
    log.write_text("loss=3\nloss=2\nlo")
    clock = iter(range(100))
    recorder = MetricRecorder(
        str(tmp_path / METRICS_FILE), [str(log)], [{"Name": "loss", "Regex": r"loss=(\d+)"}],
        clock=lambda: float(next(clock)),
    )  # fmt: skip
    recorder.open()
    recorder.poll()
    with log.open("a") as f:
        f.write("ss=1")  # a line not ended yet
    recorder.poll()
    reader = MetricsReader(str(tmp_path))
    assert reader.read() and reader.values == {"loss": [3, 2]} and not reader.final
    assert load_metrics(str(tmp_path)) == {"metrics": {"loss": [[1, 3], [1, 2]]}, "final": False}
    recorder.poll(final=True)
    recorder.close()
    assert reader.read() and reader.values == {"loss": [3, 2, 1]} and reader.final
    assert reader.incomplete is None and not reader.read()  # read on from where it stopped
    lines = [json.loads(line) for line in (tmp_path / METRICS_FILE).read_text().splitlines()]
    assert lines == [
        {"time": 0, "values": {"loss": []}},  # every metric named at the start
        {"time": 1, "values": {"loss": [3, 2]}},  # one batch per chunk read
        {"time": 2, "values": {"loss": [1]}},
        {"final": True},
    ]
    assert load_metrics(str(tmp_path / "missing")) == {"metrics": {}, "final": False}


def test_the_metrics_file_of_an_earlier_version_is_still_read(tmp_path):
    stored = {"metrics": {"loss": [[5.0, 3.0], [6.0, 2.5]]}, "final": True}
    (tmp_path / "metrics.json").write_text(json.dumps(stored))
    assert load_metrics(str(tmp_path)) == stored
    reader = MetricsReader(str(tmp_path))
    assert reader.read() and reader.values == {"loss": [3.0, 2.5]} and reader.final


@pytest.mark.parametrize(
    "regex, part",
    [
        (r"(a+)+b", "(a+)+"),
        (r"(.*)*", "(.*)*"),
        (r"(\w+\s?)+$", r"(\w+\s?)+"),
        (r"x((a|b)*c){2,}", "((a|b)*c){2,}"),
        (r"loss=([0-9.eE+-]+)", None),
        (r"(ab)+|[(a+)]+|(a+)?|\(a+\)+", None),
    ],
)
def test_a_regex_that_repeats_a_repetition_is_found(regex, part):
    assert nested_quantifier(regex) == part


def test_a_backtracking_metric_regex_warns_when_the_estimator_and_the_tuner_are_made(src):
    bad = [{"Name": "loss", "Regex": r"loss=(\d+)"}, {"Name": "acc", "Regex": r"(.*)*acc"}]
    with pytest.warns(BacktrackingRegexWarning, match=r"metric_definitions\[1\].*'\(\.\*\)\*'"):
        estimator = PyTorch(
            entry_point="train.py", source_dir=str(src), role=None, instance_type="local_process",
            instance_count=1, framework_version="2.8.0", py_version="py312",
            metric_definitions=bad,
        )  # fmt: skip
    with pytest.warns(BacktrackingRegexWarning, match=r"\(a\+\)\+.* s of matching"):
        HyperparameterTuner(
            estimator, "loss", {"lr": ContinuousParameter(0.01, 1.0)},
            metric_definitions=[{"Name": "loss", "Regex": r"(a+)+loss=(\d+)"}],
        )  # fmt: skip


# -- the median stopping rule and Hyperband ----------------------------------------------------
def test_the_median_rule_compares_with_the_median_of_running_averages_at_the_same_step():
    finished = [[4.0, 2.0, 1.0], [2.0, 2.0, 2.0], [9.0]]
    # step 2: running averages 3.0 and 2.0 (the third trial never reached step 2): median 2.5
    assert median_rule_stops([1.0, 2.6], finished, "Minimize")
    assert not median_rule_stops([1.0, 2.4], finished, "Minimize")
    assert median_rule_stops([1.0, 2.4], finished, "Maximize")
    # step 1: averages 4, 2, 9 -> median 4
    assert not median_rule_stops([4.0], finished, "Minimize")  # equal is not worse
    assert not median_rule_stops([1.0, 1.0, 1.0, 9.0], finished, "Minimize")  # none at step 4
    assert not median_rule_stops([5.0], [], "Minimize")
    assert not median_rule_stops([], finished, "Minimize")


def test_hyperband_rungs_and_successive_halving():
    assert rungs(1, 27) == [1, 3, 9]
    assert rungs(2, 10) == [2, 6]
    assert rungs(5, 5) == []
    others = [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [3.0, 3.0, 3.0]]
    # at rung 1, four trials: the best 4 // 3 = 1 goes on
    assert not hyperband_stops([0.5], others, "Minimize", 1, 27)
    assert hyperband_stops([1.5], others, "Minimize", 1, 27)
    assert not hyperband_stops([3.5], others, "Maximize", 1, 27)
    assert not hyperband_stops([9.0, 9.0], others, "Minimize", 1, 27)  # step 2: no rung
    assert not hyperband_stops([9.0], others[:1], "Minimize", 1, 27)  # fewer than 3 at the rung
    assert hyperband_stops([0.1] * 27, others, "Minimize", 1, 27)  # the budget is spent


# -- sampling and grids -----------------------------------------------------------------
def test_each_scale_samples_within_its_range_and_on_its_scale():
    rng = random.Random(0)
    log = [sample(ContinuousParameter(1e-4, 1.0, "Logarithmic"), rng) for _ in range(4000)]
    assert all(1e-4 <= v <= 1.0 for v in log)
    below = sum(v < 1e-2 for v in log) / len(log)  # the geometric middle
    assert 0.45 < below < 0.55
    linear = [sample(ContinuousParameter(0.0, 1.0, "Linear"), rng) for _ in range(4000)]
    assert 0.45 < sum(v < 0.5 for v in linear) / len(linear) < 0.55
    reverse = [sample(ContinuousParameter(0.9, 0.9999, "ReverseLogarithmic"), rng) for _ in range(4000)]  # fmt: skip
    assert all(0.9 <= v <= 0.9999 for v in reverse)
    assert 0.45 < sum(v > 1 - 10**-2.5 for v in reverse) / len(reverse) < 0.55  # 1 - x log-uniform
    ints = [sample(IntegerParameter(1, 1000, "Logarithmic"), rng) for _ in range(4000)]
    assert all(isinstance(v, int) and 1 <= v <= 1000 for v in ints)
    assert 0.4 < sum(v <= 31 for v in ints) / len(ints) < 0.6
    assert {sample(IntegerParameter(2, 4), rng) for _ in range(200)} == {2, 3, 4}
    assert sample(CategoricalParameter(["a"]), rng) == "a"


def test_grid_enumerates_every_combination_first_range_slowest():
    ranges = {"a": CategoricalParameter(["x", "y"]), "b": CategoricalParameter([1, 2, 3])}
    assert list(grid(ranges)) == [
        {"a": "x", "b": "1"}, {"a": "x", "b": "2"}, {"a": "x", "b": "3"},
        {"a": "y", "b": "1"}, {"a": "y", "b": "2"}, {"a": "y", "b": "3"},
    ]  # fmt: skip


def _plan(src, strategy, ranges, max_jobs, seed, objective_type="Minimize"):
    estimator = PyTorch(
        entry_point="train.py", source_dir="src", role=None, instance_type="local_process",
        instance_count=1, framework_version="2.8.0", py_version="py312",
    )  # fmt: skip
    return HyperparameterTuner(
        estimator, "loss", ranges, metric_definitions=[{"Name": "loss", "Regex": "loss=(.*)"}],
        strategy=strategy, max_jobs=max_jobs, objective_type=objective_type, random_seed=seed,
    ).tuning_plan(job_name="t-units")  # fmt: skip


def test_a_grid_searcher_ends_after_every_combination_and_values_encode(src):
    ranges = {"opt": CategoricalParameter(["sgd", "adam"]), "bs": CategoricalParameter([8, 16])}
    plan = _plan(src, "Grid", ranges, None, None)
    searcher = make_searcher(plan)
    assert isinstance(searcher, GridSearcher)
    asked = [searcher.ask() for _ in range(5)]
    assert asked[-1] is None
    encoded = [plan.encode(values) for _, values, _ in asked[:4]]
    assert encoded[0] == {"opt": '"sgd"', "bs": '"8"'}  # as SageMaker passes framework values
    assert len({tuple(sorted(e.items())) for e in encoded}) == 4


def test_random_search_is_reproducible_with_random_seed(src):
    ranges = {"lr": ContinuousParameter(1e-4, 1.0, "Logarithmic")}
    draws = [
        [make_searcher(_plan(src, "Random", ranges, 5, seed)).ask()[1]["lr"] for _ in range(1)]
        for seed in (1, 1, 2)
    ]
    assert draws[0] == draws[1] != draws[2]


def _known(values) -> float:
    """A known function to minimise: its best is lr = 10**-2.5, momentum = 0.3, opt = adam."""
    penalty = 0.0 if values["opt"] == "adam" else 0.5
    return (math.log10(values["lr"]) + 2.5) ** 2 + 4 * (values["momentum"] - 0.3) ** 2 + penalty


def _best_after(src, strategy, seed, trials) -> float:
    ranges = {
        "lr": ContinuousParameter(1e-5, 1.0, "Logarithmic"),
        "momentum": ContinuousParameter(0.0, 0.99),
        "opt": CategoricalParameter(["sgd", "adam", "rmsprop"]),
    }
    searcher = make_searcher(_plan(src, strategy, ranges, trials, seed))
    best = math.inf
    for _ in range(trials):
        _, values, key = searcher.ask()
        value = _known(values)
        searcher.tell(key, value)
        best = min(best, value)
    return best


def test_bayesian_finds_a_better_minimum_than_random_on_a_known_function(src):
    """The measurement docs/tuning.md reports: 30 trials, 10 seeds each."""
    seeds = range(10)
    random_best = [_best_after(src, "Random", s, 30) for s in seeds]
    bayes_best = [_best_after(src, "Bayesian", s, 30) for s in seeds]
    print(
        f"\nbest of 30 trials over 10 seeds (0 is the optimum): Random median "
        f"{statistics.median(random_best):.4f} mean {statistics.mean(random_best):.4f}; "
        f"Bayesian (Optuna TPE) median {statistics.median(bayes_best):.4f} "
        f"mean {statistics.mean(bayes_best):.4f}; Bayesian better in "
        f"{sum(b < r for b, r in zip(bayes_best, random_best, strict=True))}/10 seeds"
    )
    assert statistics.median(bayes_best) < statistics.median(random_best)


# -- issue 31 item 14: a warm start from a damaged parent record --------------------------
def _parent_record(home, trials, **extra) -> str:
    from launchbay.tuning.local import record_path

    path = record_path("t-parent")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    record = {
        "HyperParameterTuningJobName": "t-parent", "HyperParameterTuningJobStatus": "Completed",
        "LocalTrainingJobs": trials, **extra,
    }  # fmt: skip
    with open(path, "w") as f:
        f.write(json.dumps(record))  # NaN is written as NaN, as a hand edit might
    return path


def _trial(number: int, value, lr="0.5", **extra) -> dict:
    return {
        "TrainingJobName": f"t-parent-{number:03d}", "TrainingJobStatus": "Completed",
        "TunedHyperParameters": {"lr": lr},
        "FinalHyperParameterTuningJobObjectiveMetric": {"MetricName": "loss", "Value": value},
        **extra,
    }  # fmt: skip


def _warm_plan(src):
    estimator = PyTorch(
        entry_point="train.py", source_dir="src", role=None, instance_type="local_process",
        instance_count=1, framework_version="2.8.0", py_version="py312",
    )  # fmt: skip
    return HyperparameterTuner(
        estimator, "loss", {"lr": ContinuousParameter(0.01, 1.0)},
        metric_definitions=[{"Name": "loss", "Regex": "loss=(.*)"}], strategy="Bayesian",
        max_jobs=4, warm_start_config=WarmStartConfig(
            WarmStartTypes.IDENTICAL_DATA_AND_ALGORITHM, {"t-parent"}),
    ).tuning_plan(job_name="t-child")  # fmt: skip


@pytest.mark.parametrize(
    ("damage", "warned"),
    [
        ("string-value", "Value': 'abc'"),
        ("nan-value", "Value': nan"),
        ("missing-metric-value", None),
        ("metric-not-a-mapping", "FinalHyperParameterTuningJobObjectiveMetric = 'abc'"),
        ("values-not-a-mapping", "TunedHyperParameters = ['lr']"),
        ("trial-not-a-mapping", "LocalTrainingJobs[1] of"),
        ("best-with-a-string-value", "BestTrainingJob of"),
    ],
)
def test_a_damaged_warm_start_parent_record_skips_bad_entries_with_a_warning(
    src, home, caplog, damage, warned
):
    from launchbay.tuning.local import _warm_start

    good = _trial(0, 0.25)
    bad = {
        "string-value": _trial(1, "abc"),
        "nan-value": _trial(1, float("nan")),
        "missing-metric-value": {
            k: v for k, v in _trial(1, 0.5).items()
            if k != "FinalHyperParameterTuningJobObjectiveMetric"
        },
        "metric-not-a-mapping": {**_trial(1, 0.5), "FinalHyperParameterTuningJobObjectiveMetric": "abc"},
        "values-not-a-mapping": {**_trial(1, 0.5), "TunedHyperParameters": ["lr"]},
        "trial-not-a-mapping": "t-parent-001",
        "best-with-a-string-value": _trial(1, 0.5),
    }[damage]  # fmt: skip
    extra = {"BestTrainingJob": _trial(1, "0.5")} if damage.startswith("best") else {}
    path = _parent_record(home, [good, bad], **extra)
    plan = _warm_plan(src)
    with caplog.at_level("WARNING", logger="launchbay.tuning.local"):
        history, best = _warm_start(plan)
        searcher = make_searcher(plan, history)  # Optuna sees only usable trials
    assert searcher.ask() is not None
    assert history[0] == {
        "definition": None, "values": {"lr": "0.5"}, "value": 0.25, "name": "t-parent-000"
    }  # fmt: skip
    assert all(h["value"] is None or math.isfinite(h["value"]) for h in history)
    if warned is None:
        assert len(history) == 2 and history[1]["value"] is None  # a trial without a value
    else:
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert any(path in w and warned in w for w in warnings), warnings
    assert best is None or best["TrainingJobName"] != "t-parent-001"


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ('["not", "a", "mapping"]', "'list' object has no attribute 'get'"),
        ('{"LocalTrainingJobs": {"a": 1}}', "LocalTrainingJobs = {'a': 1}, not a list"),
        (json.dumps({"HyperParameterTuningJobStatus": "InProgress",
                     "LocalClient": f"{socket.gethostname()}:999999999",
                     "LocalTrainingJobs": [{"TrainingJobName": "x"}]}),
         "KeyError: 'TrainingJobStatus'"),
    ],
)  # fmt: skip
def test_a_warm_start_parent_record_that_is_not_a_record_is_refused_naming_it(
    src, home, record, expected
):
    from launchbay.errors import JobError
    from launchbay.tuning.local import _warm_start

    path = _parent_record(home, [])
    with open(path, "w") as f:
        f.write(record)
    with pytest.raises(JobError) as caught:
        _warm_start(_warm_plan(src))
    assert f"its record {path} is damaged" in str(caught.value)
    assert expected in str(caught.value)
