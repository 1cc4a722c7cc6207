"""The one place a backend is found by name: the estimator and the ``launchbay`` command use it.

Each backend is registered as ``"module:Class"`` and imported only when it is
first used, so ``import launchbay`` (and a SageMaker job) never imports the
Docker backend, and a local job never imports boto3's backend::

    local_process  launchbay.backends.process:ProcessBackend     instance type local_process
    docker         launchbay.backends.docker:DockerBackend       instance types local, local_gpu
    ray            launchbay.backends.ray:RayBackend             instance type ray (a Ray cluster)
    sagemaker      launchbay.backends.sagemaker:SageMakerBackend every ml.* instance type

The order is the order in which :func:`backend_for_job` asks the backends
whether a job name is theirs (:meth:`~launchbay.backends.base.Backend.owns`):
the local ones look in ``$LAUNCHBAY_HOME/jobs``, SageMaker claims the rest.
An unknown backend name or instance type raises
:class:`~launchbay.errors.ConfigurationError` naming the value and the accepted ones.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from launchbay.backends import plan as _plan
from launchbay.backends.plan import REMOTE_BACKEND, JobPlan, backend_name_for
from launchbay.errors import ConfigurationError

if TYPE_CHECKING:  # the backends' modules are imported on first use only
    from launchbay.backends.base import Backend

__all__ = [
    "backend_class",
    "backend_for",
    "backend_for_job",
    "backend_for_plan",
    "backend_name_for",
    "create",
    "names",
    "register",
]

#: Backend name -> "module:Class", in the order jobs are looked up by name.
_BACKENDS: dict[str, str] = {
    "local_process": "launchbay.backends.process:ProcessBackend",
    "docker": "launchbay.backends.docker:DockerBackend",
    "ray": "launchbay.backends.ray:RayBackend",
    "sagemaker": "launchbay.backends.sagemaker:SageMakerBackend",
}
_REMOTE = REMOTE_BACKEND
_loaded: dict[str, type[Backend]] = {}


def names() -> tuple[str, ...]:
    """The registered backend names, in lookup order."""
    return tuple(_BACKENDS)


def register(name: str, target: str, *, instance_types: tuple[str, ...] = ()) -> None:
    """Register (or replace) backend ``name`` as ``"module:Class"``, for ``instance_types``.

    A new backend is asked about job names before ``sagemaker``, which claims every name.
    """
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr:
        raise ConfigurationError.invalid("target", target, "'package.module:ClassName'")
    _loaded.pop(name, None)
    if name in _BACKENDS or name == _REMOTE:
        _BACKENDS[name] = target
    else:
        remote = _BACKENDS.pop(_REMOTE)
        _BACKENDS[name] = target
        _BACKENDS[_REMOTE] = remote
    for instance_type in instance_types:
        # The instance types live with the one rule that reads them (launchbay.backends.plan).
        _plan.INSTANCE_TYPE_BACKENDS[instance_type] = name


def backend_class(name: str) -> type[Backend]:
    """The class of backend ``name``, imported now if it was not yet."""
    cls = _loaded.get(name)
    if cls is not None:
        return cls
    target = _BACKENDS.get(name)
    if target is None:
        raise ConfigurationError.invalid("backend", name, ", ".join(_BACKENDS))
    module, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module), attr)
    _loaded[name] = cls
    return cls


def backend_for(instance_type: str | None, session: Any = None) -> Backend:
    """A backend that runs jobs of ``instance_type``, with ``session`` for S3 and AWS calls."""
    name = backend_name_for(instance_type)
    return backend_class(name).for_instance_type(instance_type, session)


def backend_for_plan(plan: JobPlan, session: Any = None) -> Backend:
    """The backend a job's plan is placed on (:mod:`launchbay.backends.plan`)."""
    return backend_class(plan.backend).for_instance_type(plan.placement.instance_type, session)


def create(name: str, session: Any = None) -> Backend:
    """Backend ``name`` (for looking up, listing, stopping jobs rather than running one)."""
    return backend_class(name).for_instance_type(None, session)


def backend_for_job(job_name: str, session: Any = None) -> Backend:
    """The backend that owns job ``job_name``: a local one if its job is here, else SageMaker."""
    for name in _BACKENDS:
        backend = create(name, session)
        if backend.owns(job_name):
            return backend
    raise ConfigurationError.invalid("job name", job_name, "the name of an existing job")
