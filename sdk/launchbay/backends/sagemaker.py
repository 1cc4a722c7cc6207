"""The SageMaker backend: submit a CreateTrainingJob request, follow the job, read its logs.

:class:`SageMakerBackend` runs the request the estimator built, unchanged, with
boto3's ``create_training_job``. The request was checked once, when its plan
was made (:func:`launchbay.backends.plan.plan_request`), with SageMaker's needs:
what only the local backends understand, such as ``file://`` URIs, is refused
there (moto and dry runs accept anything, the service does not).

Following a job (:meth:`SageMakerBackend.events`, which ``wait()``, ``fit(wait=True)``
and ``launchbay logs`` show through the one follower, :mod:`launchbay.backends.follow`):

* **Status.** ``DescribeTrainingJob`` is polled. Every new secondary status
  transition, and every new message of the current one, is shown as it
  happens: on a terminal or in a notebook as one live line redrawn in place
  (job, status, secondary status and message, elapsed time); elsewhere (CI,
  files) as plain lines ``<UTC time> <Status> - <message>``, with no carriage
  return or colour code.
* **Logs.** SageMaker writes each host's output to the log group
  :data:`LOG_GROUP`, stream ``<job>/algo-<n>-<epoch seconds>``. Streams are
  discovered with ``DescribeLogStreams`` (prefix ``<job>/``) until every host
  has one, and again after each status transition (a retried job gets new
  streams). Each stream is read with ``GetLogEvents`` from its head, following
  the stream's own ``nextForwardToken`` page after page until the token comes
  back unchanged (the end of the stream), so no line is lost or printed twice
  across pages and polls. The new lines of all hosts are interleaved by
  timestamp and printed ``algo-1 | line``, prefixes coloured per host on a
  terminal or in a notebook (:class:`launchbay._logs.LogPrinter`, shared with
  the local backend). After the job ends, the logs are read once more after
  a short pause: CloudWatch receives the last lines a little after the status
  changes.
* **Polling.** The pause between polls starts at ``min_poll`` (1 s), doubles
  while nothing happens up to ``max_poll`` (30 s), and drops back to
  ``min_poll`` when log lines arrive or the status changes. While logs flow,
  the job is described at most every ``status_interval`` (5 s).
* **Throttling.** The session's SageMaker and CloudWatch Logs clients use
  botocore's ``standard`` retry mode (see
  :data:`launchbay.session.CONTROL_PLANE_MAX_ATTEMPTS`), which retries
  throttling and transient errors with backoff inside each call. What still
  fails after those retries (a throttling error, a 5xx, a dropped connection)
  only skips that poll: the next one comes after a longer pause. Only
  :data:`MAX_TRANSIENT_POLLS` such polls in a row end the wait, with a
  :class:`~launchbay.errors.JobError` saying the job still runs. Missing
  permission to read the logs is not an error either: the status is still
  followed, with a note saying why the lines are not shown.
* **Metrics.** While the job is InProgress and defines metrics
  (``AlgorithmSpecification.MetricDefinitions``), the newest value of each is
  read from CloudWatch (namespace ``/aws/sagemaker/TrainingJobs``, one
  ``GetMetricData`` call for all of them) at most every ``metrics_interval``
  (60 s), and yielded as a :class:`~launchbay.backends.events.JobMetrics` when
  a value changed: the follower shows them in the live status line, or as one
  plain line. Reading them never stops following: a throttled or
  failed call skips that read; an error that will not pass (no permission) is
  logged once as a warning and the metrics are not read again.
* **The end.** Training and billable seconds (and the Managed Spot savings for
  spot jobs) are logged on ``launchbay.backends.sagemaker`` and printed when
  logs are shown. Ctrl-C stops following and leaves the job running (the
  message says how to follow or stop it again).

Failure triage (:meth:`SageMakerBackend.failure_log_tail`): when a job ends
Failed or Stopped, :meth:`launchbay.job.TrainingJob.wait` raises
:class:`~launchbay.errors.JobFailedError` with the last :data:`TAIL_LINES` log
lines of the host that failed first. That host is found from the last
:data:`TAIL_WINDOW` events of every host's stream, in this order:

1. the only ``algo-<n>`` host the ``FailureReason`` names, if it names exactly one;
2. otherwise the host with the earliest error mark in its window: a Python
   traceback header, an exception line (``ValueError: ...``, also behind
   ``[rank1]:``-style prefixes), a segmentation fault or CUDA out of memory.
   The first host to fail logs its error first; the others fail later, as a
   consequence (timeouts, broken connections to the dead peer);
3. otherwise the host whose output stopped first (a host killed without a
   traceback, e.g. out of host memory, goes silent before the others);

ties go to the lower host number.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TextIO

from launchbay import _request_rules
from launchbay.backends import cloudwatch_metrics
from launchbay.backends.base import Backend
from launchbay.backends.events import (
    Event,
    JobEnded,
    JobHosts,
    JobMetrics,
    JobStatus,
    LogLines,
    Notice,
)
from launchbay.backends.plan import JobPlan, algo_hosts, instance_count_of
from launchbay.backends.state import JobState
from launchbay.errors import ConfigurationError, JobError, LaunchbayError
from launchbay.job import LogTail, TrainingJob
from launchbay.runtime.names import IN_PROGRESS, JOB_STATUSES, TERMINAL_STATUSES

__all__ = [
    "SageMakerBackend",
    "LOG_GROUP",
    "JOB_STATUSES",
    "TAIL_LINES",
    "TAIL_WINDOW",
    "MAX_TRANSIENT_POLLS",
    "check_request",
]

logger = logging.getLogger("launchbay.backends.sagemaker")


def check_request(request: Mapping[str, Any]) -> None:
    """Refuse a bare request SageMaker must not get: the one check a plan placed on
    SageMaker got (:func:`launchbay._request_rules.check_request`, ``local=False``).

    Raises:
        ConfigurationError: naming the argument, the value, what is accepted and
            the request field.
    """
    _request_rules.check_request(request, local=False)


#: The CloudWatch Logs group SageMaker writes training job output to.
LOG_GROUP = "/aws/sagemaker/TrainingJobs"
#: Log lines of the failing host shown in a :class:`~launchbay.errors.JobFailedError`.
TAIL_LINES = 20
#: Events read from the end of each host's stream to find the host that failed first.
TAIL_WINDOW = 200
#: Polls in a row that may fail with throttling/transient errors before ``wait`` gives up.
MAX_TRANSIENT_POLLS = 20

MIN_POLL_SECONDS = 1.0
MAX_POLL_SECONDS = 30.0
STATUS_INTERVAL_SECONDS = 5.0
METRICS_INTERVAL_SECONDS = 60.0
_MAX_PAGES_PER_READ = 50  # per stream and poll; the rest comes at the next poll
_MAX_DRAIN_ATTEMPTS = 10

_THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
    }
)
_DENIED_CODES = frozenset(
    {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "NotAuthorized"}
)
_EPOCH_SUFFIX_RE = re.compile(r"-\d{9,}$")
_HOST_IN_TEXT_RE = re.compile(r"\balgo-\d+\b")
_ERROR_MARK_RE = re.compile(
    r"Traceback \(most recent call last\)"
    r"|^(?:\[[^\]]*\]\s*:?\s*)*[A-Za-z_][\w.]*(?:Error|Exception)(?::|$)"
    r"|Segmentation fault|CUDA out of memory"
)


# --------------------------------------------------------------------------- errors


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _http_status(exc: BaseException) -> int:
    response = getattr(exc, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def _botocore_errors(*also: type[BaseException]) -> tuple[type[BaseException], ...]:
    """botocore's errors (imported when an ``except`` clause is reached), and ``also``."""
    from botocore.exceptions import BotoCoreError, ClientError

    return (*also, ClientError, BotoCoreError)


def _is_transient(exc: BaseException) -> bool:
    """Throttling, a server error or a network failure: worth trying again at the next poll."""
    from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

    if isinstance(exc, ClientError):
        return _error_code(exc) in _THROTTLING_CODES or _http_status(exc) >= 500
    return isinstance(exc, (ConnectionError, HTTPClientError))


def _not_found(exc: BaseException) -> bool:
    code = _error_code(exc)
    text = str(exc).lower()
    return code in ("ResourceNotFound", "ResourceNotFoundException") or (
        code == "ValidationException" and ("not found" in text or "could not find" in text)
    )


def _job_error(operation: str, name: str | None, exc: BaseException, region: str) -> JobError:
    """A :class:`JobError` for a failed SageMaker call: what failed and what to do next."""
    code = _error_code(exc)
    subject = f" for training job {name!r}" if name else ""
    if name and _not_found(exc):
        hint = (
            f"No training job named {name!r} exists in {region}. Check the name "
            "(`launchbay list` shows recent jobs) and the session's region."
        )
    elif code == "ResourceInUse":
        hint = (
            f"A training job named {name!r} already exists (names are unique per account and "
            "region): pass another job_name, or leave it out to get a timestamped one."
        )
    elif code in _DENIED_CODES:
        hint = (
            f"The AWS identity in use may not call {operation}: grant it sagemaker:{operation} "
            "(and iam:PassRole on the job's role to create jobs), or use other credentials."
        )
    elif code == "ResourceLimitExceeded":
        hint = (
            "An account quota is reached (instances of this type, or concurrent training jobs): "
            "request an increase in Service Quotas, use another instance type, or wait for "
            "running jobs to end."
        )
    elif code == "ValidationException":
        hint = (
            "SageMaker rejected the request; `est.create_training_job_request()` (or "
            "`launchbay submit --dry-run`) shows exactly what was sent."
        )
    elif _is_transient(exc):
        hint = (
            "SageMaker could not be reached or kept throttling after botocore's retries; "
            "try again in a minute (a running job is not affected)."
        )
    else:
        hint = "Check the credentials, the region and the request."
    return JobError(f"SageMaker {operation} failed{subject}: {exc}. {hint}")


class _Transient(Exception):
    """A poll failed in a way the next poll may not (throttling, 5xx, network)."""


class _LogsUnavailable(Exception):
    """The job's CloudWatch logs cannot be read (permissions, an unexpected error)."""


# --------------------------------------------------------------------------- description helpers


def _instance_count(description: Mapping[str, Any]) -> int:
    return instance_count_of(description.get("ResourceConfig") or {})


def _host_names(description: Mapping[str, Any]) -> list[str]:
    """``algo-1`` ... ``algo-N``: the hosts SageMaker names for the job's instances."""
    return list(algo_hosts(_instance_count(description)))


def _host_of(stream: str, job: str) -> str:
    """``job/algo-2-1700000000`` -> ``algo-2``."""
    rest = stream[len(job) + 1 :] if stream.startswith(job + "/") else stream
    return _EPOCH_SUFFIX_RE.sub("", rest) or rest


def _host_order(host: str) -> tuple[str, int]:
    stem, _, number = host.rpartition("-")
    return (stem, int(number)) if number.isdigit() else (host, -1)


def _lines_of(message: str) -> list[str]:
    return message.rstrip("\r\n").replace("\r\n", "\n").split("\n")


def billing_summary(name: str, description: Mapping[str, Any]) -> str | None:
    """One line with the job's training and billable seconds (all instances), or None.

    SageMaker reports both per instance; they are multiplied by the instance
    count. Spot jobs add the Managed Spot savings, ``1 - billable / training``.
    """
    state = JobState.from_description(description)
    training = state.described("training_seconds")
    billable = state.described("billable_seconds")
    if training is None and billable is None:
        return None
    count = _instance_count(description)
    parts = []
    if training is not None:
        parts.append(f"training seconds {int(training) * count}")
    if billable is not None:
        parts.append(f"billable seconds {int(billable) * count}")
    text = f"Training job {name}: " + ", ".join(parts)
    if count > 1:
        text += f" ({count} instances)"
    if description.get("EnableManagedSpotTraining") and training and billable is not None:
        text += f"; Managed Spot savings {(1 - float(billable) / float(training)) * 100:.1f}%"
    return text


# --------------------------------------------------------------------------- following


class _LogTailer:
    """Reads the new CloudWatch events of every host of one job, each exactly once."""

    def __init__(self, client: Any, job: str, hosts: int, page_size: int | None) -> None:
        self.client = client
        self.job = job
        self.expected = hosts
        self.page_size = page_size
        self.tokens: dict[str, str | None] = {}  # stream -> its nextForwardToken
        self.hosts: dict[str, str] = {}  # stream -> host
        self.rediscover = True
        self.throttled = False

    @property
    def streams(self) -> list[str]:
        """Known streams in host order."""
        return sorted(self.tokens, key=lambda s: (_host_order(self.hosts[s]), s))

    def discover(self) -> None:
        """Add the job's streams not known yet (``DescribeLogStreams``, every page)."""
        kwargs: dict[str, Any] = {
            "logGroupName": LOG_GROUP,
            "logStreamNamePrefix": self.job + "/",
            "orderBy": "LogStreamName",
        }
        seen_tokens: set[str] = set()
        while True:
            try:
                response = self.client.describe_log_streams(**kwargs)
            except _botocore_errors() as exc:
                if _not_found(exc):  # no log group before the first job of the account logs
                    return
                raise
            for item in response.get("logStreams", []):
                stream = item["logStreamName"]
                if stream not in self.tokens:
                    self.tokens[stream] = None
                    self.hosts[stream] = _host_of(stream, self.job)
            token = response.get("nextToken")
            if not token or token in seen_tokens:
                break
            seen_tokens.add(token)
            kwargs["nextToken"] = token
        self.rediscover = False

    def read(self) -> list[tuple[str, str]]:
        """The lines that arrived since the last read, ``(host, line)``, in time order.

        A throttling or transient error ends this read early: what was read is
        returned (each stream's token moves only with the page it belongs to,
        so nothing is lost) and :attr:`throttled` is set.

        Raises:
            _LogsUnavailable: the logs cannot be read (e.g. no permission).
        """
        self.throttled = False
        events: list[tuple[int, int, int, str, str]] = []
        try:
            if self.rediscover or len(self.tokens) < self.expected:
                self.discover()
            for order, stream in enumerate(self.streams):
                self._read_stream(stream, order, events)
        except _botocore_errors() as exc:
            if not _is_transient(exc):
                raise _LogsUnavailable(str(exc)) from exc
            self.throttled = True
            logger.debug("Reading the logs of %s was throttled: %s", self.job, exc)
        events.sort(key=lambda e: (e[0], e[1], e[2]))
        return [(host, line) for _, _, _, host, message in events for line in _lines_of(message)]

    def _read_stream(
        self, stream: str, order: int, out: list[tuple[int, int, int, str, str]]
    ) -> None:
        token = self.tokens[stream]
        host = self.hosts[stream]
        for _ in range(_MAX_PAGES_PER_READ):
            kwargs: dict[str, Any] = {
                "logGroupName": LOG_GROUP,
                "logStreamName": stream,
                "startFromHead": True,
            }
            if token:
                kwargs["nextToken"] = token
            if self.page_size:
                kwargs["limit"] = self.page_size
            try:
                response = self.client.get_log_events(**kwargs)
            except _botocore_errors() as exc:
                if _not_found(exc):  # the stream is gone
                    return
                raise
            for event in response.get("events", []):
                out.append(
                    (int(event.get("timestamp", 0)), order, len(out), host, event["message"])
                )
            new = response.get("nextForwardToken")
            if not new or new == token:  # the same token back: the end of the stream
                return
            token = self.tokens[stream] = new


class _Follower:
    """Follows one job as events: status, logs, backoff, until it ends (and its last lines are in)."""

    def __init__(
        self,
        backend: SageMakerBackend,
        name: str,
        *,
        status: bool,
        lines: bool,
        hosts: int,
    ) -> None:
        self.backend = backend
        self.name = name
        self.status = status
        self.tailer = (
            _LogTailer(backend.session.logs_client, name, hosts, backend.log_page_size)
            if lines
            else None
        )
        self.lines = lines
        self.require_logs = lines and not status
        self._last: tuple[Any, ...] | None = None
        self.metrics: cloudwatch_metrics.LatestMetrics | None = None
        self.metrics_off = not status or not backend.metrics_interval
        self._metrics_due: float | None = None

    def metric_events(self, description: Mapping[str, Any]) -> list[Event]:
        """The newest metric values (one :class:`JobMetrics`) when due and changed.

        Never raises for CloudWatch: a transient failure skips this read, any other
        is logged once and ends the reading of metrics.
        """
        state = JobState.from_description(description)
        if self.metrics_off or state.status != IN_PROGRESS:
            return []
        backend = self.backend
        now = backend.clock()
        if self._metrics_due is not None and now < self._metrics_due:
            return []
        self._metrics_due = now + backend.metrics_interval
        try:
            if self.metrics is None:
                names = cloudwatch_metrics.metric_names(description)
                since = state.start_time or state.creation_time
                if not names or since is None:
                    self.metrics_off = not names
                    return []
                client = cloudwatch_metrics.cloudwatch_client(backend.session)
                self.metrics = cloudwatch_metrics.LatestMetrics(client, self.name, names, since)
            if not self.metrics.read():
                return []
        except _botocore_errors() as exc:
            if _is_transient(exc):
                logger.debug("Reading the metrics of %s failed: %s", self.name, exc)
                return []
            logger.warning(
                "CloudWatch metrics of %s cannot be read (%s); following without them. "
                "Grant cloudwatch:GetMetricData to see them.",
                self.name,
                exc,
            )
            self.metrics_off = True
            return []
        return [JobMetrics(self.metrics.values(), self.metrics.newest())]

    def status_event(self, description: Mapping[str, Any]) -> tuple[list[Event], bool]:
        """The status event for ``description`` (when status is followed); True if it changed."""
        state = JobState.from_description(description)
        key = (
            state.status,
            tuple((t.status, t.message) for t in state.transitions or ()),
        )
        changed, self._last = key != self._last, key
        return ([JobStatus(description)] if self.status else []), changed

    def read_lines(self) -> list[Event]:
        """The lines that arrived (one :class:`LogLines`), or a notice that they cannot be read."""
        if self.tailer is None:
            return []
        try:
            lines = self.tailer.read()
        except _LogsUnavailable as exc:
            if self.require_logs:
                raise JobError(
                    f"The CloudWatch logs of training job {self.name} cannot be read: {exc}. "
                    f"Grant logs:DescribeLogStreams and logs:GetLogEvents on {LOG_GROUP}."
                ) from exc.__cause__
            logger.warning("CloudWatch logs of %s cannot be read: %s", self.name, exc)
            self.tailer = None
            return [
                Notice(
                    f"[launchbay] CloudWatch logs of {self.name} cannot be read ({exc}); "
                    "following its status only."
                )
            ]
        return [LogLines(tuple(lines))] if lines else []

    def drain(self) -> Iterator[Event]:
        """Every line there is now (no following)."""
        attempts = 0
        while attempts < _MAX_DRAIN_ATTEMPTS:
            got = self.read_lines()
            yield from got
            if self.tailer is None or (not got and not self.tailer.throttled):
                return
            attempts = attempts + 1 if self.tailer.throttled else 0
            if self.tailer.throttled:
                self.backend.sleep(self.backend.min_poll * 2**attempts)
        logger.warning(
            "Reading the logs of %s kept being throttled; output may be partial", self.name
        )

    def run(self, description: dict[str, Any]) -> Iterator[Event]:
        """Follow until the job ends; the last event is :class:`JobEnded`."""
        backend = self.backend
        delay = backend.min_poll
        last_describe = backend.clock()
        started_done = JobState.from_description(description).terminal
        ending = False
        transient = 0
        final_retries = _MAX_DRAIN_ATTEMPTS
        while True:
            shown, changed = self.status_event(description)
            yield from shown
            if changed and self.tailer is not None:
                self.tailer.rediscover = True
            got = self.read_lines()
            yield from got
            yield from self.metric_events(description)
            if JobState.from_description(description).terminal:
                if self.tailer is None:
                    break
                if self.tailer.throttled and final_retries:
                    # The last lines are still to come: read again after a longer pause.
                    final_retries -= 1
                    pause = backend.min_poll * 2 ** (_MAX_DRAIN_ATTEMPTS - final_retries)
                    backend.sleep(min(pause, backend.max_poll))
                    continue
                if not ending:
                    # One more read: CloudWatch gets the last lines a little after the status
                    # changes (no pause for a job that had ended before we started following).
                    ending = True
                    if not started_done:
                        backend.sleep(backend.min_poll)
                    continue
                if not got:
                    break
                continue  # more pages are waiting: read on
            delay = backend.min_poll if (changed or got) else min(delay * 2, backend.max_poll)
            backend.sleep(delay)
            if self.tailer is None or backend.clock() - last_describe >= backend.status_interval:
                try:
                    description = backend._poll_describe(self.name)
                    transient = 0
                except _Transient as exc:
                    transient += 1
                    logger.debug(
                        "Describing %s failed (%d in a row): %s", self.name, transient, exc
                    )
                    if transient >= MAX_TRANSIENT_POLLS:
                        raise JobError(
                            f"Following training job {self.name} failed {transient} times in a "
                            f"row ({exc}). The job itself keeps running on SageMaker: follow it "
                            f"again with `launchbay logs {self.name} --follow` or "
                            f"Estimator.attach({self.name!r}).latest_training_job.wait()."
                        ) from exc.__cause__
                last_describe = backend.clock()
        summary = billing_summary(self.name, description)
        if summary:
            logger.info("%s", summary)
            if self.lines:
                yield Notice(summary)
        logger.info(
            "Training job %s ended %s", self.name, JobState.from_description(description).status
        )
        yield JobEnded(description)


# --------------------------------------------------------------------------- the backend


class SageMakerBackend(Backend):
    """Runs CreateTrainingJob requests as SageMaker training jobs and follows them.

    Args:
        session: A :class:`launchbay.Session` (its ``sagemaker_client`` and
            ``logs_client`` are used); ``None`` makes one on first use.
        stream: Where job output is printed (default: ``sys.stdout`` at the time
            of each call).
        sleep: Waits between polls (injectable for tests).
        clock: A monotonic clock in seconds (injectable for tests).
        min_poll: First and shortest pause between polls, in seconds.
        max_poll: Longest pause between polls, in seconds.
        status_interval: Shortest time between two DescribeTrainingJob calls
            while logs are being read.
        log_page_size: ``limit`` of each GetLogEvents call (default: the
            service's, up to 10,000 events or 1 MB).
        metrics_interval: Shortest time between two reads of the job's newest
            metric values while it runs, in seconds (0: never read them).
    """

    name = "sagemaker"

    def __init__(
        self,
        session: Any = None,
        *,
        stream: TextIO | None = None,
        sleep: Callable[[float], object] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        min_poll: float = MIN_POLL_SECONDS,
        max_poll: float = MAX_POLL_SECONDS,
        status_interval: float = STATUS_INTERVAL_SECONDS,
        log_page_size: int | None = None,
        metrics_interval: float = METRICS_INTERVAL_SECONDS,
    ) -> None:
        if not min_poll > 0 or not max_poll >= min_poll:
            raise ConfigurationError.invalid(
                "min_poll/max_poll", (min_poll, max_poll), "0 < min_poll <= max_poll (seconds)"
            )
        if log_page_size is not None and not 1 <= log_page_size <= 10_000:
            raise ConfigurationError.invalid("log_page_size", log_page_size, "1 to 10000")
        self._session = session
        self.stream = stream
        self.sleep = sleep
        self.clock = clock
        self.min_poll = float(min_poll)
        self.max_poll = float(max_poll)
        self.status_interval = float(status_interval)
        self.log_page_size = log_page_size
        self.metrics_interval = float(metrics_interval)

    def __repr__(self) -> str:
        return f"SageMakerBackend(session={self._session!r})"

    @property
    def session(self) -> Any:
        """The :class:`launchbay.Session` (made from the environment on first use)."""
        if self._session is None:
            # Deferred: the session imports boto3, and the backend is made before it is used.
            from launchbay.session import Session

            self._session = Session()
        return self._session

    @session.setter
    def session(self, value: Any) -> None:
        self._session = value

    def owns(self, name: str) -> bool:
        """Every job name may be a SageMaker job: the service says whether it exists.

        The registry asks the local backends first, so this is the last answer.
        """
        return True

    # -- plumbing -------------------------------------------------------------------
    def _region(self) -> str:
        try:
            return str(self.session.boto_region_name)
        except LaunchbayError:
            return "the configured region"

    def _call(self, operation: str, name: str | None, **kwargs: Any) -> dict[str, Any]:
        from botocore import xform_name

        client = self.session.sagemaker_client
        try:
            return getattr(client, xform_name(operation))(**kwargs)
        except _botocore_errors() as exc:
            raise _job_error(operation, name, exc, self._region()) from exc

    def _poll_describe(self, name: str) -> dict[str, Any]:
        """DescribeTrainingJob for a poll: transient failures raise :class:`_Transient`."""
        try:
            return self.session.sagemaker_client.describe_training_job(TrainingJobName=name)
        except _botocore_errors() as exc:
            if _is_transient(exc):
                raise _Transient(str(exc)) from exc
            raise _job_error("DescribeTrainingJob", name, exc, self._region()) from exc

    def output_stream(self, stream: TextIO | None = None) -> TextIO:
        """Where :meth:`wait` and :meth:`print_logs` print: ``stream``, the backend's, or stdout."""
        return stream or self.stream or sys.stdout

    # -- the Backend interface ------------------------------------------------------
    def check(self, plan: JobPlan) -> None:
        """Refuse a plan placed elsewhere, without a call.

        The request itself was checked once, where the plan was made
        (:func:`launchbay.backends.plan.plan_request`: what CreateTrainingJob
        accepts and what SageMaker needs, ``file://`` URIs and local instance
        types refused).

        Raises:
            ConfigurationError: the plan is placed on another backend.
        """
        super().check(plan)

    def run(self, plan: JobPlan) -> TrainingJob:
        """Check the plan, create the training job and return its handle at once.

        Raises:
            ConfigurationError: the request cannot go to SageMaker (:meth:`check`).
            JobError: CreateTrainingJob failed (the message says what to do next).
        """
        self.check(plan)
        name = plan.name
        response = self._call("CreateTrainingJob", name, **dict(plan.request))
        region = self._region()
        logger.info(
            "Created SageMaker training job %s (%s); console: "
            "https://%s.console.aws.amazon.com/sagemaker/home?region=%s#/jobs/%s",
            name,
            response.get("TrainingJobArn", ""),
            region,
            region,
            name,
        )
        return TrainingJob(name, self)

    def describe(self, name: str) -> dict[str, Any]:
        """The job's DescribeTrainingJob response.

        Raises:
            JobError: no such job, no permission, or SageMaker unreachable.
        """
        return self._call("DescribeTrainingJob", name, TrainingJobName=name)

    def events(
        self, name: str, *, lines: bool = True, status: bool = True, follow: bool = True
    ) -> Iterator[Event]:
        """The job's status and CloudWatch lines as events (see the module docstring).

        With ``follow``, until the job ends and its last lines are in (the last
        event is :class:`~launchbay.backends.events.JobEnded`, after the billing
        summary when lines are followed); without, the lines there are now.

        Raises:
            JobError: the job cannot be described (no such job, no permission),
                :data:`MAX_TRANSIENT_POLLS` polls in a row failed, or only lines
                were asked for and they cannot be read.
        """
        description = self.describe(name)
        yield JobHosts(name, tuple(_host_names(description)))
        follower = _Follower(
            self, name, status=status, lines=lines, hosts=_instance_count(description)
        )
        if follow and (status or not JobState.from_description(description).terminal):
            yield from follower.run(description)
        else:
            yield from follower.drain()

    def interrupted(self, name: str) -> str:
        """Ctrl-C only stops following: the job keeps running on SageMaker (how to go on)."""
        return (
            f"[launchbay] Stopped following training job {name}; it keeps running on "
            f"SageMaker. Follow it again with `launchbay logs {name} --follow` or "
            f"Estimator.attach({name!r}).latest_training_job.wait(); stop it with "
            f"`launchbay stop {name}`."
        )

    def stop(self, name: str) -> None:
        """Ask SageMaker to stop the job (it goes Stopping, then Stopped).

        Stopping a job that already ended does nothing.

        Raises:
            JobError: no such job, or StopTrainingJob failed.
        """
        try:
            self.session.sagemaker_client.stop_training_job(TrainingJobName=name)
        except _botocore_errors() as exc:
            if _error_code(exc) == "ValidationException" and not _not_found(exc):
                status = JobState.from_description(self.describe(name)).status
                if status in TERMINAL_STATUSES:
                    logger.info("Training job %s already ended (%s); nothing to stop", name, status)
                    return
            raise _job_error("StopTrainingJob", name, exc, self._region()) from exc
        logger.info("Requested to stop training job %s", name)

    def list_jobs(self, max_results: int = 20, status: str | None = None) -> list[dict[str, Any]]:
        """The newest training jobs: ListTrainingJobs summaries, newest first.

        Args:
            max_results: How many jobs at most.
            status: Only jobs with this ``TrainingJobStatus`` (one of :data:`JOB_STATUSES`).

        Raises:
            ConfigurationError: a bad ``max_results`` or ``status``.
            JobError: ListTrainingJobs failed.
        """
        if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
            raise ConfigurationError.invalid("max_results", max_results, "an integer 1 or more")
        if status is not None and status not in JOB_STATUSES:
            raise ConfigurationError.invalid("status", status, ", ".join(JOB_STATUSES))
        jobs: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"SortBy": "CreationTime", "SortOrder": "Descending"}
        if status is not None:
            kwargs["StatusEquals"] = status
        while len(jobs) < max_results:
            kwargs["MaxResults"] = min(100, max_results - len(jobs))
            response = self._call("ListTrainingJobs", None, **kwargs)
            jobs.extend(response.get("TrainingJobSummaries", []))
            token = response.get("NextToken")
            if not token:
                break
            kwargs["NextToken"] = token

        def created(job: Mapping[str, Any]) -> float:
            value = JobState.from_description(job).creation_time
            return value.timestamp() if value is not None else 0.0

        jobs.sort(key=created, reverse=True)  # stable; the service sorts already
        return jobs[:max_results]

    # -- failure triage -------------------------------------------------------------
    def failure_log_tail(
        self,
        name: str,
        description: Mapping[str, Any] | None = None,
        lines: int = TAIL_LINES,
    ) -> LogTail | None:
        """The last ``lines`` log lines of the host that failed first, or None.

        Best effort: reading the logs never hides the failure itself, so any
        error here gives None. The host is chosen as the module docstring says.
        """
        try:
            if description is None:
                description = self.describe(name)
            return self._failure_log_tail(name, description, lines)
        except _botocore_errors(LaunchbayError) as exc:
            logger.debug("Could not read the last log lines of %s: %s", name, exc)
            return None

    def _failure_log_tail(
        self, name: str, description: Mapping[str, Any], lines: int
    ) -> LogTail | None:
        client = self.session.logs_client
        tailer = _LogTailer(client, name, _instance_count(description), None)
        tailer.discover()
        windows: dict[str, list[tuple[int, str]]] = {}
        for stream in tailer.streams:
            response = client.get_log_events(
                logGroupName=LOG_GROUP,
                logStreamName=stream,
                startFromHead=False,
                limit=TAIL_WINDOW,
            )
            windows[stream] = [
                (int(event.get("timestamp", 0)), line)
                for event in response.get("events", [])
                for line in _lines_of(event["message"])
            ]
        failed = pick_failed_stream(
            windows, tailer.hosts, JobState.from_description(description).failure_reason or ""
        )
        if failed is None:
            return None
        tail = [line for _, line in windows[failed]][-lines:]
        return LogTail(tailer.hosts[failed], f"CloudWatch Logs {LOG_GROUP}, stream {failed}", tail)


def pick_failed_stream(
    windows: Mapping[str, list[tuple[int, str]]],
    hosts: Mapping[str, str],
    reason: str = "",
) -> str | None:
    """The stream of the host that failed first (the heuristic of the module docstring).

    Args:
        windows: The last ``(timestamp, line)`` pairs of each stream.
        hosts: The host of each stream.
        reason: The job's ``FailureReason``.
    """
    candidates = {s: w for s, w in windows.items() if w}
    if not candidates:
        return None

    def order(stream: str) -> tuple[tuple[str, int], str]:
        return _host_order(hosts.get(stream, stream)), stream

    named = set(_HOST_IN_TEXT_RE.findall(reason))
    if len(named) == 1:
        host = named.pop()
        matching = [s for s in candidates if hosts.get(s) == host]
        if matching:  # the latest attempt of that host
            return max(matching, key=lambda s: (candidates[s][-1][0], s))
    marks = {}
    for stream, window in candidates.items():
        first = next((ts for ts, line in window if _ERROR_MARK_RE.search(line)), None)
        if first is not None:
            marks[stream] = first
    if marks:
        return min(marks, key=lambda s: (marks[s], order(s)))
    return min(candidates, key=lambda s: (candidates[s][-1][0], order(s)))
