"""SDK v2's ``sagemaker.local``: :class:`LocalSession`.

In SDK v2 a ``LocalSession`` is what makes ``instance_type="local"`` jobs run on this
machine: it swaps the SageMaker client for a local one. In launchbay the instance type
alone decides where a job runs (``local_process``, ``local``, ``local_gpu``), with any
session, so ``LocalSession`` is a :class:`launchbay.Session` under v2's name that takes
v2's arguments. It does not turn an ``ml.*`` job into a local one: a notebook that passes
``sagemaker_session=LocalSession()`` with ``instance_type="local"`` runs locally as in v2.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launchbay.errors import ConfigurationError
from launchbay.session import Session

__all__ = ["LocalSession"]


class LocalSession(Session):
    """A :class:`launchbay.Session` with SDK v2's ``LocalSession`` arguments.

    Args:
        boto_session, default_bucket, default_bucket_prefix, sagemaker_config: as
            :class:`launchbay.Session`.
        s3_endpoint_url: refused: set ``AWS_ENDPOINT_URL_S3`` (or ``AWS_ENDPOINT_URL``),
            which boto3 honours for every client launchbay makes.
        disable_local_code: accepted, no effect: local jobs always read the code from
            this machine (v2 uploads it to S3 first when ``True``).
    """

    def __init__(
        self,
        boto_session: Any = None,
        default_bucket: str | None = None,
        s3_endpoint_url: str | None = None,
        disable_local_code: bool = False,
        sagemaker_config: Mapping[str, Any] | None = None,
        default_bucket_prefix: str | None = None,
    ) -> None:
        if s3_endpoint_url is not None:
            raise ConfigurationError.invalid(
                "s3_endpoint_url",
                s3_endpoint_url,
                "None; set AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL) in the environment, which "
                "boto3 applies to the S3 client launchbay uses",
            )
        if not isinstance(disable_local_code, bool):
            raise ConfigurationError.invalid("disable_local_code", disable_local_code, "a bool")
        super().__init__(
            boto_session=boto_session,
            default_bucket=default_bucket,
            default_bucket_prefix=default_bucket_prefix,
            sagemaker_config=sagemaker_config,
        )

    @property
    def local_mode(self) -> bool:
        """``True``, as v2's ``LocalSession`` says (the instance type still decides where jobs run)."""
        return True
