"""``launchbay.images.ensure_image`` against a stand-in engine: a present image is used as it
is, a missing one is built (with this machine's base when it has one, and Horovod's wheel
when asked), and what it says is whole lines. The notebooks' Docker cells call it
(tests/notebooks); the build itself is tested in tests/docker/test_images.py.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from launchbay import images
from launchbay.errors import ConfigurationError, ImageBuildError
from launchbay.images import ensure

TF = "launchbay/tensorflow-training:2.21.0-cpu-py311"
LOCAL_BASE = "launchbay/python-base:3.11-bookworm"


class _API:
    def __init__(self, present: set[str]) -> None:
        self.present = present

    def inspect_image(self, name: str) -> dict[str, Any]:
        import docker.errors

        if name not in self.present:
            raise docker.errors.ImageNotFound(f"No such image: {name}")
        return {"Config": {"Labels": {}}}


class _Engine:
    def __init__(self, *present: str) -> None:
        self.api = _API(set(present))


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The build_image calls ensure_image makes (none reaches an engine)."""
    calls: list[dict[str, Any]] = []

    def build_image(framework: str, version: str, processor: str, **kwargs: Any) -> str:
        calls.append(dict(kwargs, framework=framework, version=version, processor=processor))
        return kwargs["tag"]

    monkeypatch.setattr(ensure, "build_image", build_image)
    monkeypatch.setattr(ensure, "base_image_name", lambda: LOCAL_BASE)
    return calls


def test_a_present_image_is_used_as_it_is(builds):
    out = io.StringIO()
    assert images.ensure_image(TF, client=_Engine(TF), stream=out) == TF
    assert builds == []
    assert out.getvalue() == f"{TF}: on this Docker engine\n"


def test_a_missing_image_is_built_from_this_machines_base(builds):
    out = io.StringIO()
    assert images.ensure_image(TF, client=_Engine(LOCAL_BASE), stream=out) == TF
    (call,) = builds
    assert (call["framework"], call["version"], call["processor"]) == (
        "tensorflow",
        "2.21.0",
        "cpu",
    )
    assert call["tag"] == TF and call["py_version"] == "py311"
    assert call["base_image"] == LOCAL_BASE
    assert call["wheelhouse"] is None and call["stream"] is out
    assert f"{TF} is not on this Docker engine: building it (FROM {LOCAL_BASE})" in out.getvalue()


def test_without_a_local_base_the_default_base_is_pulled(builds):
    images.ensure_image(TF, client=_Engine(), stream=io.StringIO())
    assert builds[0]["base_image"] == "python:3.11-slim"
    # a local base with another Python does not do either
    images.ensure_image(
        "launchbay/pytorch-training:2.13.0-cpu-py312",
        client=_Engine(LOCAL_BASE),
        stream=io.StringIO(),
    )
    assert builds[1]["base_image"] == "python:3.12-slim"
    images.ensure_image(
        TF, base_image="my/base:1", client=_Engine(LOCAL_BASE), stream=io.StringIO()
    )
    assert builds[2]["base_image"] == "my/base:1"


def _fake_horovod_script(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "horovod.sh"
    script.write_text("#!/usr/bin/env bash\n" + body)
    return script


def test_horovod_puts_the_cached_wheel_in_the_wheelhouse(builds, tmp_path, monkeypatch):
    house = tmp_path / "house"
    script = _fake_horovod_script(
        tmp_path,
        f'echo "== building horovod, several minutes" >&2\necho "args: $*" >&2\necho {house}\n',
    )
    monkeypatch.setattr(ensure, "_horovod_script", lambda: script)
    out = io.StringIO()
    images.ensure_image(TF, horovod=True, wheelhouse="/opt/wheels", client=_Engine(), stream=out)
    assert builds[0]["wheelhouse"] == str(house)
    shown = out.getvalue()
    assert "  == building horovod, several minutes\n" in shown
    assert "  args: --wheelhouse /opt/wheels\n" in shown
    assert "\r" not in shown


def test_a_failing_horovod_build_is_an_image_build_error(builds, tmp_path, monkeypatch):
    script = _fake_horovod_script(tmp_path, 'echo "cmake: error 7" >&2\nexit 3\n')
    monkeypatch.setattr(ensure, "_horovod_script", lambda: script)
    with pytest.raises(ImageBuildError) as failed:
        images.ensure_image(TF, horovod=True, client=_Engine(), stream=io.StringIO())
    assert "exit 3" in str(failed.value) and "cmake: error 7" in str(failed.value)
    assert failed.value.tag == TF and failed.value.log_tail == ["cmake: error 7"]
    assert builds == []


def test_only_launchbay_images_can_be_ensured(builds):
    with pytest.raises(ConfigurationError, match="a launchbay image name"):
        images.ensure_image("python:3.11-slim", client=_Engine())


def test_the_checkout_has_the_horovod_script():
    assert ensure._horovod_script().is_file()
