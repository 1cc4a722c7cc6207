"""Job names: checked, derived from a base, and claimed on this machine so they never repeat.

:func:`name_from_base` makes the names launchbay gives jobs (SDK v2's pattern,
``<base>-YYYY-MM-DD-HH-MM-SS-mmm``); each is claimed by an exclusive create in one
directory of this user's on this machine, whatever ``LAUNCHBAY_HOME`` each process uses,
so two processes never get the same name: local Docker jobs name their containers and
network after the job, on an engine every home shares.
"""

from __future__ import annotations

import math
import os
import re
import stat
import tempfile
import time
from typing import Any

from launchbay._home import local_home
from launchbay._patterns import JOB_NAME_RE
from launchbay.errors import ConfigurationError

__all__ = ["base_name_from_image", "name_from_base", "validate_job_name"]

#: Seconds a generated name's claim file is kept (see :func:`name_from_base`).
_NAME_CLAIM_SECONDS = 300.0
_last_stamp_ms = 0


def _stamp(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%d-%H-%M-%S", time.gmtime(seconds)) + f"-{millis:03d}"


def _names_dir() -> str:
    """``$TMPDIR/launchbay-names-<uid>`` (0700, this user's), else ``<local home>/names``."""
    shared = os.path.join(tempfile.gettempdir(), f"launchbay-names-{os.getuid()}")
    try:
        os.mkdir(shared, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return os.path.join(local_home(), "names")
    try:
        found = os.lstat(shared)
    except OSError:
        return os.path.join(local_home(), "names")
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():  # not ours: not used
        return os.path.join(local_home(), "names")
    return shared


def _forget_old_claims(directory: str, now: float) -> None:
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        try:
            if now - entry.stat().st_mtime > _NAME_CLAIM_SECONDS:
                os.unlink(entry.path)
        except OSError:
            continue


def _claim(directory: str, name: str) -> bool:
    """Atomically claim ``name`` on this machine (False: another caller has it)."""
    try:
        os.close(
            os.open(os.path.join(directory, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        )
    except FileExistsError:
        return False
    return True


def name_from_base(base: str, max_length: int = 63) -> str:
    """``base`` trimmed, with a millisecond UTC timestamp appended (as SDK v2 names jobs).

    Names stay in SDK v2's pattern (``<base>-YYYY-MM-DD-HH-MM-SS-mmm``) and never
    repeat on this machine: within a process the millisecond only goes up, and
    across processes (whatever their ``LAUNCHBAY_HOME``) each name is claimed by an
    exclusive create in ``$TMPDIR/launchbay-names-<uid>/`` (or ``<local home>/names/``
    where that is not this user's directory); a name already claimed takes the next
    millisecond. Claims older than a few minutes are removed. If the claim
    directory cannot be written, the in-process guarantee alone holds.
    """
    global _last_stamp_ms
    now = time.time()
    ms = max(int(math.floor(now * 1000)), _last_stamp_ms + 1)
    directory = _names_dir()
    try:
        os.makedirs(directory, exist_ok=True)
        _forget_old_claims(directory, now)
        usable = True
    except OSError:
        usable = False
    for _ in range(10_000):
        stamp = _stamp(ms)
        name = f"{base[: max_length - len(stamp) - 1]}-{stamp}"
        try:
            if not usable or _claim(directory, name):
                break
        except OSError:
            break
        ms += 1
    _last_stamp_ms = ms
    return name


def base_name_from_image(image: str) -> str:
    """The repository name of an image URI: ``.../pytorch-training:2.3`` -> ``pytorch-training``."""
    match = re.match(r"^(.+/)?([^:/]+)(:[^:]+)?$", image)
    return match.group(2) if match else image


def validate_job_name(name: Any, argument: str = "job_name") -> str:
    if not isinstance(name, str) or not JOB_NAME_RE.match(name):
        raise ConfigurationError.invalid(
            argument,
            name,
            "1-63 characters: letters, digits and hyphens, starting with a letter or digit "
            "(pattern ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62})",
        )
    return name
