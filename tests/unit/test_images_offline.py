"""launchbay.images without the Docker engine: names, input errors (every check happens
before the engine is asked anything) and the context hash. The tests against the engine are
in tests/docker/test_images.py; the build and push displays are tested with every other
display in tests/unit/test_display.py.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from launchbay import cli, images
from launchbay.errors import ConfigurationError, DockerError, MissingDependencyError
from launchbay.images import base, context, push

# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("framework", "version", "processor", "py"),
    [
        ("pytorch", "2.13.0", "cpu", "py311"),
        ("pytorch", "2.3", "gpu", "py310"),
        ("tensorflow", "2.16.1", "gpu", "py311"),
        ("tensorflow", "2.14.0rc1", "cpu", "py312"),
    ],
)
def test_names_round_trip(framework, version, processor, py):
    name = images.image_name(framework, version, processor, py)
    assert name == f"launchbay/{framework}-training:{version}-{processor}-{py}"
    spec = images.parse_image_name(name)
    assert spec == images.ImageSpec(framework, version, processor, py)
    assert spec.name == name
    command = images.build_command(name)
    assert command.startswith(
        f"launchbay images build {framework} --framework-version {version} --processor {processor}"
    )
    assert ("--py-version" in command) == (py != "py311")
    # The command parses, and parses back to the same image.
    args = cli.build_parser().parse_args(command.split()[1:])
    assert images.image_name(args.framework, args.framework_version, args.processor,
                             args.py_version) == name  # fmt: skip


@pytest.mark.parametrize(
    ("name", "py"),
    [
        ("launchbay/tensorflow-training:1.15.2-cpu-py3", "py37"),
        ("launchbay/tensorflow-training:2.1-gpu-py2", "py36"),
        ("launchbay/pytorch-training:1.2.0-cpu-py3", "py36"),
        ("launchbay/pytorch-training:1.5.0-cpu-py3", "py36"),
    ],
)
def test_old_versions_loose_python_tag_builds_on_an_explicit_python(name, py):
    """SageMaker's old images say py3/py2; the command picks a Python and keeps the name."""
    spec = images.parse_image_name(name)
    assert spec is not None and spec.py_version == name.rsplit("-", 1)[1]
    command = images.build_command(name)
    assert command.endswith(f"--py-version {py} --tag {name}")
    args = cli.build_parser().parse_args(command.split()[1:])
    assert args.tag == name and args.py_version == py
    assert images.image_name(
        args.framework, args.framework_version, args.processor, args.py_version
    )


def test_the_default_name_is_the_estimators():
    assert (
        images.image_name("pytorch", "2.13.0", "cpu")
        == "launchbay/pytorch-training:2.13.0-cpu-py311"
    )
    assert images.build_command("launchbay/pytorch-training:2.13.0-cpu-py311") == (
        "launchbay images build pytorch --framework-version 2.13.0 --processor cpu"
    )


@pytest.mark.parametrize(
    "name",
    [
        "python:3.11-slim",
        "launchbay/mxnet-training:1.9-cpu-py311",
        "launchbay/pytorch-training:2.13.0-tpu-py311",
        "launchbay/pytorch-training:2.13.0-cpu",
        "launchbay/pytorch-inference:2.13.0-cpu-py311",
        "123456789012.dkr.ecr.us-west-2.amazonaws.com/launchbay/pytorch-training:2.13.0-cpu-py311",
        "",
    ],
)
def test_other_names_are_not_ours(name):
    assert images.parse_image_name(name) is None
    assert images.build_command(name) is None


def test_ecr_hosts():
    assert images.ecr_registry("123456789012.dkr.ecr.us-west-2.amazonaws.com") == (
        "123456789012",
        "us-west-2",
    )
    assert images.ecr_registry("123456789012.dkr.ecr-fips.us-east-1.amazonaws.com") == (
        "123456789012",
        "us-east-1",
    )
    assert images.ecr_registry("123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn") == (
        "123456789012",
        "cn-north-1",
    )
    for host in ("127.0.0.1:5000", "ghcr.io", "12345.dkr.ecr.us-west-2.amazonaws.com", ""):
        assert images.ecr_registry(host) is None


# --------------------------------------------------------------------------- input errors


@pytest.mark.parametrize(
    ("kwargs", "argument", "accepted"),
    [
        ({"framework": "mxnet"}, "framework", "'pytorch' or 'tensorflow'"),
        ({"processor": "tpu"}, "processor", "'cpu' or 'gpu'"),
        ({"framework_version": "2.13 .0"}, "framework_version", "2.13.0"),
        ({"framework_version": ""}, "framework_version", "2.13.0"),
        ({"py_version": "3.11"}, "py_version", "py311"),
        ({"wheelhouse": "/no/such/dir"}, "wheelhouse", "existing directory"),
        ({"ca_bundle": "/no/such/ca.pem"}, "ca_bundle", "PEM"),
        ({"tag": "Not A Tag"}, "tag", "Docker image reference"),
        ({"base_image": "  "}, "base_image", "image reference"),
        ({"build_args": {"1BAD": "x"}}, "build_args", "names of build arguments"),
        ({"offline": True}, "offline", "wheelhouse"),
    ],
)
def test_build_input_errors(kwargs, argument, accepted, monkeypatch, tmp_path):
    # Every check happens before the engine is asked anything.
    _no_engine(monkeypatch, tmp_path)
    call = {"framework": "pytorch", "framework_version": "2.13.0", "processor": "cpu", **kwargs}
    with pytest.raises(ConfigurationError) as info:
        images.build_image(call.pop("framework"), call.pop("framework_version"), **call)
    message = str(info.value)
    assert info.value.argument == argument
    assert argument in message and accepted in message


def test_empty_wheelhouse_is_refused(tmp_path, monkeypatch):
    _no_engine(monkeypatch, tmp_path)
    (tmp_path / "notes.txt").write_text("no wheels here")
    with pytest.raises(ConfigurationError, match=r"wheelhouse=.*It holds none"):
        images.build_image("pytorch", "2.13.0", wheelhouse=tmp_path)


def test_name_input_errors():
    with pytest.raises(ConfigurationError, match=r"framework='jax'.*'pytorch' or 'tensorflow'"):
        images.image_name("jax", "0.4", "cpu")
    with pytest.raises(ConfigurationError, match=r"processor='cuda'.*'cpu' or 'gpu'"):
        images.image_name("pytorch", "2.13.0", "cuda")


@pytest.mark.parametrize(
    ("image", "repository", "argument"),
    [
        ("launchbay/x:1", "", "repository"),
        ("launchbay/x:1", "reg.example/ns/x@sha256:abc", "repository"),
        ("", "reg.example/ns/x", "image"),
        ("launchbay/x:1", "reg.example/NS/x", "repository"),
    ],
)
def test_push_input_errors(image, repository, argument, monkeypatch, tmp_path):
    _no_engine(monkeypatch, tmp_path)
    with pytest.raises(ConfigurationError) as info:
        images.push_image(image, repository)
    assert info.value.argument == argument


def _no_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Point DOCKER_HOST at no engine: a call that reached it would raise DockerError instead."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")


def test_cli_usage_errors_exit_2(capsys):
    assert cli.main(["images", "build", "pytorch", "--framework-version", "2.13.0",
                     "--wheelhouse", "/no/such/dir"]) == 2  # fmt: skip
    assert "wheelhouse='/no/such/dir'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        cli.main(["images", "build", "mxnet", "--framework-version", "1"])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        cli.main(["images", "push", "launchbay/x:1"])  # --repository is required
    assert info.value.code == 2


def test_missing_docker_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "docker", None)  # `import docker` raises ImportError
    with pytest.raises(MissingDependencyError, match=r"launchbay\[docker\]"):
        images.docker_client()


def test_unreachable_engine_says_how_to_start_it(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(DockerError) as info:
        images.docker_client()
    message = str(info.value)
    assert "no-engine.sock" in message and "dockerd" in message and "DOCKER_HOST" in message
    assert cli.main(["images", "push", "launchbay/x:1", "--repository", "reg.example/x"]) == 1


# --------------------------------------------------------------------------- the context hash


def test_the_context_hash_follows_every_input(tmp_path):
    big = tmp_path / "torch-0-py3-none-any.whl"
    big.write_bytes(b"w")

    def digest(dockerfile: bytes = b"FROM x", args: dict | None = None, wheel: Path = big) -> str:
        files = context._Context()
        files.add("Dockerfile", dockerfile)
        files.add(f"wheelhouse/{wheel.name}", wheel)
        return files.digest(args or {"A": "1"})

    first = digest()
    assert digest() == first
    assert digest(dockerfile=b"FROM y") != first
    assert digest(args={"A": "2"}) != first
    big.write_bytes(b"changed")
    assert digest() != first


# --------------------------------------------------------------------------- push, base


@pytest.mark.parametrize(
    ("repository", "split"),
    [
        ("123456789012.dkr.ecr.us-west-2.amazonaws.com/launchbay/x",
         ("123456789012.dkr.ecr.us-west-2.amazonaws.com", "launchbay/x")),
        ("127.0.0.1:5000/ns/x:v1", ("127.0.0.1:5000", "ns/x:v1")),
        ("localhost/x", ("localhost", "x")),
        ("launchbay/x", ("", "launchbay/x")),  # Docker Hub: no host
        ("x", ("", "x")),
    ],
)  # fmt: skip
def test_a_repository_splits_into_registry_and_path(repository, split):
    assert push.split_repository(repository) == split


def test_the_base_image_is_named_after_its_python_and_suite():
    assert base.base_image_name("bookworm", "3.11") == "launchbay/python-base:3.11-bookworm"


def test_this_machines_apt_sources_serve_its_suite():
    # `launchbay images base` builds from these files (tests/docker make the image with them).
    codename = base._os_release().get("VERSION_CODENAME")
    assert codename, "this machine's /etc/os-release names no suite"
    sources = base._apt_sources(codename)
    assert sources and all(Path(s).is_file() for s in sources)
    assert base._apt_sources("no-such-suite") == []
    assert re.fullmatch(r"3\.\d+", base._debian_python(codename) or "")


def test_the_image_errors_are_launchbays():
    from launchbay import errors

    assert images.ImageError is errors.ImageError
    assert images.ImageBuildError is errors.ImageBuildError
    assert images.ImagePushError is errors.ImagePushError
    for cls in (errors.ImageBuildError, errors.ImagePushError):
        assert issubclass(cls, (errors.ImageError, errors.DockerError, RuntimeError))
    error = errors.ImageBuildError("m", tag="t", step="s", log_tail=iter(["a"]))
    assert (error.tag, error.step, error.log_tail) == ("t", "s", ["a"])


def test_every_public_name_is_on_the_package():
    for name in images.__all__:
        assert getattr(images, name) is not None, name


# --------------------------------------------------------------------------- GPU without CUDA base


@pytest.mark.parametrize("value", ["no", "true", ""])
def test_install_efa_accepts_only_0_or_1(value):
    with pytest.raises(ConfigurationError) as info:
        images.build_image(
            "pytorch", "2.14.1", "gpu", build_args={"INSTALL_EFA": value}, client=object()
        )
    message = str(info.value)
    assert info.value.argument == "build_args"
    assert f"INSTALL_EFA={value}" in message
    assert "INSTALL_EFA=0" in message and "INSTALL_EFA=1" in message
