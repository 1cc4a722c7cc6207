"""Backends run a finished CreateTrainingJob request; they never see the estimator.

Each implements the one interface of :mod:`launchbay.backends.base`
(:class:`Backend`, an ``abc.ABC``) and returns a
:class:`launchbay.job.TrainingJob` whose statuses are SageMaker's. They are found
by name through :mod:`launchbay.backends.registry`, which imports a backend's
module only when it is used:

* ``local_process`` (:mod:`~launchbay.backends.process`): each host a process group;
* ``docker`` (:mod:`~launchbay.backends.docker`): each host a container
  (instance types ``local`` and ``local_gpu``);
* ``sagemaker`` (:mod:`~launchbay.backends.sagemaker`): every ``ml.*`` type.

The two local backends share a job's life (:mod:`~launchbay.backends._localjob`),
its staging (:mod:`~launchbay.backends._local`) and detached runners
(:mod:`~launchbay.backends._detached`).
"""

from __future__ import annotations

from launchbay.backends.base import Backend
from launchbay.backends.registry import backend_for, backend_for_job

__all__ = ["Backend", "backend_for", "backend_for_job"]
