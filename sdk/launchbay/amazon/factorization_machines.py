"""SDK v2's ``sagemaker.amazon.factorization_machines``: :class:`FactorizationMachines`."""

from launchbay.amazon._algorithms import FactorizationMachines

__all__ = ["FactorizationMachines"]
