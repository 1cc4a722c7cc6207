"""launchbay: run distributed training jobs through a SageMaker-v2-compatible Estimator.

The public surface is small and imported lazily, so ``import launchbay`` stays
fast and never imports boto3::

    from launchbay import Estimator, Session, get_execution_role
    from launchbay.pytorch import PyTorch
    from launchbay.utils import name_from_base, sagemaker_timestamp
"""

from __future__ import annotations

from launchbay._lazy import lazy_exports

# Not typing's: every rank of every job imports this package first (through
# launchbay.runtime), and ``typing`` and the errors module would be its cost.
TYPE_CHECKING = False

__version__ = "0.1.0"

# name -> module that defines it; resolved on first attribute access.
_LAZY = {
    "ConfigurationError": "launchbay.errors",
    "DistributionError": "launchbay.errors",
    "DockerError": "launchbay.errors",
    "ImageNotFoundError": "launchbay.errors",
    "InputError": "launchbay.errors",
    "JobError": "launchbay.errors",
    "JobFailedError": "launchbay.errors",
    "LaunchbayError": "launchbay.errors",
    "MissingDependencyError": "launchbay.errors",
    "ProvisioningError": "launchbay.errors",
    "TransferError": "launchbay.errors",
    "UnknownArgumentError": "launchbay.errors",
    "Estimator": "launchbay.estimator",
    "Framework": "launchbay.estimator",
    "Session": "launchbay.session",
    "get_execution_role": "launchbay.session",
    "TrainingInput": "launchbay.inputs",
    "FileSystemInput": "launchbay.inputs",
    "DebuggerHookConfig": "launchbay.debugger",
    "CollectionConfig": "launchbay.debugger",
    "PyTorch": "launchbay.pytorch",
    "TensorFlow": "launchbay.tensorflow",
    "TrainingJobAnalytics": "launchbay.analytics",
    "HyperparameterTuningJobAnalytics": "launchbay.analytics",
    # SDK v2's first-party algorithm estimators (sagemaker.LinearLearner, ...), docs/algorithms.md
    "LinearLearner": "launchbay.amazon.linear_learner",
    "KMeans": "launchbay.amazon.kmeans",
    "PCA": "launchbay.amazon.pca",
    "FactorizationMachines": "launchbay.amazon.factorization_machines",
    "NTM": "launchbay.amazon.ntm",
    "LDA": "launchbay.amazon.lda",
    "RandomCutForest": "launchbay.amazon.randomcutforest",
    "KNN": "launchbay.amazon.knn",
    "IPInsights": "launchbay.amazon.ipinsights",
    "Object2Vec": "launchbay.amazon.object2vec",
    "RecordSet": "launchbay.amazon.common",
    "LocalSession": "launchbay.local",
}

__all__ = [
    "CollectionConfig",
    "ConfigurationError",
    "DebuggerHookConfig",
    "DistributionError",
    "DockerError",
    "Estimator",
    "FileSystemInput",
    "Framework",
    "HyperparameterTuningJobAnalytics",
    "ImageNotFoundError",
    "InputError",
    "JobError",
    "JobFailedError",
    "LaunchbayError",
    "MissingDependencyError",
    "ProvisioningError",
    "PyTorch",
    "Session",
    "TensorFlow",
    "TrainingInput",
    "TrainingJobAnalytics",
    "TransferError",
    "UnknownArgumentError",
    "__version__",
    "get_execution_role",
]

if TYPE_CHECKING:  # pragma: no cover
    from launchbay.amazon.common import RecordSet as RecordSet
    from launchbay.amazon.factorization_machines import (
        FactorizationMachines as FactorizationMachines,
    )
    from launchbay.amazon.ipinsights import IPInsights as IPInsights
    from launchbay.amazon.kmeans import KMeans as KMeans
    from launchbay.amazon.knn import KNN as KNN
    from launchbay.amazon.lda import LDA as LDA
    from launchbay.amazon.linear_learner import LinearLearner as LinearLearner
    from launchbay.amazon.ntm import NTM as NTM
    from launchbay.amazon.object2vec import Object2Vec as Object2Vec
    from launchbay.amazon.pca import PCA as PCA
    from launchbay.amazon.randomcutforest import RandomCutForest as RandomCutForest
    from launchbay.analytics import HyperparameterTuningJobAnalytics, TrainingJobAnalytics
    from launchbay.debugger import CollectionConfig, DebuggerHookConfig
    from launchbay.errors import (
        ConfigurationError,
        DistributionError,
        DockerError,
        ImageNotFoundError,
        InputError,
        JobError,
        JobFailedError,
        LaunchbayError,
        MissingDependencyError,
        ProvisioningError,
        TransferError,
        UnknownArgumentError,
    )
    from launchbay.estimator import Estimator, Framework
    from launchbay.inputs import FileSystemInput, TrainingInput
    from launchbay.local import LocalSession as LocalSession
    from launchbay.pytorch import PyTorch
    from launchbay.session import Session, get_execution_role
    from launchbay.tensorflow import TensorFlow


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
