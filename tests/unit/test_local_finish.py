"""Orphan recovery takes a job up from its record and ends it by the live path's rules.

The end itself (checkpoints, outputs, the final record) is ``finish_job``, the one
finishing function; ``tests/integration/test_local_lifecycle.py`` runs both paths
end to end. Here: what a recovered job is, and the outcome its hosts left behind.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factories import local_job
from launchbay.backends.local.finish import orphan_outcome
from launchbay.backends.local.record import LocalJob, from_json

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")


def _recovered(tmp_path: Path, src: Path, **state: object) -> LocalJob:
    """A 2-host job as its dead client left it (``Training``), read back from its record."""
    live, request = local_job(tmp_path, src, "orphan")
    layout = live.layout
    live._set_secondary("Training", "Training in progress.")
    for key, value in state.items():
        setattr(live, key, value)
    live.save()
    record = from_json(json.loads(Path(layout.status_file).read_text()))
    return LocalJob(dict(request), layout, None, 1.0, lambda _job: None, record=record)  # type: ignore[arg-type]


def _report(job: LocalJob, host: str, cause: str, timestamp: float, text: str = "") -> None:
    output = Path(job.layout.host_dir(host)) / "output"
    output.mkdir(parents=True, exist_ok=True)
    document = {"host": host, "cause": cause, "timestamp": timestamp, "exit_code": 1,
                "error": f"{cause} on {host}"}  # fmt: skip
    (output / "launchbay-failure.json").write_text(json.dumps(document))
    if text:
        (output / "failure").write_text(text)


def test_a_recovered_job_is_the_one_its_record_describes(tmp_path, src):
    job = _recovered(tmp_path, src)
    described = job.describe()
    stored = from_json(json.loads(Path(job.layout.status_file).read_text()))
    assert {k: v for k, v in described.items() if k != "LastModifiedTime"} == {
        k: v for k, v in stored.items() if k != "LastModifiedTime"
    }
    assert job.secondary == "Training" and job.ending is None


def test_a_recovered_job_whose_hosts_left_no_failure_of_their_own_failed_with_its_client(
    tmp_path, src
):
    job = _recovered(tmp_path, src, client="somehost:4242")
    assert job.client == "somehost:4242"
    _report(job, "algo-1", "signal", 10.0)  # stopped when the client died: fallout
    status, reason = orphan_outcome(job, started=True)
    assert status == "Failed"
    assert reason is not None and "(somehost:4242) went away before the job ended" in reason


def test_a_host_that_failed_by_itself_is_the_reason_as_on_the_live_path(tmp_path, src):
    job = _recovered(tmp_path, src)
    _report(job, "algo-1", "signal", 20.0)
    _report(job, "algo-2", "exception", 10.0, "ValueError: bad batch on algo-2")
    status, reason = orphan_outcome(job, started=True)
    assert (status, reason) == ("Failed", "AlgorithmError: ValueError: bad batch on algo-2")
    assert job.failed_host == "algo-2"


def test_hosts_that_all_succeeded_complete_unless_the_client_was_already_ending_it(tmp_path, src):
    for ending in (None, ("Completed", None)):
        job = _recovered(tmp_path / str(bool(ending)), src, ending=ending)
        for host in job.hosts:
            (Path(job.layout.host_dir(host)) / "output").mkdir(parents=True, exist_ok=True)
            (Path(job.layout.host_dir(host)) / "output" / "success").touch()
        status, reason = orphan_outcome(job, started=True)
        if ending is None:
            assert (status, reason) == ("Completed", None)
        else:
            assert status == "Failed" and reason is not None
            assert "the end of this local job was not recorded" in reason
            assert "(it was ending Completed)" in reason
