"""The backend interface (an abc) and the one registry that finds a backend by name."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap

import pytest

from launchbay.backends import registry
from launchbay.backends.base import Backend
from launchbay.errors import ConfigurationError


def run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_registry_imports_a_backend_only_when_it_is_used():
    out = run_python(
        """
        import json, sys
        from launchbay.backends import backend_for, registry
        loaded = lambda: sorted(m for m in sys.modules if m.startswith("launchbay.backends."))
        before = loaded()
        names = registry.names()
        docker = backend_for("local_gpu", None)
        print(json.dumps([before, names, loaded(), type(docker).__name__, docker.gpu,
                          "boto3" in sys.modules, "docker" in sys.modules]))
        """
    )
    before, names, after, cls, gpu, boto3, docker_pkg = json.loads(out)
    assert before == [  # the events and their follower load when a job is followed
        "launchbay.backends.base",
        "launchbay.backends.plan",
        "launchbay.backends.registry",
    ]
    assert names == ["local_process", "docker", "ray", "sagemaker"]
    assert "launchbay.backends.docker" in after and "launchbay.backends.sagemaker" not in after
    assert (cls, gpu, boto3, docker_pkg) == ("DockerBackend", True, False, False)


@pytest.mark.parametrize(
    ("instance_type", "name", "cls"),
    [
        ("local_process", "local_process", "ProcessBackend"),
        ("local", "docker", "DockerBackend"),
        ("local_gpu", "docker", "DockerBackend"),
        ("ml.m5.xlarge", "sagemaker", "SageMakerBackend"),
        (None, "sagemaker", "SageMakerBackend"),  # instance groups of ml.* types
    ],
)
def test_each_instance_type_goes_to_its_backend(instance_type, name, cls):
    assert registry.backend_name_for(instance_type) == name
    backend = registry.backend_for(instance_type, None)
    assert type(backend).__name__ == cls and backend.name == name
    assert isinstance(backend, Backend)
    if cls == "DockerBackend":
        assert backend.gpu is (instance_type == "local_gpu")


def test_an_unknown_instance_type_names_the_value_and_the_accepted_ones():
    with pytest.raises(ConfigurationError) as caught:
        registry.backend_for("gpu_local", None)
    message = str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert "instance_type" in message and "'gpu_local'" in message
    for accepted in ("local_process", "local", "local_gpu", "ml.* type"):
        assert accepted in message


def test_an_unknown_backend_name_names_the_value_and_the_registered_ones():
    with pytest.raises(ConfigurationError) as caught:
        registry.create("kubernetes")
    message = str(caught.value)
    assert "backend" in message and "'kubernetes'" in message
    assert "local_process, docker, ray, sagemaker" in message


def test_every_registered_backend_implements_the_whole_interface_under_its_name():
    for name in registry.names():
        cls = registry.backend_class(name)
        assert issubclass(cls, Backend) and cls.name == name
        assert not getattr(cls, "__abstractmethods__", None), cls


def test_a_backend_missing_a_method_cannot_be_made():
    class NoStop(Backend):
        name = "nostop"

        def run(self, request):
            raise NotImplementedError

        def describe(self, name):
            return {}

        def events(self, name, *, lines=True, status=True, follow=True):
            return iter(())

        def list_jobs(self, max_results=20, status=None):
            return []

        def owns(self, name):
            return False

    with pytest.raises(TypeError, match="abstract method.*stop"):
        NoStop()
    assert NoStop.__abstractmethods__ == frozenset({"stop"})


class MemoryBackend(Backend):
    """A registered backend of this test module: owns the names it ran."""

    name = "memory"

    def __init__(self, session=None):
        self.session = session

    def run(self, request):
        raise NotImplementedError

    def describe(self, name):
        return {"TrainingJobName": name, "TrainingJobStatus": "Completed"}

    def events(self, name, *, lines=True, status=True, follow=True):
        from launchbay.backends.events import JobEnded, JobHosts, LogLines, Notice

        yield JobHosts(name, ("algo-1", "algo-2"))
        if lines:
            yield LogLines((("algo-1", "hello"), ("algo-2", "world")))
        yield Notice(f"[memory] {name} ran in memory")
        if follow:
            yield JobEnded(self.describe(name))

    def stop(self, name):
        return None

    def list_jobs(self, max_results=20, status=None):
        return []

    def owns(self, name):
        return name.startswith("mem-")


def test_a_backend_gives_events_and_the_one_follower_prints_them():
    """wait() and print_logs() are the base class's: a backend only yields what happened."""
    out = io.StringIO()
    backend = MemoryBackend()
    assert "wait" not in vars(MemoryBackend) and "print_logs" not in vars(MemoryBackend)
    backend.output_stream = lambda stream=None: stream or out
    final = backend.wait("mem-1", logs="All")
    assert final == {"TrainingJobName": "mem-1", "TrainingJobStatus": "Completed"}
    assert out.getvalue() == ("algo-1 | hello\nalgo-2 | world\n[memory] mem-1 ran in memory\n")
    quiet = io.StringIO()
    backend.output_stream = lambda stream=None: stream or quiet
    backend.wait("mem-1", logs="None")
    assert quiet.getvalue() == "[memory] mem-1 ran in memory\n"
    logs = io.StringIO()
    backend.print_logs("mem-1", stream=logs)
    assert logs.getvalue().startswith("algo-1 | hello\n")


def test_a_registered_backend_is_asked_before_sagemaker(monkeypatch, tmp_path):
    monkeypatch.setattr(registry, "_BACKENDS", dict(registry._BACKENDS))
    from launchbay.backends import plan

    monkeypatch.setattr(plan, "INSTANCE_TYPE_BACKENDS", dict(plan.INSTANCE_TYPE_BACKENDS))
    monkeypatch.setattr(registry, "_loaded", {})
    monkeypatch.setenv("LAUNCHBAY_HOME", str(tmp_path))
    registry.register("memory", f"{__name__}:MemoryBackend", instance_types=("memory",))
    assert registry.names() == ("local_process", "docker", "ray", "memory", "sagemaker")
    assert type(registry.backend_for("memory")) is MemoryBackend
    assert type(registry.backend_for_job("mem-1")) is MemoryBackend
    assert registry.backend_for_job("other").name == "sagemaker"
    with pytest.raises(ConfigurationError, match="'memory:'"):
        registry.register("broken", "memory:")


def test_a_local_job_belongs_to_the_backend_of_its_instance_type(monkeypatch, tmp_path):
    """Both local backends share $LAUNCHBAY_HOME/jobs; the job's instance type picks one."""
    monkeypatch.setenv("LAUNCHBAY_HOME", str(tmp_path))
    for job, resources in {
        "in-docker": {"InstanceType": "local_gpu", "InstanceCount": 1},
        "in-process": {"InstanceType": "local_process", "InstanceCount": 2},
        "in-groups": {"InstanceGroups": [{"InstanceType": "local", "InstanceCount": 1}]},
    }.items():
        (tmp_path / "jobs" / job).mkdir(parents=True)
        status = {"TrainingJobName": job, "TrainingJobStatus": "Completed",
                  "ResourceConfig": resources}  # fmt: skip
        (tmp_path / "jobs" / job / "status.json").write_text(json.dumps(status))
    assert registry.backend_for_job("in-docker").name == "docker"
    assert registry.backend_for_job("in-groups").name == "docker"
    assert registry.backend_for_job("in-process").name == "local_process"
    assert registry.backend_for_job("elsewhere").name == "sagemaker"
    listed = {
        name: sorted(j["TrainingJobName"] for j in registry.create(name).list_jobs())
        for name in ("local_process", "docker")
    }
    assert listed == {"local_process": ["in-process"], "docker": ["in-docker", "in-groups"]}


def test_a_runner_file_names_a_live_process_and_never_a_reused_pid(monkeypatch, tmp_path):
    from launchbay.backends.local import detached as _detached

    monkeypatch.setenv("LAUNCHBAY_HOME", str(tmp_path))
    assert _detached.runner_pid("nobody") is None
    _detached.register("mine")  # this process, with its start time
    assert _detached.runner_pid("mine") == os.getpid()
    pid_file = tmp_path / "cli" / "mine.pid"
    pid, started = pid_file.read_text().split()
    pid_file.write_text(f"{pid} {int(started) + 1}\n")  # the pid now names another process
    assert _detached.runner_pid("mine") is None
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _detached.register("gone", gone.pid)
    assert _detached.runner_pid("gone") is None


def test_only_backends_whose_jobs_live_in_this_process_detach_and_accept_stops():
    """The local-only operations are their own interface, not hooks every backend inherits."""
    from launchbay.backends.base import InProcessBackend

    remote = registry.create("sagemaker")
    assert not isinstance(remote, InProcessBackend)
    assert not hasattr(remote, "run_detached") and not hasattr(remote, "accept_stops")
    for name in ("local_process", "docker"):
        assert issubclass(registry.backend_class(name), InProcessBackend)


def test_log_files_are_read_in_bounded_pieces(tmp_path):
    """A follower reads a host's log file a chunk at a time, every byte once, and holds at
    most MAX_LOG_LINE bytes of a line: a longer line comes in pieces of that size (cut
    between characters), a carriage return ends a line (a progress bar's redraws, of which
    a read shows the last), and a last line without a line end comes only once the host
    has stopped writing (``final``)."""
    from launchbay.backends.local.layout import JobLayout
    from launchbay.backends.local.logs import _READ_CHUNK, LogFiles
    from launchbay.runtime.names import MAX_LOG_LINE

    layout = JobLayout(str(tmp_path), ("algo-1",))
    os.makedirs(layout.logs_dir)
    long_line = "x" + "é" * _READ_CHUNK  # 2 bytes a character: cuts fall inside characters
    with open(layout.log_file("algo-1"), "w", encoding="utf-8", newline="") as f:
        f.write("first\r\n" + long_line + "\nbar 1\rbar 2\runfinished")
    files = LogFiles(layout)
    got = []
    while lines := files.read("algo-1", final=False):
        got.extend(lines)
    assert got[0] == "first"
    assert got[-1] == "bar 2"  # "bar 1" was drawn over in the same read
    pieces = got[1:-1]
    assert "".join(pieces) == long_line
    assert len(pieces) == -(-len(long_line.encode()) // MAX_LOG_LINE)
    assert all(len(p.encode()) <= MAX_LOG_LINE for p in pieces)
    assert files.read("algo-1", final=True) == ["unfinished"]
    assert files.read("algo-1", final=True) == []


def test_a_carriage_return_and_newline_split_between_reads_end_one_line(tmp_path):
    from launchbay.backends.local.layout import JobLayout
    from launchbay.backends.local.logs import _READ_CHUNK, LogFiles

    layout = JobLayout(str(tmp_path), ("algo-1",))
    os.makedirs(layout.logs_dir)
    with open(layout.log_file("algo-1"), "wb") as f:
        f.write(b"a" * (_READ_CHUNK - 1) + b"\r\nnext\n")
    files = LogFiles(layout)
    first = files.read("algo-1", final=False)
    assert "".join(first) == "a" * (_READ_CHUNK - 1)
    assert files.read("algo-1", final=False) == ["next"]


def test_the_follower_ends_the_events_when_printing_fails():
    """A backend's event stream holds things (a local job's SIGINT handler): a printing error
    must end it at once, not whenever the traceback holding it is dropped."""
    from launchbay.backends.events import JobHosts, LogLines
    from launchbay.backends.follow import show_events

    ended = []

    def events():
        try:
            yield JobHosts("job", ("algo-1",))
            yield LogLines((("algo-1", "line"),))
            yield LogLines((("algo-1", "never read"),))
        finally:
            ended.append(True)

    class Broken(io.StringIO):
        def write(self, text):
            raise RuntimeError("the stream is gone")

    with pytest.raises(RuntimeError, match="the stream is gone"):
        show_events(events(), Broken())
    assert ended == [True]


def test_importing_an_estimator_class_loads_no_backend_spec_or_config_module():
    """What an estimator needs only when one is made, or a job run, loads then: the plan and
    the backends, the job-spec modules, the SageMaker defaults files' reader (import time,
    bench/import_time.py)."""
    out = run_python(
        """
        import json, sys
        from launchbay.pytorch import PyTorch
        from launchbay.tensorflow import TensorFlow
        print(json.dumps(sorted(m for m in sys.modules if m.startswith("launchbay"))))
        """
    )
    loaded = json.loads(out)
    assert not [m for m in loaded if m.startswith("launchbay.backends")], loaded
    assert "launchbay.jobspec" not in loaded and "launchbay._sagemaker_config" not in loaded
    assert "launchbay.runtime.code" not in loaded
