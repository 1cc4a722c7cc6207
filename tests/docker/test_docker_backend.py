"""``instance_type="local"``: real containers on the real Docker engine, one per instance.

Every job goes through ``fit()`` of an estimator with ``LAUNCHBAY_HOME`` in a
temporary directory, in the CPU PyTorch image ``launchbay images build`` makes
(the ``pytorch_image`` fixture builds it once, or reuses it). The training
scripts are the ones the ``local_process`` tests run (``local_process_scripts``),
plus ``scripts/`` here.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml

from factories import MPI_2X2, TORCH_2X2, checkpointing_job, estimator
from job_outputs import (
    archive_members,
    assert_no_docker_leftovers,
    check_mpi_job,
    check_sigterm_checkpoints,
    check_torch_ddp_job,
    containers_left,
    docker_leftovers,
    file_uri,
    hosts_started,
)
from job_processes import fit_in_child, interrupt
from launchbay import Estimator, ImageNotFoundError, JobFailedError
from launchbay.backends.docker import LABEL_CLIENT, LABEL_JOB, LABEL_JOB_DIR, DockerBackend
from launchbay.pytorch import PyTorch

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

HERE = Path(__file__).parent
SCRIPTS = HERE.parent / "integration" / "local_process_scripts"
DOCKER_SCRIPTS = HERE / "scripts"
BUCKET = "docker-mode-data"


def generic_estimator(framework_version, entry_point, source_dir=DOCKER_SCRIPTS, *, out, **kwargs):
    """A generic ``Estimator`` of the CPU PyTorch image of ``framework_version`` for 2 containers,
    output under ``out`` (``kwargs`` win)."""
    options = dict(
        image_uri=f"launchbay/pytorch-training:{framework_version}-cpu-py311",
        role=None,
        instance_type="local",
        instance_count=2,
        entry_point=entry_point,
        source_dir=str(source_dir),
        output_path=file_uri(out),
    )
    return Estimator(**(options | kwargs))


def image_not_found(est) -> ImageNotFoundError:
    """The ``ImageNotFoundError`` that ``est.fit(logs=False)`` raises."""
    with pytest.raises(ImageNotFoundError) as caught:
        est.fit(logs=False)
    return caught.value


def make_bucket(s3, name):
    s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    return name


# --------------------------------------------------------------------------- distributed


def test_torch_distributed_2x2_in_two_containers(home, tmp_path, docker_pytorch, docker_client):
    out = tmp_path / "out"
    est = docker_pytorch("torch_ddp.py", distribution=TORCH_2X2, out=out)
    est.fit(logs=False)
    check_torch_ddp_job(est, out)
    assert_no_docker_leftovers(docker_client, home / "jobs" / est.latest_training_job.name)


def test_mpi_2x2_with_mpi4py_over_ssh(home, tmp_path, docker_pytorch, docker_client):
    out = tmp_path / "out"
    est = docker_pytorch("mpi_check.py", distribution=MPI_2X2, out=out)
    est.fit(logs=False)
    job = est.latest_training_job
    check_mpi_job(job, out)
    log = (home / "jobs" / job.name / "logs" / "algo-1.log").read_text()
    assert "mpirun" in log  # the master ran mpirun over SSH, not one local process per rank
    assert_no_docker_leftovers(docker_client, home / "jobs" / job.name)
    # Each host's published rank environment (it holds the job's secrets) is gone.
    job_dir = home / "jobs" / job.name
    assert not list(job_dir.glob("algo-*/output/ranks/host-env.json"))
    assert os.stat(job_dir).st_mode & 0o777 == 0o700


# --------------------------------------------------------------------------- failure, Ctrl-C


def test_rank_failure_in_algo_2_fails_fast_and_leaves_nothing(
    home, tmp_path, docker_pytorch, docker_client
):
    est = docker_pytorch(
        "torch_ddp.py",
        distribution={"torch_distributed": {"enabled": True, "processes_per_host": 2}},
        hyperparameters={"steps": 40, "fail-rank": 3, "fail-stamp": "/opt/ml/output/data/failed"},
        output_path=file_uri(tmp_path / "out"),
    )
    with pytest.raises(JobFailedError) as caught:
        est.fit(logs=False)
    raised_at = time.time()
    error = caught.value
    directory = home / "jobs" / error.job_name
    failed_at = float((directory / "algo-2" / "output" / "data" / "failed").read_text())
    assert raised_at - failed_at < 15
    head = error.reason[:1024]
    assert "algo-2" in head
    assert "Rank 3" in head or "rank 3" in head
    assert "ValueError: boom from rank 3" in head
    assert (
        "boom from rank 3" in (tmp_path / "out" / error.job_name / "output" / "failure").read_text()
    )
    assert_no_docker_leftovers(docker_client, directory)


def test_sigint_to_the_client_tears_everything_down(home, tmp_path, docker_options, docker_client):
    checkpoints = tmp_path / "checkpoints"
    name = "docker-sigint-job"
    directory = home / "jobs" / name
    job = checkpointing_job(checkpoints, tmp_path / "out", "/opt/ml/model", **docker_options)
    with fit_in_child(job, name, lambda: hosts_started(directory), 120, dict(os.environ)) as child:
        output = interrupt(child, within=15, timeout=60)
    assert child.returncode == 42, output
    assert output.count("restored checkpoints: ['old.ckpt']") == 2, output
    assert_no_docker_leftovers(docker_client, directory)
    check_sigterm_checkpoints(checkpoints)  # each runtime got SIGTERM and its script checkpointed
    status = json.loads((directory / "status.json").read_text())
    assert status["TrainingJobStatus"] == "Stopped"


def test_an_exception_in_the_client_still_removes_the_containers(
    home, tmp_path, docker_pytorch, docker_client
):
    est = docker_pytorch(
        "checkpoint_on_sigterm.py",
        hyperparameters={"marker": "/opt/ml/model"},
        output_path=file_uri(tmp_path / "out"),
    )
    job = est.fit(wait=False) or est.latest_training_job
    directory = home / "jobs" / job.name
    deadline = time.monotonic() + 120
    while not (directory / "algo-2" / "model" / "started-algo-2").exists():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    containers, _ = docker_leftovers(docker_client, directory, timeout=0)
    assert len(containers) == 2
    job.stop()  # what a client's `finally:` or error handler does
    assert job.describe()["TrainingJobStatus"] == "Stopped"
    assert_no_docker_leftovers(docker_client, directory)


# --------------------------------------------------------------------------- networking


@pytest.fixture
def host_listener(host_gateway):
    """A TCP server on this machine's side of the Docker bridge (never on all addresses);
    yields ``address:port``: outside every job network, reachable from a container that
    is not isolated."""
    address = host_gateway
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((address, 0))
    server.listen(16)
    stop = threading.Event()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"{address}:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    server.close()


@pytest.mark.parametrize("isolated", [True, False], ids=["isolated", "open"])
def test_network_isolation(
    home, tmp_path, framework_version, docker_client, host_listener, isolated
):
    est = generic_estimator(
        framework_version,
        "net_probe.py",
        hyperparameters={"outside": host_listener},
        enable_network_isolation=isolated,
        out=tmp_path / "out",
    )
    est.fit(logs=False)
    members = archive_members(
        tmp_path / "out" / est.latest_training_job.name / "output" / "output.tar.gz"
    )
    for host in ("algo-1", "algo-2"):
        probe = json.loads(members[f"probe-{host}.json"])
        assert probe["peer"] == "ok", probe  # the job's hosts reach each other either way
        if isolated:
            assert probe["outside"] != "ok", probe
        else:
            assert probe["outside"] == "ok", probe


# --------------------------------------------------------------------------- data in and out


@pytest.fixture
def open_session(host_gateway, moto_at):
    """A moto server on the containers' gateway address only (the job's containers and this
    process reach it there; nothing else on the machine's networks does), and its Session."""
    from launchbay.session import Session

    moto_at(host_gateway)
    return Session()


def test_channels_from_file_and_s3_and_outputs_to_both(
    home, tmp_path, docker_pytorch, docker_client, open_session
):
    s3 = open_session.s3_client
    bucket = make_bucket(s3, f"{BUCKET}-channels")
    for key, body in {"train/a.csv": "1,2", "train/sub/b.csv": "3,4"}.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body.encode())
    local = tmp_path / "local-data"
    (local / "nested").mkdir(parents=True)
    (local / "x.txt").write_text("local x")
    (local / "nested" / "y.txt").write_text("local y")
    single = tmp_path / "single.txt"
    single.write_text("one file")
    inputs = {
        "local": file_uri(local),
        "single": file_uri(single),
        "remote": f"s3://{bucket}/train",
    }
    expected = {
        "local": {"x.txt": "local x", os.path.join("nested", "y.txt"): "local y"},
        "single": {"single.txt": "one file"},
        "remote": {"a.csv": "1,2", os.path.join("sub", "b.csv"): "3,4"},
    }
    for output_path in (f"s3://{bucket}/out", file_uri(tmp_path / "out")):
        est = docker_pytorch(
            "channels.py",
            output_path=output_path,
            sagemaker_session=open_session,
        )
        est.fit(inputs, logs=False)
        name = est.latest_training_job.name
        if output_path.startswith("s3://"):
            body = s3.get_object(Bucket=bucket, Key=f"out/{name}/output/output.tar.gz")["Body"]
            members = archive_members(body.read())
            model = s3.get_object(Bucket=bucket, Key=f"out/{name}/output/model.tar.gz")["Body"]
            assert "weights-algo-2.txt" in archive_members(model.read())
        else:
            members = archive_members(tmp_path / "out" / name / "output" / "output.tar.gz")
            assert "weights-algo-1.txt" in archive_members(
                tmp_path / "out" / name / "output" / "model.tar.gz"
            )
        for host in ("algo-1", "algo-2"):
            assert json.loads(members[f"channels-{host}.json"]) == expected
        compose = (home / "jobs" / name / "docker-compose.yaml").read_text()
        assert "testing" not in compose  # the credentials' names only, never their values
        assert (
            "AWS_SECRET_ACCESS_KEY" in yaml.safe_load(compose)["services"]["algo-1"]["environment"]
        )
        assert_no_docker_leftovers(docker_client, home / "jobs" / name)
    # The data itself was never copied into a job directory, and the source stayed as it was.
    assert sorted(p.name for p in local.rglob("*")) == ["nested", "x.txt", "y.txt"]


def test_code_on_s3_is_fetched_by_the_containers(
    home, tmp_path, docker_pytorch, docker_client, open_session
):
    s3 = open_session.s3_client
    bucket = make_bucket(s3, f"{BUCKET}-code")
    est = docker_pytorch(
        "channels.py",
        instance_count=1,
        code_location=f"s3://{bucket}/code",
        output_path=file_uri(tmp_path / "out"),
        sagemaker_session=open_session,
    )
    est.fit(logs=False)
    name = est.latest_training_job.name
    host_dir = home / "jobs" / name / "algo-1"
    hyperparameters = json.loads(
        (host_dir / "input" / "config" / "hyperparameters.json").read_text()
    )
    assert json.loads(hyperparameters["sagemaker_submit_directory"]).startswith(
        f"s3://{bucket}/code/"
    )
    assert not (host_dir / "code").exists()  # nothing unpacked here: the container fetched it
    assert "hello from algo-1" in (home / "jobs" / name / "logs" / "algo-1.log").read_text()


# --------------------------------------------------------------------------- contract, compose


def test_compose_file_reproduces_the_run_with_docker_compose(
    home, tmp_path, docker_pytorch, docker_client
):
    est = docker_pytorch("channels.py", output_path=file_uri(tmp_path / "out"))
    data = tmp_path / "data"
    data.mkdir()
    (data / "d.txt").write_text("data")
    est.fit({"train": file_uri(data)}, logs=False)
    directory = home / "jobs" / est.latest_training_job.name
    compose = directory / "docker-compose.yaml"
    document = yaml.safe_load(compose.read_text())
    assert sorted(document["services"]) == ["algo-1", "algo-2"]
    # Each host's share of this machine's CPUs, as the job's containers had it.
    cpusets = [document["services"][h]["cpuset"] for h in ("algo-1", "algo-2")]
    assert set(",".join(cpusets).split(",")) == {str(c) for c in os.sched_getaffinity(0)}
    for host in ("algo-1", "algo-2"):
        shutil.rmtree(directory / host / "model")
        (directory / host / "model").mkdir()
    run = subprocess.run(
        [
            "docker-compose",
            "-f",
            str(compose),
            "-p",
            "lbcompose",
            "up",  # until both hosts exit (aborting at the first exit could cut the other short)
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        assert run.returncode == 0, run.stdout + run.stderr
        # Each container's whole output, as the engine kept it (compose's attached stream
        # can miss the lines of a container that exits while it attaches).
        logs = subprocess.run(
            ["docker-compose", "-f", str(compose), "-p", "lbcompose", "logs", "--no-color"],
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        assert "hello from algo-1" in logs and "hello from algo-2" in logs, logs
        for host in ("algo-1", "algo-2"):
            assert (directory / host / "model" / f"weights-{host}.txt").read_text() == host
    finally:
        subprocess.run(
            ["docker-compose", "-f", str(compose), "-p", "lbcompose", "down", "-v"],
            capture_output=True,
            timeout=120,
        )


def test_missing_launchbay_image_names_the_build_command(home, tmp_path, docker_client):
    est = estimator(
        "channels.py",
        SCRIPTS,
        instance_type="local",
        instance_count=2,
        framework_version="9.9.9",
        py_version="py311",
        out=tmp_path / "out",
    )
    refused = image_not_found(est)
    message = str(refused)
    assert "launchbay/pytorch-training:9.9.9-cpu-py311" in message
    assert "launchbay images build pytorch --framework-version 9.9.9 --processor cpu" in message
    assert not (home / "jobs").exists() or not any((home / "jobs").iterdir())


@pytest.mark.parametrize(
    ("framework", "version", "py", "command"),
    [
        (
            "pytorch",
            "1.9",
            "py38",
            "launchbay images build pytorch --framework-version 1.9 --processor cpu --py-version py38",
        ),
        (
            "tensorflow",
            "1.15.2",
            "py3",
            "launchbay images build tensorflow --framework-version 1.15.2 --processor cpu "
            "--py-version py37 --tag launchbay/tensorflow-training:1.15.2-cpu-py3",
        ),
    ],
)
def test_old_framework_version_names_its_image_and_how_to_build_it(
    home, tmp_path, docker_client, framework, version, py, command
):
    """SDK v2 notebooks with old versions: local Docker mode says which image, and the ways out."""
    from launchbay.tensorflow import TensorFlow

    cls = {"pytorch": PyTorch, "tensorflow": TensorFlow}[framework]
    est = estimator(
        "channels.py",
        SCRIPTS,
        framework=cls,
        instance_type="local",
        framework_version=version,
        py_version=py,
        out=tmp_path / "out",
    )
    refused = image_not_found(est)
    message = str(refused)
    assert f"launchbay/{framework}-training:{version}-cpu-{py}" in message
    assert command in message
    assert "image_uri=" in message


def test_local_gpu_without_a_gpu_runtime_fails_clearly_and_leaves_nothing(
    home, tmp_path, framework_version, docker_client, fake_gpus
):
    # As if this machine had 4 GPUs (a fake nvidia-smi); its engine has no NVIDIA runtime.
    # Without any GPU, local_gpu is refused before anything is made (tests/unit/test_gpu_split.py).
    fake_gpus(4)
    est = generic_estimator(
        framework_version,
        "channels.py",
        source_dir=SCRIPTS,
        instance_type="local_gpu",
        instance_count=2,  # SDK v2 refuses more than one local_gpu instance
        out=tmp_path / "out",
    )
    with pytest.raises(JobFailedError) as caught:
        est.fit(logs=False)
    assert "gpu" in caught.value.reason.lower()
    directory = home / "jobs" / caught.value.job_name
    services = yaml.safe_load((directory / "docker-compose.yaml").read_text())["services"]
    devices = {h: s["deploy"]["resources"]["reservations"]["devices"] for h, s in services.items()}
    assert devices == {  # each container its own GPUs (issue 16), never all of them
        "algo-1": [{"driver": "nvidia", "device_ids": ["0", "1"], "capabilities": ["gpu"]}],
        "algo-2": [{"driver": "nvidia", "device_ids": ["2", "3"], "capabilities": ["gpu"]}],
    }
    assert_no_docker_leftovers(docker_client, directory)


def test_files_written_as_root_are_given_back_to_the_caller(
    tmp_path, docker_pytorch, docker_client, monkeypatch
):
    # As if the caller were user 65534 (these tests run as root; so does the engine), with
    # its job directories where that user can reach them.
    home = Path(tempfile.mkdtemp(prefix="launchbay-owner-", dir="/tmp"))
    os.chmod(home, 0o777)
    monkeypatch.setenv("LAUNCHBAY_HOME", str(home))
    monkeypatch.setattr(os, "getuid", lambda: 65534)
    monkeypatch.setattr(os, "getgid", lambda: 65534)
    try:
        est = docker_pytorch("channels.py", output_path=file_uri(tmp_path / "out"))
        est.fit(logs=False)
        directory = home / "jobs" / est.latest_training_job.name
        for written in (
            directory / "algo-1" / "model" / "weights-algo-1.txt",
            directory / "algo-2" / "output" / "data" / "channels-algo-2.json",
        ):
            assert written.stat().st_uid == 65534
        os.chmod(home / "jobs", 0o777)
        removal = subprocess.run(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "rm",
                "-rf",
                str(directory),
            ],
            capture_output=True,
            text=True,
        )
        assert removal.returncode == 0, removal.stderr  # that user can delete all of it
        assert not directory.exists()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_containers_of_a_client_that_died_are_removed_by_the_next_job(
    home, tmp_path, framework_version, docker_client
):
    """Unless the job's watchdog holds its name: then they are the watchdog's to stop.

    The watchdog of a job whose client died takes the job's name lock and stops
    its containers, keeping their output as the job's logs; a Docker job
    started meanwhile (another notebook, another test) must not remove them
    under it. CI saw a finished job lose its last log lines that way.
    """
    dead = subprocess.Popen(["true"])
    dead.wait()
    jobs = tmp_path / "jobs"
    (jobs / ".locks").mkdir(parents=True)
    image = f"launchbay/pytorch-training:{framework_version}-cpu-py311"
    # Another process holds the job's name lock, as its watchdog does while it finishes the
    # job; taken first, so that no other test's job start sweeps what is made below.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT);"
            " fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()",
            str(jobs / ".locks" / "orphan-test.lock"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        orphan = docker_client.containers.create(
            image,
            ["sleep", "300"],
            name="launchbay-orphan-test-algo-1",
            labels={
                LABEL_CLIENT: f"{socket.gethostname()}:{dead.pid}",
                LABEL_JOB: "orphan-test",
                LABEL_JOB_DIR: str(jobs / "orphan-test"),
            },
        )
        orphan.start()
        # A network whose containers are gone already (its client was killed while the
        # network was being removed in the background) is the dead client's too.
        network = docker_client.networks.create(
            "launchbay-orphan-test-net", labels=dict(orphan.labels), check_duplicate=True
        )
        DockerBackend().remove_orphans()
        orphan.reload()
        assert orphan.status == "running"
        assert docker_client.networks.list(ids=[network.id])
        holder.communicate("", timeout=30)  # the watchdog lets the name go
        # This sweep, or that of a job another test starts meanwhile, removes them now.
        DockerBackend().remove_orphans()
        assert not containers_left(docker_client, 0, name="launchbay-orphan-test")
        assert not docker_client.networks.list(ids=[network.id])
    finally:
        holder.kill()
        holder.wait()
        with __import__("contextlib").suppress(Exception):
            orphan.remove(force=True)
        with __import__("contextlib").suppress(Exception):
            network.remove()


def test_a_client_that_exits_right_after_fit_leaves_no_container_and_no_network(
    home, tmp_path, framework_version, docker_client
):
    """fit() returns while the engine removes the job's exited containers and its network
    (0.05-0.2 s); the client's exit waits for it."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "noop.py").write_text("print('noop')\n")
    code = (
        "from launchbay.pytorch import PyTorch\n"
        f"est = PyTorch(entry_point='noop.py', source_dir={str(source)!r}, role=None,\n"
        "    instance_type='local', instance_count=2,\n"
        f"    framework_version={framework_version!r}, py_version='py311',\n"
        f"    output_path={file_uri(tmp_path / 'out')!r})\n"
        "est.fit(job_name='exit-right-after-fit', logs=False)\n"
        "print(est.latest_training_job.describe()['TrainingJobStatus'], flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=os.environ
    )
    assert done.returncode == 0 and "Completed" in done.stdout, done.stderr
    # Looked at once, the moment the client has exited.
    assert not [n for n in docker_client.networks.list() if n.name.endswith("exit-right-after-fit")]
    assert not docker_client.containers.list(
        all=True, filters={"label": f"{LABEL_JOB_DIR}={home / 'jobs' / 'exit-right-after-fit'}"}
    )


# --------------------------------------------------------------------------- a SageMaker image


@pytest.fixture(scope="module")
def toolkit_image(docker_client, base_image, tmp_path_factory):
    """``tests/docker/toolkit_image``: sagemaker-training 5.1.4 and a script, no launchbay."""
    import hashlib

    source = HERE / "toolkit_image"
    digest = hashlib.sha256()
    for name in ("Dockerfile", "train.py"):
        digest.update((source / name).read_bytes())
    digest.update(base_image.encode())
    tag = f"launchbay-test/toolkit:{digest.hexdigest()[:12]}"
    if docker_client.images.list(name=tag):
        return tag
    context = tmp_path_factory.mktemp("toolkit-context")
    for name in ("Dockerfile", "train.py"):
        shutil.copy(source / name, context / name)
    bundle = os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"
    shutil.copy(bundle, context / "ca-bundle.crt")
    docker_client.images.build(
        path=str(context), tag=tag, buildargs={"BASE_IMAGE": base_image}, rm=True
    )
    return tag


def test_an_image_built_for_sagemaker_with_the_toolkit_runs_unchanged(
    home, tmp_path, docker_client, toolkit_image
):
    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.csv").write_text("1,2\n")
    (data / "more.csv").write_text("3,4\n")

    def estimator(**hyperparameters):
        return Estimator(
            image_uri=toolkit_image,
            role=None,
            instance_type="local",
            instance_count=2,
            hyperparameters=hyperparameters,
            output_path=file_uri(tmp_path / "out"),
        )

    est = estimator(epochs=3)
    est.fit({"train": file_uri(data)}, logs=False)
    name = est.latest_training_job.name
    model = archive_members(tmp_path / "out" / name / "output" / "model.tar.gz")
    for host in ("algo-1", "algo-2"):
        seen = json.loads(model[f"seen-{host}.json"])
        assert seen == {
            "epochs": 3,
            "current_host": host,
            "hosts": ["algo-1", "algo-2"],
            "channels": ["train"],
            "train_files": ["more.csv", "rows.csv"],
            "model_dir": "/opt/ml/model",
            "job_name": name,
        }
    assert_no_docker_leftovers(docker_client, home / "jobs" / name)

    failing = estimator(fail="yes")
    with pytest.raises(JobFailedError) as caught:
        failing.fit({"train": file_uri(data)}, logs=False)
    # The toolkit's own failure file is the reason, as on SageMaker; the failing
    # host's last lines (the traceback) come with the error.
    assert caught.value.reason.startswith("AlgorithmError: ExecuteUserScriptError")
    assert "RuntimeError: toolkit script failed on purpose" in "\n".join(caught.value.log_tail)
    assert "toolkit script failed on purpose" in str(caught.value)
    assert_no_docker_leftovers(docker_client, home / "jobs" / caught.value.job_name)


def test_the_same_job_name_again_at_once_keeps_its_own_containers_and_network(
    home, tmp_path, docker_pytorch, docker_client
):
    """The first job's containers and network are removed in the background, by the ids it
    made them with: the second job of that name, started while they go, keeps its own."""
    names = []
    for _ in range(3):
        est = docker_pytorch("channels.py", output_path=file_uri(tmp_path / "out"))
        est.fit(job_name="docker-same-name", logs=False)
        assert est.latest_training_job.describe()["TrainingJobStatus"] == "Completed"
        names.append(est.latest_training_job.name)
    assert names == ["docker-same-name"] * 3
    assert_no_docker_leftovers(docker_client, home / "jobs" / "docker-same-name")


def test_a_leftover_container_and_network_of_the_same_job_name_are_replaced(
    home, tmp_path, framework_version, docker_pytorch, docker_client
):
    image = f"launchbay/pytorch-training:{framework_version}-cpu-py311"
    name = "docker-rerun"
    network = docker_client.networks.create(f"launchbay-{name}", driver="bridge")
    stale = docker_client.containers.create(image, ["true"], name=f"launchbay-{name}-algo-1")
    try:
        est = docker_pytorch("channels.py", output_path=file_uri(tmp_path / "out"))
        est.fit(job_name=name, logs=False)
        assert est.latest_training_job.describe()["TrainingJobStatus"] == "Completed"
        assert_no_docker_leftovers(docker_client, home / "jobs" / name)
        assert not containers_left(docker_client, id=stale.id)
        assert not docker_client.networks.list(ids=[network.id])
    finally:
        for leftover in docker_client.containers.list(all=True, filters={"id": stale.id}):
            leftover.remove(force=True)
        for leftover in docker_client.networks.list(ids=[network.id]):
            leftover.remove()


def test_containers_get_the_request_environment_their_cpus_and_no_credentials_without_s3(
    home, tmp_path, framework_version, docker_client, monkeypatch
):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDCALLER")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "caller-secret")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    est = generic_estimator(
        framework_version,
        "env_dump.py",
        environment={"MY_SETTING": "on"},
        out=tmp_path / "out",
    )
    est.fit(logs=False)
    name = est.latest_training_job.name
    members = archive_members(tmp_path / "out" / name / "output" / "output.tar.gz")
    cpus = sorted(os.sched_getaffinity(0))
    assert len(cpus) >= 2, "this test needs a machine with 2 CPUs or more"
    first = (len(cpus) + 1) // 2
    shares = {"algo-1": cpus[:first], "algo-2": cpus[first:]}
    for host in ("algo-1", "algo-2"):
        env = json.loads(members[f"env-{host}.json"])
        assert env["MY_SETTING"] == "on"
        assert env["TRAINING_JOB_NAME"] == name
        assert env["TRAINING_JOB_ARN"] == (
            f"arn:aws:sagemaker:eu-west-1:000000000000:training-job/{name.lower()}"
        )
        assert env["SM_CURRENT_HOST"] == host
        # Each container runs on its host's share of this machine's CPUs (its cpuset), as
        # a local_process host does, and SM_NUM_CPUS counts it: 2 CPUs give one each.
        assert env["_cpus"] == shares[host], (host, env["_cpus"])
        assert env["SM_NUM_CPUS"] == str(len(shares[host]))
        # Nothing of this job is on S3: the caller's credentials stay out of the containers.
        assert not any(key.startswith("AWS_") for key in env), sorted(env)


def test_an_image_that_is_neither_local_nor_pullable_is_reported(home, tmp_path, docker_client):
    est = generic_estimator(
        "",
        "env_dump.py",
        image_uri="registry.invalid/team/trainer:1",
        instance_count=1,
        out=tmp_path / "out",
    )
    refused = image_not_found(est)
    message = str(refused)
    assert "'registry.invalid/team/trainer:1' is not on this machine's Docker engine" in message
    assert "pulling it failed" in message
    assert refused.argument == "image_uri"


def test_a_custom_checkpoint_local_path_is_mounted_and_saved(
    home, tmp_path, framework_version, docker_client
):
    saved = tmp_path / "checkpoints"
    est = generic_estimator(
        framework_version,
        "ckpt_write.py",
        checkpoint_s3_uri=file_uri(saved),
        checkpoint_local_path="/ckpt/run",
        out=tmp_path / "out",
    )
    est.fit(logs=False)
    for host in ("algo-1", "algo-2"):
        assert (saved / f"step-{host}.ckpt").read_text() == f"{host} wrote /ckpt/run"
