"""Fixtures for the request-compatibility suite (launchbay vs sagemaker==2.257.7).

Both SDKs talk to the session's one moto server (``moto_server``); it is reached
through ``AWS_ENDPOINT_URL`` with dummy credentials, so nothing leaves this
machine. That environment is set around each test of this directory and
restored after it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .harness import Case, SourceTree, v2_request

_UNSET = ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_PROFILE", "AWS_REGION", "AWS_ROLE_ARN")


@pytest.fixture(scope="session")
def moto_endpoint(moto_server: str) -> str:
    """The session's one moto server (``moto_server``, tests/conftest.py): its URL."""
    return moto_server


@pytest.fixture(scope="session")
def compat_environment(
    moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """The environment both SDKs run in: moto, dummy credentials, no local config files.

    An AWS profile or a SageMaker SDK defaults file on the developer's machine would leak
    into the requests, so all of them point at one empty file.
    """
    empty = tmp_path_factory.mktemp("aws-config") / "empty"
    empty.write_text("")
    return {
        "AWS_ENDPOINT_URL": moto_endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-west-2",
        "AWS_CONFIG_FILE": str(empty),
        "AWS_SHARED_CREDENTIALS_FILE": str(empty),
        "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
        "SAGEMAKER_ADMIN_CONFIG_OVERRIDE": str(empty),
        "SAGEMAKER_USER_CONFIG_OVERRIDE": str(empty),
    }


@pytest.fixture(autouse=True)
def _compat_aws_env(
    compat_environment: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Apply :func:`compat_environment` around every compat test and restore it after.

    Applied per test rather than for the session, so the moto server of this directory
    never leaks into tests elsewhere that run later in the same session.
    """
    for key, value in compat_environment.items():
        monkeypatch.setenv(key, value)
    for key in _UNSET:
        monkeypatch.delenv(key, raising=False)
    yield


@pytest.fixture(scope="session")
def source_tree(tmp_path_factory: pytest.TempPathFactory) -> SourceTree:
    """A training source dir (train.py + helper module) and a dependency dir ``lib/``."""
    root = tmp_path_factory.mktemp("compat-code")
    src = root / "src"
    src.mkdir()
    (src / "train.py").write_text(
        "import argparse\n"
        "\n"
        "import helper\n"
        "\n"
        "if __name__ == '__main__':\n"
        "    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('--epochs', type=int, default=1)\n"
        "    args, _ = parser.parse_known_args()\n"
        "    helper.run(args.epochs)\n"
    )
    (src / "helper.py").write_text(
        "def run(epochs):\n    for epoch in range(epochs):\n        print('epoch', epoch)\n"
    )
    (src / "requirements.txt").write_text("")
    lib = root / "lib"
    (lib / "mylib").mkdir(parents=True)
    (lib / "mylib" / "__init__.py").write_text("VALUE = 42\n")
    return SourceTree(src=Path(src), lib=Path(lib))


@pytest.fixture(scope="session")
def v2_requests(moto_endpoint: str, source_tree: SourceTree) -> Callable[[Case], dict[str, Any]]:
    """SDK v2's request per case, computed once per session (v2 is deterministic per case)."""
    cache: dict[str, dict[str, Any]] = {}

    def get(case: Case) -> dict[str, Any]:
        if case.id not in cache:
            cache[case.id] = v2_request(case, source_tree)
        return copy.deepcopy(cache[case.id])

    return get
