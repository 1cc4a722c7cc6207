"""The ``launchbay.cli`` package: one lookup says what a job name is, and its modules meet
only through public names (issue 33 items 5 and 7).

The lookup is driven with stand-ins for the backends it is handed (the registry's
answer), so each step of its order is seen alone, with what it asks and what it
does not; ``tests/cli/test_cli_tuning.py`` and ``test_cli_moto.py`` run the same
commands against real local jobs and the moto server.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

import launchbay
from launchbay.backends import registry
from launchbay.backends.base import InProcessBackend
from launchbay.cli import lookup
from launchbay.cli.lookup import TrainingJobFound, TuningJobFound, find_job, job_backend
from launchbay.errors import ConfigurationError, JobError
from launchbay.tuning.local import LocalTuningJob
from launchbay.tuning.sagemaker import TuningJob

ROOT = Path(__file__).resolve().parents[2]


class _Client:
    """SageMaker's client as far as DescribeHyperParameterTuningJob goes."""

    def __init__(self, tuning_jobs: dict[str, dict[str, Any]]) -> None:
        self.tuning_jobs = tuning_jobs
        self.asked: list[str] = []

    def describe_hyper_parameter_tuning_job(self, HyperParameterTuningJobName: str) -> Any:
        self.asked.append(HyperParameterTuningJobName)
        if HyperParameterTuningJobName not in self.tuning_jobs:
            error = {"Error": {"Code": "ResourceNotFound", "Message": "not found"}}
            raise ClientError(error, "DescribeHyperParameterTuningJob")
        return self.tuning_jobs[HyperParameterTuningJobName]


class _Session:
    def __init__(self, region: str | None, client: _Client) -> None:
        self.boto_region_name = region
        self.sagemaker_client = client


class _Remote:
    """A remote backend: knows the training jobs it is given, counts what it is asked."""

    name = "sagemaker"

    def __init__(self, training: dict[str, dict[str, Any]], session: _Session) -> None:
        self.training = training
        self.session = session
        self.described: list[str] = []

    def describe(self, name: str) -> dict[str, Any]:
        self.described.append(name)
        if name not in self.training:
            raise JobError(f"no training job {name!r}")
        return self.training[name]


@pytest.fixture
def remote(monkeypatch, tmp_path):
    """The registry answers with a remote backend (no local job has the name)."""
    monkeypatch.setenv("LAUNCHBAY_HOME", str(tmp_path / "home"))
    client = _Client({"tune-1": {"HyperParameterTuningJobName": "tune-1"}})
    backend = _Remote({"train-1": {"TrainingJobName": "train-1"}}, _Session("us-east-1", client))
    asked: list[str] = []

    def backend_for_job(name: str) -> Any:
        asked.append(name)
        return backend

    monkeypatch.setattr(lookup.registry, "backend_for_job", backend_for_job)
    return backend, client, asked


def test_a_sagemaker_training_job_is_described_once(remote):
    backend, client, _ = remote
    found = find_job("train-1")
    assert isinstance(found, TrainingJobFound) and found.backend is backend
    assert found.describe() == {"TrainingJobName": "train-1"}
    assert backend.described == ["train-1"]  # the lookup's description is the command's
    assert client.asked == []  # a training job of that name: no tuning job is asked for


def test_a_sagemaker_tuning_job_when_no_training_job_has_the_name(remote):
    backend, client, _ = remote
    found = find_job("tune-1")
    assert isinstance(found, TuningJobFound)
    assert isinstance(found.job, TuningJob) and found.job.name == "tune-1"
    assert found.description == {"HyperParameterTuningJobName": "tune-1"}
    assert backend.described == ["tune-1"] and client.asked == ["tune-1"]


def test_no_job_of_either_kind_is_the_training_jobs_error(remote):
    with pytest.raises(JobError, match="no training job 'nothing'"):
        find_job("nothing")


def test_logs_ask_for_the_training_backend_only(remote):
    backend, client, _ = remote
    assert job_backend("tune-1") is backend
    assert backend.described == [] and client.asked == []


def test_without_a_region_sagemaker_is_not_asked(remote):
    backend, client, _ = remote
    backend.session.boto_region_name = None
    for find in (find_job, job_backend):
        with pytest.raises(JobError, match="SageMaker was not asked because no AWS region"):
            find("train-1")
    assert backend.described == [] and client.asked == []


def test_a_local_tuning_record_is_the_answer_before_any_backend(remote, tmp_path):
    _, _, asked = remote
    record = tmp_path / "home" / "tuning" / "t-local" / "tuning.json"
    record.parent.mkdir(parents=True)
    record.write_text("{}")
    found = find_job("t-local")
    assert isinstance(found, TuningJobFound) and isinstance(found.job, LocalTuningJob)
    assert found.description is None and asked == []
    assert job_backend("t-local") is remote[0]  # logs: only training jobs have them


def test_a_local_training_job_is_not_described_by_the_lookup(monkeypatch, tmp_path):
    monkeypatch.setenv("LAUNCHBAY_HOME", str(tmp_path / "home"))
    local = registry.create("local_process")
    assert isinstance(local, InProcessBackend)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the lookup asked the local backend")

    for method in ("describe", "events", "stop", "list_jobs"):
        monkeypatch.setattr(local, method, refuse)
    monkeypatch.setattr(lookup.registry, "backend_for_job", lambda name: local)
    found = find_job("train-here")
    assert isinstance(found, TrainingJobFound) and found.backend is local
    assert found.description is None


@pytest.mark.parametrize("name", ["../tuning/t", "a/b", "", "-x", "x" * 64])
def test_a_name_that_is_no_job_name_is_refused_first(monkeypatch, tmp_path, name):
    """Also before a tuning record is looked for: the name never becomes a path."""
    monkeypatch.setenv("LAUNCHBAY_HOME", str(tmp_path / "home"))
    record = tmp_path / "home" / "tuning" / "t" / "tuning.json"
    record.parent.mkdir(parents=True)
    record.write_text("{}")

    def refuse(name: str) -> Any:
        raise AssertionError("the registry was asked")

    monkeypatch.setattr(lookup.registry, "backend_for_job", refuse)
    for find in (find_job, job_backend):
        with pytest.raises(ConfigurationError, match="JOB"):
            find(name)


# -- the package's walls ----------------------------------------------------------------------


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


def _private_imports(path: Path, *, of_cli: bool) -> list[str]:
    """``from X import _name`` in ``path``: every one (``of_cli=False``), or those from
    ``launchbay.cli`` and its modules; as ``file:line name``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ImportFrom) or node.level:
            continue
        module = node.module or ""
        if of_cli and not (module == "launchbay.cli" or module.startswith("launchbay.cli.")):
            continue
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                if _is_module(f"{module}.{alias.name}"):
                    continue  # a private module: test_architecture.py's rules say who may
                found.append(f"{path.name}:{node.lineno} {alias.name}")
    return found


def test_no_private_name_crosses_a_file_of_the_cli():
    """Inside the package no module imports another's private name, and nothing outside
    imports one of the package's: each module's interface is its public names."""
    package = Path(launchbay.__file__).parent / "cli"
    inside = sorted(package.glob("*.py"))
    assert {p.name for p in inside} >= {"__init__.py", "parser.py", "jobs.py", "lookup.py"}
    found = [line for p in inside for line in _private_imports(p, of_cli=False)]
    outside = [
        p
        for folder in ("sdk", "tests", "tools", "bench")
        for p in sorted((ROOT / folder).rglob("*.py"))
        if package not in p.parents
    ]
    found += [line for p in outside for line in _private_imports(p, of_cli=True)]
    assert found == []


def test_the_private_import_scan_sees_one(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "from launchbay.cli.console import _Formatter, info\n"
        "from launchbay.cli import _x\n"
        "from launchbay._home import local_home\n"
        "from os import _exit\n"
        "from launchbay import _home\n"
        "def f():\n    from launchbay.cli.jobs import _load_spec\n"
    )
    assert _private_imports(module, of_cli=True) == [
        "m.py:1 _Formatter",
        "m.py:2 _x",
        "m.py:7 _load_spec",
    ]
    assert len(_private_imports(module, of_cli=False)) == 4
