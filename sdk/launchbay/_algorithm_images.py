"""Which images are SageMaker's built-in algorithms (LinearLearner, XGBoost, DeepAR, ...).

A built-in algorithm runs only inside its own container: ``local_process`` cannot run
one (it runs a training script on this machine) and Docker mode needs the image pulled
from SageMaker's ECR registry (:func:`launchbay.images.pull_image`). The answer comes from
the image table ``image_uris.retrieve`` reads: the repository is an algorithm's and the
registry account is one that table lists for it, so a repository of your own named
``kmeans`` is not mistaken for one. Used by the backends; imports nothing heavy.
"""

from __future__ import annotations

import functools
import re
from typing import Any

__all__ = ["ALGORITHMS", "builtin_algorithm", "OPEN_SOURCE_CONTAINERS"]

#: ``image_uris.retrieve`` names of the built-in algorithms.
ALGORITHMS = (
    "blazingtext", "factorization-machines", "forecasting-deepar", "image-classification",
    "ipinsights", "kmeans", "knn", "lda", "linear-learner", "ntm", "object-detection",
    "object2vec", "pca", "randomcutforest", "semantic-segmentation", "seq2seq", "xgboost",
)  # fmt: skip

#: Algorithms whose container is open source: build it yourself where you cannot pull.
OPEN_SOURCE_CONTAINERS = {"xgboost": "https://github.com/aws/sagemaker-xgboost-container"}

_ECR = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?"
    r"/(?P<repository>[^:@]+)"
)


def _walk(config: Any, found: dict[str, set[str]]) -> None:
    if isinstance(config, dict):
        repository, registries = config.get("repository"), config.get("registries")
        if isinstance(repository, str) and isinstance(registries, dict):
            found.setdefault(repository, set()).update(str(a) for a in registries.values())
        for value in config.values():
            _walk(value, found)
    elif isinstance(config, list):
        for value in config:
            _walk(value, found)


@functools.cache
def _repositories() -> dict[str, tuple[str, set[str]]]:
    """repository -> (algorithm, registry accounts), from the image table."""
    from launchbay._retrieve import framework_config  # the table loads on the first question

    out: dict[str, tuple[str, set[str]]] = {}
    for algorithm in ALGORITHMS:
        found: dict[str, set[str]] = {}
        _walk(framework_config(algorithm), found)
        for repository, accounts in found.items():
            out[repository] = (algorithm, accounts)
    return out


def builtin_algorithm(image: str | None) -> str | None:
    """The algorithm (``"kmeans"``, ``"xgboost"`` ...) whose SageMaker image ``image`` is, else None."""
    match = _ECR.match(image or "")
    if match is None:
        return None
    known = _repositories().get(match["repository"])
    if known is None or match["account"] not in known[1]:
        return None
    return known[0]
