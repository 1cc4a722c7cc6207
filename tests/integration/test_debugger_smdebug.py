"""SageMaker Debugger in ``local_process`` with the real smdebug (tools/smdebug_wheel.py).

A 2 hosts x 2 processes ``torch_distributed`` job builds smdebug's PyTorch hook from the
debughookconfig.json launchbay writes (``SMDEBUG_CONFIG_FILE_PATH``) in every rank; the
tensors of every host land in ``<S3OutputPath>/<job>/debug-output``, where
``smdebug.trials.create_trial`` reads them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from factories import estimator as make_estimator
from job_outputs import archive_members, rank_reports
from launchbay import CollectionConfig, ConfigurationError, DebuggerHookConfig
from launchbay.pytorch import PyTorch

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "local_process_scripts"


def estimator(out: Path, hook: DebuggerHookConfig | None) -> PyTorch:
    return make_estimator(
        "smdebug_ddp.py",
        SCRIPTS,
        out=out,
        instance_count=2,
        distribution={"torch_distributed": {"enabled": True, "processes_per_host": 2}},
        debugger_hook_config=hook,
    )


@pytest.mark.parametrize(("include_workers", "workers"), [("all", 4), ("one", 1)])
def test_smdebug_hook_in_every_rank_and_trial_lists_workers(
    home, tmp_path, include_workers, workers
):
    from smdebug.trials import create_trial

    out = tmp_path / "out"
    hook = DebuggerHookConfig(
        hook_parameters={"include_workers": include_workers, "save_interval": "1"},
        collection_configs=[CollectionConfig("weights"), CollectionConfig("losses")],
    )
    est = estimator(out, hook)
    est.fit(logs=False)
    job = est.latest_training_job
    path = est.latest_job_debugger_artifacts_path()
    # smdebug reads a plain path (or s3://), not file://: v2's create_trial(path) idiom works.
    assert path == str(out / job.name / "debug-output")

    reports = rank_reports(archive_members(out / job.name / "output" / "output.tar.gz"))
    assert sorted(reports) == [0, 1, 2, 3]
    for rank, report in reports.items():
        # Every rank built its hook from the host's own config file, and knows its rank.
        host_dir = Path(home) / "jobs" / job.name / f"algo-{rank // 2 + 1}"
        assert report["config_file"] == str(host_dir / "input/config/debughookconfig.json")
        assert report["out_dir"] == str(host_dir / "output/tensors")
        assert report["worker"] == f"worker_{rank}"
        assert report["save_all_workers"] is (include_workers == "all")

    trial = create_trial(str(out / job.name / "debug-output"))
    assert sorted(trial.workers()) == [f"worker_{r}" for r in range(workers)]
    assert trial.steps() == [0, 1, 2, 3]
    weight = trial.tensor("Linear_weight")
    assert weight.value(3).shape == (1, 4)
    assert sorted(weight.workers(3)) == [f"worker_{r}" for r in range(workers)]
    assert trial.tensor_names(collection="losses")


def test_debugger_artifacts_path_without_hook_and_before_fit(home, tmp_path):
    est = estimator(tmp_path / "out", None)
    with pytest.raises(ConfigurationError, match=r"Invalid latest_training_job=None\."):
        est.latest_job_debugger_artifacts_path()
