"""A local job's TensorBoard files, copied to ``TensorBoardOutputConfig.S3OutputPath`` as it runs.

SageMaker copies the TensorBoard directory (``LocalPath``, default
``/opt/ml/output/tensorboard``) of every host to S3 while the job runs. A local job
does the same, from the client's side:

* **where from**: each host's own directory. A ``local_process`` host sees
  ``/opt/ml/...`` under its directory of the job (``<job dir>/algo-N/output/tensorboard``
  for the default); a ``LocalPath`` outside ``/opt/ml`` is that path on this machine,
  which the hosts share (read once). A container gets ``<job dir>/algo-N/output/tensorboard``
  mounted at its ``LocalPath``.
* **where to**: ``<S3OutputPath>/<job name>/tensorboard-output/<path below LocalPath>``
  (``s3://`` or ``file://``), where SDK v2's ``latest_job_tensorboard_artifacts_path()``
  looks. Every host's files go to that one prefix, as on SageMaker, where each host
  syncs its own directory there; on a name clash the first host's file wins (as for
  ``model.tar.gz``). TensorBoard names its event files after the host and process
  (``events.out.tfevents.<time>.<hostname>.<pid>.<n>``), so hosts rarely clash.
* **when**: every :data:`SYNC_SECONDS` by a thread of the client (:class:`TensorBoardSync`,
  started once the hosts started, stopped when they ended), and once more when the job
  ends, in any state (with the outputs: :meth:`Outputs.sync_tensorboard
  <launchbay.backends.local.outputs.Outputs.sync_tensorboard>`).
* **what**: each file (and link inside the directory) new or changed since its last copy:
  its size, modification time or host differ from the copy's. What was copied is
  recorded in ``artifacts/tensorboard-synced.json``, so the copy at the end (also from a
  watchdog, when the client is gone) sends only what changed. Files deleted on a host
  stay at the destination. A file is copied as it is at that moment: an event file
  still being written is copied again, whole, once it changed (S3 has no append);
  ``file://`` copies appear atomically (temporary file, then rename).

Nothing is ever read through a link out of the directory (see
:func:`launchbay.runtime.for_client.scan_tree`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from launchbay._runner import cancelled_by
from launchbay.backends.local.layout import JobLayout, join_uri, write_json_atomic
from launchbay.backends.plan import JobFields
from launchbay.debugger import TENSORBOARD_PATH_ACCEPTED, tensorboard_path_problem
from launchbay.errors import ConfigurationError
from launchbay.runtime.contract import (
    DEFAULT_TENSORBOARD_PATH,
    rewrite_container_path,
)
from launchbay.runtime.for_client import TreeEntry, scan_tree
from launchbay.s3uri import is_file_uri, is_s3_uri

__all__ = [
    "SYNC_SECONDS",
    "TENSORBOARD_OUTPUT",
    "TensorBoardSync",
    "changed_entries",
    "check_request",
    "destination",
    "record_copied",
    "tensorboard_dirs",
]

logger = logging.getLogger("launchbay.backends.local")

#: Seconds between two copies while the job runs.
SYNC_SECONDS = 5.0
#: The folder below ``<S3OutputPath>/<job name>`` that receives the files.
TENSORBOARD_OUTPUT = "tensorboard-output"
#: What was copied (by relative path: host directory, size, mtime), in the artifacts dir.
_MANIFEST = "tensorboard-synced.json"


def check_request(source: JobFields | Mapping[str, Any]) -> None:
    """Refuse a ``LocalPath`` a host's tree cannot take, before anything is made.

    The estimator refuses it when the config is made; a request built otherwise (a
    hand-written one, ``attach``) is checked here, by the same rule. ``source`` is
    the job's plan (a bare request is derived the same way).
    """
    config = JobFields.of(source).tensorboard
    local_path = config.given_path if config is not None else None
    if local_path is None:
        return
    problem = tensorboard_path_problem(local_path)
    if problem:
        raise ConfigurationError.invalid(
            "container_local_output_path",
            local_path,
            TENSORBOARD_PATH_ACCEPTED,
            reason=f"TensorBoardOutputConfig LocalPath: it {problem}",
        )


def destination(source: JobFields | Mapping[str, Any]) -> str | None:
    """``<S3OutputPath>/<job>/tensorboard-output``, or ``None`` without a TensorBoard config."""
    plan = JobFields.of(source)
    target = plan.tensorboard.uri if plan.tensorboard is not None else None
    if not target or not (is_file_uri(target) or is_s3_uri(target)):
        return None
    return join_uri(target, plan.job_name, TENSORBOARD_OUTPUT)


def container_path(source: JobFields | Mapping[str, Any]) -> str:
    """The TensorBoard directory as a host sees it (``LocalPath``, else the default)."""
    config = JobFields.of(source).tensorboard
    return config.local_path if config is not None else DEFAULT_TENSORBOARD_PATH


def tensorboard_dirs(source: JobFields | Mapping[str, Any], layout: JobLayout) -> list[str]:
    """Each host's TensorBoard directory on this machine, in host order (a shared one once).

    ``source`` is the plan as the hosts' trees look here (``LocalJob.host_plan``:
    a container's ``LocalPath`` is mounted from the default place in its tree); a
    bare request is derived the same way.
    """
    plan = JobFields.of(source)
    if plan.tensorboard is None:
        return []
    seen = container_path(plan)
    dirs: list[str] = []
    for host in layout.hosts:
        directory = rewrite_container_path(seen, layout.host_dir(host))
        if directory not in dirs:
            dirs.append(directory)
    return dirs


def _is_below(path: str, directory: str) -> bool:
    return os.path.abspath(path).startswith(os.path.abspath(directory).rstrip(os.sep) + os.sep)


def _fingerprint(entry: TreeEntry, directory: str) -> list[Any] | None:
    """What tells a copied entry from a changed one: its host dir, size and mtime (or link)."""
    try:
        if entry.kind == "link":
            return [directory, "->", os.readlink(entry.path)]
        stat = os.lstat(entry.path)
    except OSError:
        return None
    return [directory, stat.st_size, stat.st_mtime_ns]


def _read_manifest(layout: JobLayout) -> dict[str, Any]:
    try:
        with open(os.path.join(layout.artifacts_dir, _MANIFEST), encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) else {}


def changed_entries(
    source: JobFields | Mapping[str, Any],
    layout: JobLayout,
    warned: set[tuple[str, str]] | None = None,
) -> tuple[list[TreeEntry], dict[str, Any]]:
    """The entries of every host's TensorBoard dir new or changed since their last copy.

    Returns them (sorted by relative path; the first host's entry on a name clash)
    with their fingerprints by relative path, for :func:`record_copied`. What a scan
    leaves out (a link out of the directory, a FIFO ...) is logged once per ``warned``.
    """
    plan = JobFields.of(source)
    copied = _read_manifest(layout)
    chosen: dict[str, tuple[TreeEntry, list[Any]]] = {}
    for directory in tensorboard_dirs(plan, layout):
        # A host's own directory is read without following a link anywhere below the
        # job directory; a shared one outside it (LocalPath outside /opt/ml) from its parent.
        base = layout.job_dir if _is_below(directory, layout.job_dir) else None
        scan = scan_tree(directory, [container_path(plan)], base)
        for rel, why in scan.skipped:
            key = (directory, rel)
            if warned is None or key not in warned:
                logger.warning(
                    "Not copying TensorBoard file %s: %s", os.path.join(directory, rel), why
                )
                if warned is not None:
                    warned.add(key)
        for entry in scan.entries:
            if entry.rel in chosen:
                continue
            fingerprint = _fingerprint(entry, directory)
            if fingerprint is not None:
                chosen[entry.rel] = (entry, fingerprint)
    changed = {rel: pair for rel, pair in chosen.items() if copied.get(rel) != pair[1]}
    entries = [changed[rel][0] for rel in sorted(changed)]
    return entries, {rel: pair[1] for rel, pair in changed.items()}


def record_copied(layout: JobLayout, fingerprints: Mapping[str, Any]) -> None:
    """Remember ``fingerprints`` (of entries just copied) in the job's manifest."""
    if not fingerprints:
        return
    manifest = _read_manifest(layout)
    manifest.update(fingerprints)
    write_json_atomic(os.path.join(layout.artifacts_dir, _MANIFEST), manifest)


class TensorBoardSync:
    """Calls ``sync`` every ``interval`` seconds on a thread of its own, until :meth:`stop`.

    A copy in flight when :meth:`stop` is called (or when an event of ``cancel`` is
    set) stops at its next chunk; the copy made when the job ends sends the rest. A
    failing copy is logged (once per distinct message) and tried again at the next
    turn: TensorBoard's copy never fails a job while it runs.
    """

    def __init__(
        self,
        name: str,
        sync: Callable[[], object],
        interval: float | None = None,
        cancel: Sequence[tuple[threading.Event, str]] = (),
    ) -> None:
        self.name = name
        self._sync = sync
        self.interval = SYNC_SECONDS if interval is None else interval
        self._cancel = list(cancel)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._errors: set[str] = set()

    def start(self) -> TensorBoardSync:
        self._thread = threading.Thread(
            target=self._run, name=f"launchbay-tensorboard-{self.name}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the thread (a copy in flight is cancelled) and wait for it."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sync_once()

    def sync_once(self) -> None:
        """One copy of what changed; failures are logged, never raised."""
        with contextlib.ExitStack() as stack:
            stack.enter_context(cancelled_by(self._stop, "the TensorBoard copy ended"))
            for event, reason in self._cancel:
                stack.enter_context(cancelled_by(event, reason))
            try:
                self._sync()
            except Exception as exc:
                if self._stop.is_set() or any(event.is_set() for event, _ in self._cancel):
                    return  # cancelled: the copy at the end sends the rest
                message = f"{type(exc).__name__}: {exc}"
                if message not in self._errors:
                    self._errors.add(message)
                    logger.warning(
                        "Copying the TensorBoard files of job %s failed (tried again in %g s): %s",
                        self.name,
                        self.interval,
                        message,
                    )
