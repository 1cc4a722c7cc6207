"""Launchers: pure functions from a :class:`LaunchContext` to a :class:`LaunchPlan`.

:func:`select_launcher` reads the ``sagemaker_*`` framework parameters the way
the framework toolkits do (only for hosts whose instance group is in the
distribution; others run the script plainly):

=================================================  =========================================
framework parameter                                launcher
=================================================  =========================================
``sagemaker_mpi_enabled``                          ``mpi`` (:mod:`.mpi`)
``sagemaker_pytorch_ddp_enabled``,                 ``smdistributed`` on GPU hosts with
``sagemaker_distributed_dataparallel_enabled``     ``smddprun``; in local jobs without it
                                                   ``smddp_local`` (the local stand-in,
                                                   :mod:`.smddp`: torchrun for PyTorch
                                                   scripts in ``local_process``, else
                                                   mpirun); else ``torch_distributed``
``sagemaker_torch_distributed_enabled``            ``torch_distributed`` (:mod:`.torchrun`)
``sagemaker_parameter_server_enabled``             ``parameter_server`` (:mod:`.tf_config`)
``sagemaker_multi_worker_mirrored_strategy_...``   ``multi_worker_mirrored_strategy``
(none)                                             ``plain`` (:mod:`.plain`)
=================================================  =========================================
"""

from __future__ import annotations

import importlib
import logging

from launchbay.runtime.contract import TrainingEnv
from launchbay.runtime.launchers.base import (
    BOOTSTRAP_MODULE,
    LaunchContext,
    LaunchPlan,
    ProcessSpec,
)
from launchbay.runtime.names import HP
from launchbay.runtime.settings import RuntimeSettings

__all__ = [
    "BOOTSTRAP_MODULE",
    "LaunchContext",
    "LaunchPlan",
    "ProcessSpec",
    "select_launcher",
    "build_plan",
]

logger = logging.getLogger("launchbay.runtime")


def select_launcher(env: TrainingEnv, settings: RuntimeSettings) -> str:
    """The launcher name for this host (see the table in the module docstring)."""
    params = env.additional_framework_parameters
    if not env.in_distribution:
        return "plain"
    if params.get(HP.MPI_ENABLED):
        return "mpi"
    if params.get(HP.PYTORCH_DDP_ENABLED) or params.get(HP.SMDDP_ENABLED):
        on_sagemaker_gpu = not settings.local_process and env.num_gpus > 0
        if on_sagemaker_gpu and env.is_smddprun_installed:
            return "smdistributed"
        if settings.standins:
            return "smddp_local"
        return "torch_distributed"
    if params.get(HP.TORCH_DISTRIBUTED_ENABLED):
        return "torch_distributed"
    if params.get(HP.PARAMETER_SERVER_ENABLED):
        return "parameter_server"
    if params.get(HP.MWMS_ENABLED):
        return "multi_worker_mirrored_strategy"
    if params.get(HP.PYTORCH_XLA_ENABLED):
        logger.warning("pytorch_xla distribution is not supported; running the script plainly")
    return "plain"


def _torch_distributed(ctx: LaunchContext) -> LaunchPlan:
    """One torchrun per host; one for every host in ``local_process`` (one machine)."""
    if ctx.settings.local_process and len(ctx.env.distribution_hosts) > 1:
        from launchbay.runtime.launchers import mpi

        return mpi.build_torchrun_local(ctx)
    from launchbay.runtime.launchers import torchrun

    return torchrun.build(ctx)


#: Launcher name -> (module of this package, its builder). A host imports only the module
#: of the launcher it runs: every job's start pays for the imports (docs/performance.md).
_BUILDERS = {
    "plain": ("plain", "build"),
    "mpi": ("mpi", "build"),
    "smdistributed": ("mpi", "build_smddp"),
    "smddp_local": ("smddp", "build_local"),
    "parameter_server": ("tf_config", "build_parameter_server"),
    "multi_worker_mirrored_strategy": ("tf_config", "build_mwms"),
}


def build_plan(ctx: LaunchContext) -> LaunchPlan:
    """Select the launcher for ``ctx`` and build its plan."""
    launcher = select_launcher(ctx.env, ctx.settings)
    if launcher == "torch_distributed":
        return _torch_distributed(ctx)
    module, builder = _BUILDERS[launcher]
    built: LaunchPlan = getattr(importlib.import_module(f"{__name__}.{module}"), builder)(ctx)
    return built
