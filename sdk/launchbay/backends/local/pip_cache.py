"""The pip cache local Docker jobs install ``requirements.txt`` through (issue 36 item 3).

SageMaker's containers, and SDK v2's local mode, download every requirement again
in every container of every job. Here each Docker job's containers get one folder
of this machine mounted at :data:`CONTAINER_PIP_CACHE`, with ``PIP_CACHE_DIR``
pointing at it, so pip's HTTP and wheel caches outlive the container: a second
job with the same ``requirements.txt`` installs from the cache and downloads no
package file (pip still asks the index whether the project's page changed).

* Keyed per image: ``$LAUNCHBAY_HOME/cache/pip/<image id>``. Wheels built in one
  image (its Python, its C library, its compilers) are never offered to another.
* The user's alone: the folder and every folder above it up to the local root
  are 0700 (:func:`launchbay._home.local_dir`), so another user of this machine
  reads nothing pip put there; containers that run as root write into it and the
  job's end hands those files back to the caller (``ContainerHosts``).
* A job that sets ``PIP_CACHE_DIR`` or ``PIP_NO_CACHE_DIR`` in its ``environment``
  keeps its own choice: nothing is mounted for it.
* Only a job that installs requirements gets it: one whose code has a
  ``requirements.txt`` (or whose code is on S3, where that is not known before the
  container reads it). Every other container sees nothing of ``LAUNCHBAY_HOME``'s
  caches (``tests/docker/test_docker_hostile.py``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from launchbay._home import local_dir

__all__ = [
    "CONTAINER_PIP_CACHE",
    "entrypoint_with_cache",
    "installs_requirements",
    "pip_cache_dir",
    "wants_pip_cache",
]

#: Where a job's containers see the cache (``PIP_CACHE_DIR``); outside ``/opt/ml``.
CONTAINER_PIP_CACHE = "/var/cache/launchbay-pip"

_IMAGE_ID = re.compile(r"(?:sha256:)?([0-9a-f]{12,64})")


def pip_cache_dir(image_id: str) -> str:
    """The cache folder of the image whose engine id is ``image_id`` (made, 0700).

    Raises:
        ValueError: ``image_id`` is not an engine image id (``sha256:<hex>``).
    """
    match = _IMAGE_ID.fullmatch(image_id or "")
    if match is None:
        raise ValueError(
            f"image_id: expected the engine's image id (sha256:<hex>), got {image_id!r}"
        )
    return local_dir("cache", "pip", match.group(1)[:24])


def wants_pip_cache(environment: Mapping[str, str]) -> bool:
    """Whether the job leaves pip's cache to launchbay (it sets neither pip cache variable)."""
    return "PIP_CACHE_DIR" not in environment and "PIP_NO_CACHE_DIR" not in environment


def installs_requirements(code: str | None, local_code: bool, host_code: str) -> bool:
    """Whether a job's containers may install requirements, so get the cache mounted.

    Local code (``local_code``, unpacked at ``host_code``): when it has a ``requirements.txt``.
    Code on S3: yes (the container reads it; what it holds is not known here). No code
    (the image's own program): no. Every other container sees nothing of
    ``LAUNCHBAY_HOME``'s caches.
    """
    if local_code:
        return os.path.isfile(os.path.join(host_code, "requirements.txt"))
    return bool(code)


def entrypoint_with_cache(image_config: Mapping[str, Any]) -> list[str] | None:
    """The entrypoint that lets pip use the cache in an image that turns it off, or None.

    SageMaker's images (and launchbay's) set ``PIP_NO_CACHE_DIR=1`` to keep their layers
    small; any value of it turns pip's cache off, and a container's environment can only
    add to the image's: ``/usr/bin/env -u`` (by path: a job's ``PATH`` may hide
    ``/usr/bin``) before the image's entrypoint takes it away.
    """
    if not any(str(e).startswith("PIP_NO_CACHE_DIR=") for e in image_config.get("Env") or ()):
        return None
    return ["/usr/bin/env", "-u", "PIP_NO_CACHE_DIR", *(image_config.get("Entrypoint") or [])]
