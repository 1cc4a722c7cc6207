"""The ``LAUNCHBAY_*`` variables between a local backend and a host's runtime: one writer
(``RuntimeSettings.to_environ``) beside the one reader (``RuntimeSettings.from_environ``),
and no backend spells a name of its own (issue 21)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from launchbay.runtime.errors import TrainingSetupError
from launchbay.runtime.names import ENV
from launchbay.runtime.settings import DEFAULT_STARTUP_TIMEOUT, RuntimeSettings

BACKENDS = Path(__file__).resolve().parents[2] / "sdk" / "launchbay" / "backends"
#: Every setting the runtime settings carry; the job-only network variables (ENV.JOB_ONLY)
#: are written by the host runners themselves, for their own job's hosts only.
EVERY = {v for k, v in vars(ENV).items() if not k.startswith("_") and isinstance(v, str)}
NAMES = EVERY - set(ENV.JOB_ONLY)


def test_what_the_backends_write_the_runtime_reads_back():
    settings = RuntimeSettings(
        local_process=True,
        shared_dir="/jobs/j/shared",
        host_addresses={"algo-1": "127.0.0.1", "algo-2": "127.0.0.1"},
        master_port=29500,
        grace_seconds=2.5,
        install_requirements="1",
        startup_timeout=60.0,
        standins=True,
        hosts_file="/jobs/j/hosts",
        ray=True,
    )
    environ = settings.to_environ()
    assert set(environ) == NAMES
    assert RuntimeSettings.from_environ(environ) == settings


def test_defaults_are_not_written_so_the_callers_values_pass_through():
    environ = RuntimeSettings().to_environ()
    assert environ == {ENV.GRACE_SECONDS: "10"}
    caller = {ENV.STARTUP_TIMEOUT: "30", ENV.INSTALL_REQUIREMENTS: "1"}
    read = RuntimeSettings.from_environ({**caller, **environ})
    assert (read.startup_timeout, read.install_requirements) == (30.0, "1")
    assert DEFAULT_STARTUP_TIMEOUT != 30.0


def test_the_writer_refuses_what_the_reader_would():
    with pytest.raises(ValueError, match="LAUNCHBAY_GRACE_SECONDS"):
        RuntimeSettings(grace_seconds=float("nan")).to_environ()
    with pytest.raises(TrainingSetupError, match="LAUNCHBAY_MASTER_PORT"):
        RuntimeSettings.from_environ({ENV.MASTER_PORT: "70000"})


def test_no_backend_spells_a_runtime_variable_itself():
    spelled = []
    for path in sorted(BACKENDS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in NAMES:
                spelled.append(f"{path.name}:{node.lineno} {node.value}")
    assert spelled == [], "use launchbay.runtime.names.ENV and RuntimeSettings.to_environ"
