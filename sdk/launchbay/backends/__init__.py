"""Backends check and run a job's plan (:mod:`launchbay.backends.plan`); they never see the estimator.

A job is resolved once into a :class:`~launchbay.backends.plan.JobPlan` (the
finished CreateTrainingJob request, where it runs, its hosts, processes per host
and GPU shares); each backend implements the one interface of :mod:`launchbay.backends.base`
(:class:`Backend`, an ``abc.ABC``) and returns a
:class:`launchbay.job.TrainingJob` whose statuses are SageMaker's. They are found
by name through :mod:`launchbay.backends.registry`, which imports a backend's
module only when it is used:

* ``local_process`` (:mod:`~launchbay.backends.process`): each host a process group;
* ``docker`` (:mod:`~launchbay.backends.docker`): each host a container
  (instance types ``local`` and ``local_gpu``);
* ``ray`` (:mod:`~launchbay.backends.ray`): each host a Ray actor on a node of a cluster;
* ``sagemaker`` (:mod:`~launchbay.backends.sagemaker`): every ``ml.*`` type.

The client-driven backends (processes, containers, Ray) are one control loop driving
one host runner each; the local wing (the loop, the process and container runners,
the job record, logs, signals, staging, outputs) is the package
:mod:`launchbay.backends.local`, and the Ray runner and its node side are
:mod:`launchbay.backends.ray`'s. The plan imports no backend:
this machine's capacity is the foundation :mod:`launchbay._capacity`.
"""

from __future__ import annotations

from launchbay.backends.base import Backend
from launchbay.backends.plan import JobPlan, plan_request
from launchbay.backends.registry import backend_for, backend_for_job, backend_for_plan

__all__ = [
    "Backend",
    "JobPlan",
    "backend_for",
    "backend_for_job",
    "backend_for_plan",
    "plan_request",
]
