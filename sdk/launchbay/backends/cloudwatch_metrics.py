"""A SageMaker training job's metrics in CloudWatch, read the way SDK v2 reads them.

SageMaker publishes every value a job's ``MetricDefinitions`` find in its logs to
CloudWatch: namespace :data:`NAMESPACE`, the metric named as its definition, one
dimension ``TrainingJobName``. Two readers:

* :func:`metric_rows`: the rows of SDK v2's ``TrainingJobAnalytics.dataframe()``.
  One ``GetMetricStatistics`` call per metric (statistic ``Average``, ``Period``
  60 s unless given) over the window of :func:`training_window`: from the job's
  ``TrainingStartTime`` (or ``start_time``) to its ``TrainingEndTime`` (or now)
  plus one minute, or ``end_time``. Each metric's ``timestamp`` is seconds since
  that metric's own first datapoint; the rows come metric by metric in the
  order of the names, each metric's in time order. CloudWatch answers at most
  :data:`MAX_DATAPOINTS` datapoints a call: a longer window (a job of more than
  a day at 60 s) is read in pieces of whole periods, where SDK v2's single call
  is refused.
* :class:`LatestMetrics`: the newest value of each metric while a job runs, one
  ``GetMetricData`` call for all of them per read (the SageMaker backend's
  follower reads it about once a minute).
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from launchbay.backends.state import JobState

__all__ = [
    "NAMESPACE",
    "DIMENSION",
    "DEFAULT_PERIOD",
    "MAX_DATAPOINTS",
    "LatestMetrics",
    "cloudwatch_client",
    "metric_names",
    "metric_rows",
    "training_window",
]

logger = logging.getLogger("launchbay.analytics")

#: The CloudWatch namespace of SageMaker training job metrics.
NAMESPACE = "/aws/sagemaker/TrainingJobs"
#: The one dimension of those metrics: the job's name.
DIMENSION = "TrainingJobName"
#: SDK v2's aggregation period, in seconds.
DEFAULT_PERIOD = 60
#: Most datapoints one GetMetricStatistics call may ask for.
MAX_DATAPOINTS = 1440
#: How far back from the newest value seen :class:`LatestMetrics` reads again (late data).
LATEST_LOOKBACK = _dt.timedelta(minutes=5)
#: Most metrics one GetMetricData call may query.
MAX_QUERIES = 500


def _utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def metric_names(description: Mapping[str, Any]) -> list[str]:
    """The names of the job's ``AlgorithmSpecification.MetricDefinitions``, in order."""
    definitions = (description.get("AlgorithmSpecification") or {}).get("MetricDefinitions")
    return [str(d["Name"]) for d in definitions or [] if isinstance(d, Mapping) and d.get("Name")]


def cloudwatch_client(session: Any) -> Any:
    """The session's CloudWatch client (a launchbay ``Session``'s, else one of its boto session)."""
    client = getattr(session, "cloudwatch_client", None)
    if client is not None:
        return client
    return session.boto_session.client("cloudwatch")


def training_window(
    description: Mapping[str, Any],
    start_time: _dt.datetime | None = None,
    end_time: _dt.datetime | None = None,
) -> tuple[_dt.datetime, _dt.datetime] | None:
    """SDK v2's window: ``start_time`` or the job's start; ``end_time``, or its end (now
    while it runs) plus one minute (CloudWatch drops the seconds of the end time).

    None when the job has not started training (SDK v2 fails there with a ``KeyError``).
    """
    state = JobState.from_description(description)
    start = start_time or state.start_time
    if not isinstance(start, _dt.datetime):
        return None
    end = end_time or (state.end_time or _utcnow()) + _dt.timedelta(minutes=1)
    return start, end


def _query(job: str, name: str) -> dict[str, Any]:
    return {
        "Namespace": NAMESPACE,
        "MetricName": name,
        "Dimensions": [{"Name": DIMENSION, "Value": job}],
    }


def _pieces(
    start: _dt.datetime, end: _dt.datetime, period: int
) -> list[tuple[_dt.datetime, _dt.datetime]]:
    """``[start, end)`` as one piece, or as pieces of :data:`MAX_DATAPOINTS` whole periods."""
    span = _dt.timedelta(seconds=period * MAX_DATAPOINTS)
    pieces = []
    low = start
    while True:
        high = low + span
        if high >= end:
            pieces.append((low, end))
            return pieces
        pieces.append((low, high))
        low = high


def datapoints(
    client: Any, job: str, name: str, start: _dt.datetime, end: _dt.datetime, period: int
) -> list[tuple[_dt.datetime, float]]:
    """The ``(timestamp, average)`` datapoints of one metric in ``[start, end)``, as CloudWatch
    returns them (a timestamp seen in an earlier piece is not repeated)."""
    seen: set[_dt.datetime] = set()
    points = []
    for low, high in _pieces(start, end, period):
        response = client.get_metric_statistics(
            **_query(job, name),
            StartTime=low,
            EndTime=high,
            Period=period,
            Statistics=["Average"],
        )
        for point in response.get("Datapoints", []):
            stamp = point["Timestamp"]
            if stamp not in seen:
                seen.add(stamp)
                points.append((stamp, float(point["Average"])))
    return points


def metric_rows(
    client: Any,
    job: str,
    names: Sequence[str],
    start: _dt.datetime,
    end: _dt.datetime,
    period: int = DEFAULT_PERIOD,
) -> list[dict[str, Any]]:
    """SDK v2's rows: ``timestamp`` (seconds since the metric's first datapoint),
    ``metric_name``, ``value`` (the period's average), metric by metric in ``names`` order.

    Raises:
        botocore.exceptions.ClientError / BotoCoreError: CloudWatch refused or failed.
    """
    rows: list[dict[str, Any]] = []
    for name in names:
        points = datapoints(client, job, name, start, end, period)
        if not points:
            logger.warning("No metrics called %s found for training job %s", name, job)
            continue
        base = min(stamp for stamp, _ in points)
        for stamp, value in sorted(points, key=lambda p: p[0]):
            seconds = (stamp - base).total_seconds()
            rows.append({"timestamp": seconds, "metric_name": name, "value": value})
    return rows


class LatestMetrics:
    """The newest value of each of a job's metrics, one ``GetMetricData`` call per :meth:`read`.

    Args:
        client: A boto3 CloudWatch client.
        job: The training job's name.
        names: Its metric names (the first :data:`MAX_QUERIES` are read).
        since: Where the first read starts (the job's start); later reads start
            :data:`LATEST_LOOKBACK` before the newest value seen.
        period: The aggregation period of a value, in seconds.
    """

    def __init__(
        self,
        client: Any,
        job: str,
        names: Sequence[str],
        since: _dt.datetime,
        period: int = DEFAULT_PERIOD,
    ) -> None:
        self.client = client
        self.job = job
        self.names = list(dict.fromkeys(names))[:MAX_QUERIES]
        self.since = since if since.tzinfo else since.replace(tzinfo=_dt.timezone.utc)
        self.period = period
        #: name -> (timestamp, value) of the newest value seen.
        self.latest: dict[str, tuple[_dt.datetime, float]] = {}

    def values(self) -> tuple[tuple[str, float], ...]:
        """``(name, value)`` of every metric with a value, in the order of the names."""
        return tuple((n, self.latest[n][1]) for n in self.names if n in self.latest)

    def newest(self) -> _dt.datetime | None:
        """The time of the newest value seen."""
        return max((stamp for stamp, _ in self.latest.values()), default=None)

    def read(self, now: _dt.datetime | None = None) -> bool:
        """Read the newest values; True if :meth:`values` changed.

        Raises:
            botocore.exceptions.ClientError / BotoCoreError: CloudWatch refused or failed.
        """
        if not self.names:
            return False
        end = (now or _utcnow()) + _dt.timedelta(minutes=1)
        start = min(self.since, end - _dt.timedelta(seconds=self.period))
        ids = {f"m{i}": name for i, name in enumerate(self.names)}
        response = self.client.get_metric_data(
            MetricDataQueries=[
                {
                    "Id": key,
                    "MetricStat": {
                        "Metric": _query(self.job, name),
                        "Period": self.period,
                        "Stat": "Average",
                    },
                    "ReturnData": True,
                }
                for key, name in ids.items()
            ],
            StartTime=start,
            EndTime=end,
            ScanBy="TimestampDescending",
        )
        before = self.values()
        for result in response.get("MetricDataResults", []):
            name = ids.get(str(result.get("Id")))
            pairs = list(zip(result.get("Timestamps", []), result.get("Values", []), strict=False))
            if name is None or not pairs:
                continue
            stamp, value = max(pairs, key=lambda p: p[0])
            old = self.latest.get(name)
            if old is None or stamp >= old[0]:
                self.latest[name] = (stamp, float(value))
        newest = self.newest()
        if newest is not None:
            self.since = max(self.since, newest - LATEST_LOOKBACK)
        return self.values() != before
