"""The local root every local file of launchbay lives under: ``$LAUNCHBAY_HOME``, else ``~/.launchbay``.

Jobs (``jobs/``), the S3 and code caches (``cache/``), outputs of local runs
(``output/``), job names and detached clients each have a folder there.

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
    except OSError as exc:
        raise unusable_home_error(tested, exc) from exc
    _checked.add(root)
    return root


def local_dir(*parts: str) -> str:
    """The folder ``<local root>/<parts>``, made if missing.

    Raises:
        ConfigurationError: it cannot be made (see :func:`usable_local_home`).
    """
    root = usable_local_home()
    path = os.path.join(root, *parts)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise unusable_home_error(path, exc) from exc
    return path
