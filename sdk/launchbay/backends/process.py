"""The ``local_process`` backend: the local control loop with each host a process group.

:class:`ProcessBackend` is :class:`~launchbay.backends.local.control.LocalBackend`
(the job's life: staging, failure triage, outputs, Ctrl-C) driving a
:class:`~launchbay.backends.local.process_hosts.ProcessHosts` (the hosts: one
runtime per host, ``python -m launchbay.runtime.train`` in its own process group).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from launchbay.backends.local.control import DEFAULT_GRACE_SECONDS, LocalBackend
from launchbay.backends.local.process_hosts import ProcessHosts, free_port_block
from launchbay.errors import ConfigurationError
from launchbay.runtime.names import HP, LOCAL_PROCESS

if TYPE_CHECKING:
    from launchbay.backends.plan import JobPlan

__all__ = ["ProcessBackend", "DEFAULT_GRACE_SECONDS", "free_port_block"]


class ProcessBackend(LocalBackend):
    """Runs CreateTrainingJob requests as local process groups, one per host.

    Takes :class:`~launchbay.backends.local.control.LocalBackend`'s arguments
    (``session``, ``job_root``, ``grace_seconds``); its hosts are
    :class:`~launchbay.backends.local.process_hosts.ProcessHosts`'.
    """

    name = "local_process"
    instance_types = (LOCAL_PROCESS,)
    host_kind = "process group"
    runner_class = ProcessHosts

    def check(self, plan: JobPlan) -> None:
        """:meth:`LocalBackend.check`, and no built-in algorithm image without a script.

        Raises:
            ConfigurationError: the image is a SageMaker built-in algorithm (LinearLearner,
                XGBoost in algorithm mode, ...) and the job has no entry point: the
                algorithm runs only inside its container, which ``local_process`` does
                not start.
        """
        request = plan.request
        image = (request.get("AlgorithmSpecification") or {}).get("TrainingImage")
        if HP.PROGRAM not in (request.get("HyperParameters") or {}):
            from launchbay._algorithm_images import builtin_algorithm

            algorithm = builtin_algorithm(image)
            if algorithm is not None:
                raise ConfigurationError(
                    f"instance_type='local_process' runs a training script on this machine, but "
                    f"{image!r} is SageMaker's built-in {algorithm!r} algorithm, which runs only "
                    "inside its container. Accepted: instance_type='local' (Docker mode, which "
                    "pulls the image from ECR: docs/algorithms.md) or an ml.* instance type.",
                    argument="instance_type",
                    value=LOCAL_PROCESS,
                )
        super().check(plan)
