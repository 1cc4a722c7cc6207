"""SDK v2's ``sagemaker.analytics``: a training job's metrics and a tuning job's trials as tables.

:class:`TrainingJobAnalytics` is SDK v2's class of that name; ``dataframe()``
has its columns, ``timestamp``, ``metric_name`` and ``value``.

* A local job: one row per value the job logged for each of its
  ``metric_definitions`` (read with SageMaker's rule by :mod:`launchbay.metrics`,
  kept in ``<job dir>/metrics.jsonl`` while the job runs); ``timestamp`` is
  seconds since the job's ``TrainingStartTime``.
* A SageMaker job: read from CloudWatch as SDK v2 reads it (namespace
  ``/aws/sagemaker/TrainingJobs``, dimension ``TrainingJobName``, the
  ``Average`` of each ``period``, 60 s by default, from the job's start to its
  end plus a minute): the same rows as SDK v2's for the same data
  (:mod:`launchbay.backends.cloudwatch_metrics`). Where SDK v2's frame for a job
  with no datapoints has no columns, this one has the three.

``Estimator.training_job_analytics`` returns it for the estimator's latest job.

:class:`~launchbay.tuning.analytics.HyperparameterTuningJobAnalytics` is
re-exported here, where SDK v2 has it.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import os
import tempfile
from collections.abc import Sequence
from typing import Any

from launchbay.errors import ConfigurationError, JobError, LaunchbayError, MissingDependencyError
from launchbay.metrics import METRICS_FILE, load_metrics, read_logs, stored_metrics_file
from launchbay.tuning.analytics import HyperparameterTuningJobAnalytics

__all__ = ["TrainingJobAnalytics", "HyperparameterTuningJobAnalytics", "MetricsNotAvailable"]


class MetricsNotAvailable(LaunchbayError, NotImplementedError):
    """The job's metrics cannot be read here.

    Kept for code that catches it: launchbay raised it for SageMaker jobs before it
    read their metrics from CloudWatch; nothing raises it now.
    """


class TrainingJobAnalytics:
    """The metrics of one training job (SDK v2's ``TrainingJobAnalytics``).

    Args:
        training_job_name: The job's name.
        metric_names: The metrics to keep (default: every metric the job defines,
            ``AlgorithmSpecification.MetricDefinitions``).
        sagemaker_session: The session the job's backend is looked up with.
        start_time, end_time: Keep only values logged within this interval
            (datetimes, as SDK v2 takes them). A SageMaker job's default is SDK
            v2's: from its ``TrainingStartTime`` to its ``TrainingEndTime`` (now
            while it runs) plus one minute.
        period: CloudWatch's aggregation period for a SageMaker job, in seconds
            (default 60); a local job keeps every value, so it is not used there.

    Raises:
        ConfigurationError: no job of that name is here or on SageMaker.
    """

    CLOUDWATCH_NAMESPACE = "/aws/sagemaker/TrainingJobs"

    def __init__(
        self,
        training_job_name: str,
        metric_names: Sequence[str] | None = None,
        sagemaker_session: Any = None,
        start_time: _dt.datetime | None = None,
        end_time: _dt.datetime | None = None,
        period: int | None = None,
    ) -> None:
        if not isinstance(training_job_name, str) or not training_job_name:
            raise ConfigurationError.invalid(
                "training_job_name", training_job_name, "the name of a training job"
            )
        self.name = training_job_name
        self._metric_names = None if metric_names is None else list(metric_names)
        self._session = sagemaker_session
        self._start_time = start_time
        self._end_time = end_time
        self._period = period
        self._rows: list[dict[str, Any]] | None = None

    def __repr__(self) -> str:
        return f"<launchbay TrainingJobAnalytics for {self.name}>"

    def clear_cache(self) -> None:
        self._rows = None

    def _lookup(self) -> tuple[Any, dict[str, Any]]:
        # the backends' registry: looked up where the job is (local first), as attach does
        from launchbay.backends import registry

        backend = registry.backend_for_job(self.name, self._session)
        return backend, dict(backend.describe(self.name))

    def rows(self, force_refresh: bool = False) -> list[dict[str, Any]]:
        """The table as a list of dicts (``timestamp``, ``metric_name``, ``value``); no pandas needed.

        Raises:
            JobError: a SageMaker job whose metrics CloudWatch would not give.
        """
        if force_refresh:
            self.clear_cache()
        if self._rows is None:
            self._rows = self._read()
        return [dict(r) for r in self._rows]

    def _read(self) -> list[dict[str, Any]]:
        backend, description = self._lookup()
        job_dir = description.get("LocalJobDir")
        if not job_dir:
            return self._read_cloudwatch(backend, description)
        series = stored_series(str(job_dir), description)
        start = description.get("TrainingStartTime") or description.get("CreationTime")
        origin = start.timestamp() if isinstance(start, _dt.datetime) else 0.0
        wanted = self._metric_names
        low = self._start_time.timestamp() if self._start_time else None
        high = self._end_time.timestamp() if self._end_time else None
        rows = []
        for name, points in series.items():
            if wanted is not None and name not in wanted:
                continue
            for stamp, value in points:
                if (low is not None and stamp < low) or (high is not None and stamp > high):
                    continue
                rows.append(
                    {"timestamp": max(stamp - origin, 0.0), "metric_name": name, "value": value}
                )
        rows.sort(key=lambda r: (r["metric_name"], r["timestamp"]))
        return rows

    def _read_cloudwatch(self, backend: Any, description: dict[str, Any]) -> list[dict[str, Any]]:
        """A SageMaker job's rows, from CloudWatch as SDK v2 reads them."""
        from launchbay.backends import cloudwatch_metrics as cw

        # SDK v2 takes an empty list of names as no list: every metric the job defines
        names = self._metric_names or cw.metric_names(description)
        window = cw.training_window(description, self._start_time, self._end_time)
        if not names or window is None:
            return []
        session = getattr(backend, "session", None) or self._session
        period = self._period or cw.DEFAULT_PERIOD
        from botocore.exceptions import BotoCoreError, ClientError  # a SageMaker job: boto3 is here

        try:
            return cw.metric_rows(cw.cloudwatch_client(session), self.name, names, *window, period)
        except (ClientError, BotoCoreError) as exc:
            raise JobError(
                f"TrainingJobAnalytics({self.name!r}): CloudWatch GetMetricStatistics failed "
                f"({exc}). Check that the identity in use may call "
                "cloudwatch:GetMetricStatistics in the job's region."
            ) from exc

    def dataframe(self, force_refresh: bool = False) -> Any:
        """The table as a ``pandas.DataFrame`` (SDK v2's columns).

        Raises:
            MissingDependencyError: pandas is not installed.
            JobError: a SageMaker job whose metrics CloudWatch would not give.
        """
        try:
            pd = importlib.import_module("pandas")  # optional: the analytics extra
        except ImportError as exc:
            raise MissingDependencyError.for_module(
                "pandas", "analytics", "TrainingJobAnalytics.dataframe()"
            ) from exc
        return pd.DataFrame(self.rows(force_refresh), columns=["timestamp", "metric_name", "value"])

    def export_csv(self, filename: str) -> None:
        """Write :meth:`dataframe` to ``filename`` (SDK v2's helper)."""
        self.dataframe().to_csv(filename)


def stored_series(job_dir: str, description: dict[str, Any]) -> dict[str, list[list[float]]]:
    """A local job's metrics: its metrics file, else read now from its log files.

    A job that ran before metrics were recorded has no metrics file: its log files
    are read to their end with its ``MetricDefinitions`` (in a recorder process, as
    a running job's are: a regex that backtracks cannot hang this one), each value
    stamped with the time its log file was last written. Nothing is written in the
    job's directory.
    """
    if stored_metrics_file(job_dir) is not None:
        return dict(load_metrics(job_dir)["metrics"])
    definitions = (description.get("AlgorithmSpecification") or {}).get("MetricDefinitions")
    if not definitions:
        return {}
    logs = os.path.join(job_dir, "logs")
    try:
        files = sorted(os.path.join(logs, f) for f in os.listdir(logs) if f.endswith(".log"))
    except OSError:
        files = []
    stamp = max((os.path.getmtime(f) for f in files), default=0.0)
    with tempfile.TemporaryDirectory(prefix="launchbay-metrics-") as scratch:
        reader = read_logs(files, definitions, os.path.join(scratch, METRICS_FILE), stamp=stamp)
    return reader.series()
