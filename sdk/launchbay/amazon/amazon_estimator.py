"""SDK v2's ``sagemaker.amazon.amazon_estimator`` names that notebooks import."""

from __future__ import annotations

import warnings

from launchbay._retrieve import retrieve

__all__ = ["get_image_uri"]


def get_image_uri(region_name: str, repo_name: str, repo_version: str = "1") -> str:
    """The image of a built-in algorithm: SDK v1's name for :func:`launchbay.image_uris.retrieve`.

    Warns (``DeprecationWarning``) as SDK v2 does: the method was renamed.
    """
    warnings.warn(
        "The method get_image_uri has been renamed in SageMaker SDK v2: use "
        "launchbay.image_uris.retrieve(framework, region, version)",
        DeprecationWarning,
        stacklevel=2,
    )
    return retrieve(framework=repo_name, region=region_name, version=repo_version)
