"""Hyperparameter tuning: the parts behind :mod:`launchbay.tuner` (SDK v2's ``sagemaker.tuner``).

* :mod:`~launchbay.tuning.parameter`: the ranges (``launchbay.parameter`` re-exports them);
* :mod:`~launchbay.tuning.configs`: warm start, strategy and completion criteria settings;
* :mod:`~launchbay.tuning.plan`: the :class:`~launchbay.tuning.plan.TuningPlan`, resolved
  once, and the CreateHyperParameterTuningJob request built from it (pure);
* :mod:`~launchbay.tuning.sagemaker`: tuning jobs on SageMaker (create, follow, stop);
* :mod:`~launchbay.tuning.analytics`: the trials as a table;
* :mod:`~launchbay.tuning.engine`: the one hook where local tuning runs.

Nothing is imported here: ``import launchbay.tuner`` loads only what it uses.
"""
