"""The in-container side of launchbay: what runs inside every training host.

The runtime reads the SageMaker container contract (``<base>/input/config/*.json``),
exports the SM_* variables the official ``sagemaker-training`` toolkit exports,
fetches the user's code, and launches the entry point with the launcher the
``sagemaker_*`` hyperparameters ask for (plain, torchrun, mpirun, TF_CONFIG).
Failures of any rank are collected and reported in ``<base>/output/failure``.

It is standard library only (boto3 is imported lazily, only to fetch ``s3://``
code) and never imports launchbay's client side. Modules:

* :mod:`launchbay.runtime.contract` -- paths, config readers and the writer used
  by local backends, the SM_* environment.
* :mod:`launchbay.runtime.code` -- fetching/unpacking code, entry points,
  requirements.txt.
* :mod:`launchbay.runtime.launchers` -- pure builders of each launcher's
  command lines and environments.
* :mod:`launchbay.runtime.train` -- the ``train`` entry point.
* :mod:`launchbay.runtime.standins` -- local implementations of SageMaker-only
  libraries (``smdistributed.dataparallel``), put on the ranks' path in local
  jobs only.
"""
