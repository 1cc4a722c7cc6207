"""``smdistributed.dataparallel``: launchbay's local implementation of its documented API.

* ``smdistributed.dataparallel.torch.torch_smddp``: registers the ``smddp``
  backend of ``torch.distributed`` (NCCL on GPUs, gloo on CPU).
* ``smdistributed.dataparallel.torch.distributed`` and
  ``smdistributed.dataparallel.torch.parallel.distributed``: the legacy (<= 1.3)
  PyTorch API, on top of the same backend.
* ``smdistributed.dataparallel.tensorflow``: the TensorFlow 2.x API, whose
  collectives run over MPI (mpi4py).

Ranks are started by ``mpirun`` (as on SageMaker); rank, size and local rank
come from the launcher's environment (:mod:`._world`).
"""

from ._world import local_rank, local_size, rank, size

__all__ = ["rank", "size", "local_rank", "local_size"]

__version__ = "1.8.0+launchbay.local"
