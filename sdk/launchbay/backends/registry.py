"""The one place a backend is found by name: the estimator and the ``launchbay`` command use it.

Each backend is registered as ``"module:Class"`` and imported only when it is
first used, so ``import launchbay`` (and a SageMaker job) never imports the
Docker backend, and a local job never imports boto3's backend::

    local_process  launchbay.backends.process:ProcessBackend     instance type local_process
    docker         launchbay.backends.docker:DockerBackend       instance types local, local_gpu
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

from launchbay.errors import ConfigurationError
from launchbay.runtime.names import LOCAL, LOCAL_GPU, LOCAL_PROCESS

if TYPE_CHECKING:  # the backends' modules are imported on first use only
    from launchbay.backends.base import Backend

__all__ = [
    "backend_class",
    "backend_for",
    "backend_for_job",
    "backend_name_for",
    "create",
    "names",
    "register",
]

#: Backend name -> "module:Class", in the order jobs are looked up by name.
_BACKENDS: dict[str, str] = {
    "local_process": "launchbay.backends.process:ProcessBackend",
    "docker": "launchbay.backends.docker:DockerBackend",
    "sagemaker": "launchbay.backends.sagemaker:SageMakerBackend",
}
#: The instance types of this machine; every ``ml.*`` type goes to ``sagemaker``.
_INSTANCE_TYPES: dict[str, str] = {
    LOCAL_PROCESS: "local_process",
    LOCAL: "docker",
    LOCAL_GPU: "docker",
}
_REMOTE = "sagemaker"
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
        _INSTANCE_TYPES[instance_type] = name


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


def backend_name_for(instance_type: str | None) -> str:
    """The name of the backend that runs ``instance_type``.

    ``None`` (a job described by instance groups of ``ml.*`` types) is SageMaker's.
    """
    if instance_type is None or (
        isinstance(instance_type, str) and instance_type.startswith("ml.")
    ):
        return _REMOTE
    name = _INSTANCE_TYPES.get(instance_type) if isinstance(instance_type, str) else None
    if name is None:
        accepted = ", ".join([*_INSTANCE_TYPES, "or an ml.* type such as ml.m5.xlarge"])
        raise ConfigurationError.invalid("instance_type", instance_type, accepted)
    return name


def backend_for(instance_type: str | None, session: Any = None) -> Backend:
    """A backend that runs jobs of ``instance_type``, with ``session`` for S3 and AWS calls."""
    name = backend_name_for(instance_type)
    return backend_class(name).for_instance_type(instance_type, session)


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
