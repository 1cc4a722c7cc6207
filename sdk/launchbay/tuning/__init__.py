"""Hyperparameter tuning: the parts behind :mod:`launchbay.tuner` (SDK v2's ``sagemaker.tuner``).

* :mod:`~launchbay.tuning.parameter`: the ranges (``launchbay.parameter`` re-exports them);
* :mod:`~launchbay.tuning.configs`: warm start, strategy and completion criteria settings;
* :mod:`~launchbay.tuning.plan`: the :class:`~launchbay.tuning.plan.TuningPlan`, resolved
  once, and the CreateHyperParameterTuningJob request built from it (pure);
* :mod:`~launchbay.tuning.sagemaker`: tuning jobs on SageMaker (create, follow, stop);
* :mod:`~launchbay.tuning.analytics`: the trials as a table;
* :mod:`~launchbay.tuning.engine`: the one hook where local tuning runs;
* :mod:`~launchbay.tuning.backends`: the tuning backends (local, SageMaker) the tuner hands
  a plan to, and the one lookup of what a tuning job's name is;
* :mod:`~launchbay.tuning.local`: the local engine's control loop, over
  :mod:`~launchbay.tuning.search` (searchers), :mod:`~launchbay.tuning.stopping`
  (stoppers) and :mod:`~launchbay.tuning.scheduler` (slots).

Nothing is imported here: ``import launchbay.tuner`` loads only what it uses.
"""
