"""The SageMaker backend: boto3 ``create_training_job`` and friends."""

from __future__ import annotations

import logging
import time
from typing import Any

from launchbay.errors import JobError
from launchbay.job import TERMINAL_STATUSES, TrainingJob

__all__ = ["SageMakerBackend"]

logger = logging.getLogger("launchbay.backends.sagemaker")


class SageMakerBackend:
    """Runs requests as SageMaker training jobs through the session's boto3 client."""

    def __init__(self, session: Any, poll_seconds: float = 5.0) -> None:
        self.session = session
        self.poll_seconds = poll_seconds

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError

        client = self.session.sagemaker_client
        try:
            return getattr(client, operation)(**kwargs)
        except (ClientError, BotoCoreError) as exc:
            name = kwargs.get("TrainingJobName", "")
            raise JobError(f"SageMaker {operation} failed for job {name!r}: {exc}") from exc

    def run(self, request: dict[str, Any]) -> TrainingJob:
        name = request["TrainingJobName"]
        self._call("create_training_job", **request)
        logger.info("Created SageMaker training job %s", name)
        return TrainingJob(name, self)

    def describe(self, name: str) -> dict[str, Any]:
        return self._call("describe_training_job", TrainingJobName=name)

    def stop(self, name: str) -> None:
        self._call("stop_training_job", TrainingJobName=name)

    def wait(self, name: str, logs: str | bool = "All") -> dict[str, Any]:
        delay = 1.0
        while True:
            description = self.describe(name)
            status = description["TrainingJobStatus"]
            if status in TERMINAL_STATUSES:
                return description
            time.sleep(delay)
            delay = min(delay * 2, self.poll_seconds)
