"""The local root every local file of launchbay lives under: ``$LAUNCHBAY_HOME``, else ``~/.launchbay``.

Jobs (``jobs/``), the S3 and code caches (``cache/``), staged code
(``source/``), tuning jobs (``tuning/``), machine-wide locks (``locks/``),
outputs of local runs (``output/``), job names and detached clients each have a
folder there.

What launchbay keeps there is its user's alone: a root it makes is 0700, and so
are the folders it keeps its records in (:data:`PRIVATE_DIRS`, made 0700 by
:func:`usable_local_home` before anything is written, and every folder
:func:`local_dir` makes), so no file below them is reachable by another user
whatever its own mode; the files that hold a job's secrets are 0600 besides.

:func:`local_home` is the path only (reading a job touches nothing).
:func:`usable_local_home` and :func:`local_dir` are for whoever is about to write
there: a root that is a file, lies under a file, or cannot be written (a
read-only file system, ``/proc``, no permission) is refused with a
:class:`~launchbay.errors.ConfigurationError` naming ``LAUNCHBAY_HOME``, its value
and what is needed, never a bare ``OSError`` from deep inside a job.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile

from launchbay.errors import ConfigurationError

__all__ = ["local_dir", "local_home", "usable_local_home", "unusable_home_error"]

ENV = "LAUNCHBAY_HOME"
_checked: set[str] = set()

#: The folders of the local root that hold launchbay's own records: always 0700.
#: (``output/`` holds what jobs publish, as any ``file://`` output path does.)
PRIVATE_DIRS = ("jobs", "cache", "source", "tuning", "locks", "names", "cli")


def local_home() -> str:
    """The local root: ``$LAUNCHBAY_HOME``, else ``~/.launchbay`` (absolute), read at each call."""
    root = os.environ.get(ENV) or "~/.launchbay"
    return os.path.abspath(os.path.expanduser(root))


def unusable_home_error(path: str, exc: BaseException) -> ConfigurationError:
    """The error for a local root (or a folder under it) that cannot be made or written."""
    configured = os.environ.get(ENV)
    unset = "" if configured else "It is unset, so the default ~/.launchbay is used. "
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return ConfigurationError.invalid(
        ENV,
        configured or local_home(),
        "a directory this user can create and write to (set LAUNCHBAY_HOME to one)",
        reason=f"{unset}launchbay keeps local jobs, their outputs and caches there, but "
        f"writing in {path} failed: {reason}",
    )


def _probe(directory: str) -> None:
    """Create and remove a file in ``directory``: the only sure test that it can be written."""
    fd, path = tempfile.mkstemp(prefix=".launchbay-probe-", dir=directory)
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(path)


def usable_local_home() -> str:
    """:func:`local_home`, checked: it can be made and written (once per process and path).

    Nothing is left behind: an existing root gets a probe file, removed at once;
    a missing one is tried in its nearest existing parent (a probe folder,
    removed at once). Whoever writes there makes the folders it needs.

    Raises:
        ConfigurationError: the root cannot be made or written (``argument``
            is ``LAUNCHBAY_HOME``).
    """
    root = local_home()
    if root in _checked:
        return root
    tested = root
    try:
        if os.path.lexists(root):
            if not os.path.isdir(root):
                raise NotADirectoryError(errno.ENOTDIR, "it is not a directory", root)
            _probe(root)
        else:
            while not os.path.lexists(tested) and tested != os.path.dirname(tested):
                tested = os.path.dirname(tested)
            if not os.path.isdir(tested):
                raise NotADirectoryError(errno.ENOTDIR, "it is not a directory", tested)
            os.rmdir(tempfile.mkdtemp(prefix=".launchbay-probe-", dir=tested))
            _make_private(root, tested)
        for name in PRIVATE_DIRS:
            _make_private(os.path.join(root, name), root)
    except OSError as exc:
        raise unusable_home_error(tested, exc) from exc
    _checked.add(root)
    return root


def _make_private(path: str, above: str) -> None:
    """Make ``path`` and its missing parents below ``above`` as 0700 folders; ``path`` is made 0700.

    A folder below ``above`` that is a symbolic link is refused (``NotADirectoryError``):
    launchbay never keeps its records through a link someone else could point anywhere.
    """
    parts = os.path.relpath(path, above).split(os.sep)
    current = above
    for part in parts:
        if part in ("", "."):
            continue
        current = os.path.join(current, part)
        try:
            os.mkdir(current, 0o700)
        except FileExistsError:
            if os.path.islink(current) or not os.path.isdir(current):
                raise NotADirectoryError(
                    errno.ENOTDIR, "it is not a directory (or is a symbolic link)", current
                ) from None
            if current != path:
                continue
        os.chmod(current, 0o700)  # the umask may have taken bits; an old folder is tightened


def local_dir(*parts: str) -> str:
    """The folder ``<local root>/<parts>``, made if missing; it and every folder made for it are 0700.

    Raises:
        ConfigurationError: it cannot be made (see :func:`usable_local_home`).
    """
    root = usable_local_home()
    path = os.path.join(root, *parts)
    try:
        _make_private(path, root)
    except OSError as exc:
        raise unusable_home_error(path, exc) from exc
    return path
