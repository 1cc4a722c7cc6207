"""One safe extraction for every tar archive launchbay unpacks: :func:`safe_extract`.

Every archive, whoever wrote it (a user's ``sourcedir.tar.gz``, the tree a Ray
node sends back, a host's config), is unpacked here and nowhere else. The rules
do not depend on tarfile's ``data`` filter, which Python 3.10 before 3.10.12
and 3.11 before 3.11.4 lack (Debian 12's ``python3`` 3.11.2 among them):
:func:`refused_members` simulates the extraction member by member and decides
what may be written; where this Python has the filter it is a second guard.

Two ways to deal with a refused member:

* ``whole=True`` (the code archive): the archive is refused whole with
  :class:`~launchbay.runtime.errors.UnsafeArchiveError` before anything is
  written; a member that then cannot be written removes again what was written.
* otherwise: each refused member is skipped with a warning naming it and why,
  and every other member is still written: nothing aborts midway. What could not
  be written (an ``OSError``) is reported the same way, apart
  (:attr:`Extraction.failed`), for callers to whom a lost file is a failure.

Every member is written with its mode tamed: no set-user-ID, set-group-ID or
sticky bit, no write for group or others, always readable and writable by its
owner, owned by whoever extracts. ``private=True`` (files under
``$LAUNCHBAY_HOME``) takes group and others out altogether: directories 0700,
files 0600 (0700 when the archive had them executable).

Standard library only, as the whole runtime.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import shutil
import stat
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO

from launchbay.runtime._confine import INSIDE, resolve
from launchbay.runtime.errors import TrainingSetupError, UnsafeArchiveError

__all__ = ["Extraction", "has_data_filter", "refused_members", "safe_extract"]

logger = logging.getLogger("launchbay.runtime")

Parts = tuple[str, ...]


def has_data_filter() -> bool:
    """Whether this Python's tarfile has extraction filters (3.10.12+, 3.11.4+, 3.12+)."""
    return hasattr(tarfile, "data_filter")


@dataclass
class Extraction:
    """What :func:`safe_extract` left out: ``(member name, why)`` pairs, in archive order."""

    #: Refused by the rules (or by tarfile's ``data`` filter, the second guard).
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: Accepted, but could not be written (the ``OSError`` in words).
    failed: list[tuple[str, str]] = field(default_factory=list)


def _split(name: str) -> list[str]:
    return [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]


def _check(members: Sequence[tarfile.TarInfo], root: str, left_out: set[int]) -> dict[int, str]:
    """One simulated extraction of ``members`` but ``left_out`` into ``root``: index -> why refused.

    The picture of the tree is what extraction will leave: every path is
    resolved component by component through the links already in the archive
    (and those already in ``root``), as the kernel will when the member is
    written (:func:`launchbay.runtime._confine.resolve`); symbolic links are
    checked again against the final tree, since a later member can re-point a
    link their target goes through.
    """
    tree: dict[Parts, str | None] = {}  # path -> link target; None: written, not a link
    dirs: set[Parts] = set()

    def readlink(parts: Parts) -> str | None:
        if parts in tree:
            return tree[parts]
        path = os.path.join(root, *parts)
        try:
            return os.readlink(path) if os.path.islink(path) else None
        except OSError:
            return None

    def inside(parts: Sequence[str]) -> Parts | None:
        where, resolved = resolve(list(parts), readlink)
        return resolved if where == INSIDE else None

    def is_dir(parts: Parts) -> bool:
        if parts in dirs:
            return True
        if parts in tree:
            return False
        path = os.path.join(root, *parts)
        return os.path.isdir(path) and not os.path.islink(path)

    refused: dict[int, str] = {}
    links: list[tuple[int, Parts, str]] = []
    for index, member in enumerate(members):
        if index in left_out:
            continue
        name = member.name
        parts = _split(name)
        if name.startswith(("/", "\\")):
            refused[index] = "an absolute path"
            continue
        if ".." in parts:
            refused[index] = "a '..' in its path"
            continue
        if not parts:
            refused[index] = "an empty path"
            continue
        if member.isdev() or member.isfifo():
            refused[index] = "a device or FIFO"
            continue
        if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
            refused[index] = "neither a file, a directory nor a link"
            continue
        parent = inside(parts[:-1])
        if parent is None:
            refused[index] = "its directory leads outside through links (or into a loop)"
            continue
        for depth in range(1, len(parent) + 1):
            dirs.add(parent[:depth])
        here = (*parent, parts[-1])
        if member.issym():
            if member.linkname.startswith(("/", "\\")):
                refused[index] = f"a symbolic link to the absolute path {member.linkname!r}"
                continue
            if is_dir(here):
                refused[index] = "a symbolic link in place of a directory"
                continue
            tree[here] = member.linkname  # tarfile replaces what was there
            links.append((index, parent, member.linkname))
            continue
        target = inside(here)  # open(), mkdir() and chmod() follow a final link
        if target is None:
            refused[index] = "it would be written through a link that leads outside"
            continue
        if member.islnk():
            link_target = member.linkname.replace("\\", "/")
            if link_target.startswith("/") or inside(_split(link_target)) is None:
                refused[index] = f"a hard link to {member.linkname!r}, which is outside"
                continue
        tree[target] = None
        if member.isdir():
            dirs.add(target)
    for index, parent, linkname in links:
        if (
            index not in refused
            and inside([*parent, *linkname.replace("\\", "/").split("/")]) is None
        ):
            refused[index] = (
                f"a symbolic link to {linkname!r}, which leads outside (or into a loop)"
            )
    return refused


def _refusals(members: Sequence[tarfile.TarInfo], destination: str) -> dict[int, str]:
    """Index -> why, for every member the rules refuse, as extraction without them will go.

    A refused symbolic link is not written, so paths that went through it
    resolve differently: the check runs again without the refused members until
    nothing more is refused.
    """
    root = os.path.realpath(destination)
    refused: dict[int, str] = {}
    while True:
        more = _check(members, root, set(refused))
        refused.update(more)
        if not any(members[i].issym() for i in more):
            return refused


def refused_members(archive: tarfile.TarFile, destination: str) -> list[tuple[str, str]]:
    """``(name, why)`` of each member of ``archive`` :func:`safe_extract` would not write.

    Refused: absolute names, ``..`` segments, devices, FIFOs and other special
    members; a member whose directory, or (for files, directories and hard
    links) whose own path, resolves outside ``destination`` -- a chain such as
    ``a -> .`` then ``b -> a/..`` then ``b/evil.py`` is caught; a symbolic link
    whose target is absolute, or resolves outside or into a loop in the final
    tree, or that would replace a directory; a hard link whose target resolves
    outside.
    """
    members = archive.getmembers()
    refused = _refusals(members, destination)
    return [(members[i].name, why) for i, why in sorted(refused.items())]


def _tamed(member: tarfile.TarInfo, private: bool) -> tarfile.TarInfo:
    """A copy of ``member`` with the mode and owner :func:`safe_extract` writes."""
    info = copy.copy(member)
    keep = 0o700 if private else 0o755
    if info.isdir():
        info.mode = (info.mode & keep) | 0o700
    elif not info.issym():
        info.mode = (info.mode & keep) | 0o600
        if not info.mode & 0o100:
            info.mode &= ~0o111
    info.uid, info.gid = os.geteuid(), os.getegid()
    info.uname = info.gname = ""
    return info


def _make_private(destination: str) -> None:
    """Directories 0700, files 0600 (0700 if executable) below ``destination``; links untouched."""
    for directory, dirnames, filenames in os.walk(destination):
        with contextlib.suppress(OSError):
            os.chmod(directory, 0o700)
        for name in filenames + dirnames:
            path = os.path.join(directory, name)
            with contextlib.suppress(OSError):
                mode = os.lstat(path).st_mode
                if stat.S_ISREG(mode):
                    os.chmod(path, 0o700 if mode & 0o100 else 0o600)


def _remove_new(destination: str, before: set[str]) -> None:
    for entry in set(os.listdir(destination)) - before:
        path = os.path.join(destination, entry)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)


def safe_extract(
    source: str | IO[bytes],
    destination: str,
    *,
    whole: bool = False,
    private: bool = False,
    use_data_filter: bool | None = None,
    what: str | None = None,
) -> Extraction:
    """Unpack the tar ``source`` (a path or a binary file, compressed or not) into ``destination``.

    See the module docstring for the rules. ``whole``: refuse the archive whole
    (:class:`UnsafeArchiveError`) instead of skipping members; ``private``: only
    the owner may read what is written (``destination`` too); ``use_data_filter``:
    tarfile's ``data`` filter as a second guard where this Python has it
    (default), ``False`` extracts as a Python without it does. ``what`` names
    the archive in messages (default: its path). Returns what was left out; each
    is logged as a warning unless ``whole``.

    Raises:
        UnsafeArchiveError: ``whole`` and a member is refused (nothing is written).
        TrainingSetupError: ``whole`` and a member cannot be written (what was
            written is removed again).
    """
    label = what or (source if isinstance(source, str) else "archive")
    if private:
        os.makedirs(destination, mode=0o700, exist_ok=True)
        os.chmod(destination, 0o700)
    else:
        os.makedirs(destination, exist_ok=True)
    filters = has_data_filter()
    if use_data_filter is None:
        use_data_filter = filters
    result = Extraction()
    opened = (
        tarfile.open(source, mode="r:*")
        if isinstance(source, str)
        else tarfile.open(fileobj=source, mode="r:*")
    )
    with opened as archive:
        members = archive.getmembers()
        refused = _refusals(members, destination)
        if whole and refused:
            raise UnsafeArchiveError(label, [members[i].name for i in sorted(refused)])
        result.skipped.extend((members[i].name, why) for i, why in sorted(refused.items()))

        def guard(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
            try:
                return tarfile.data_filter(member, path)
            except tarfile.FilterError as exc:
                result.skipped.append((member.name, f"refused by tarfile's data filter: {exc}"))
                return None

        options: dict[str, object] = {}
        if filters:
            options["filter"] = guard if use_data_filter else "fully_trusted"
        before = set(os.listdir(destination))
        made_dirs: list[tarfile.TarInfo] = []
        try:
            for index, member in enumerate(members):
                if index in refused:
                    continue
                info = _tamed(member, private)
                try:
                    archive.extract(info, destination, set_attrs=not info.isdir(), **options)  # type: ignore[arg-type]  # filter: a str or a callable, where tarfile has it
                except (OSError, tarfile.TarError) as exc:
                    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                    result.failed.append((member.name, f"could not be written: {why}"))
                    if whole:
                        break
                    continue
                if info.isdir():
                    made_dirs.append(info)
        except BaseException:
            if whole:
                _remove_new(destination, before)
            raise
        if whole and result.skipped:
            _remove_new(destination, before)
            raise UnsafeArchiveError(label, [name for name, _ in result.skipped])
        if whole and result.failed:
            _remove_new(destination, before)
            name, why = result.failed[0]
            raise TrainingSetupError(
                f"Could not unpack {label}: member {name!r} {why}. Nothing was unpacked."
            )
        # Directories get their mode and time last, deepest first (as tarfile does).
        for info in sorted(made_dirs, key=lambda m: m.name, reverse=True):
            path = os.path.join(destination, *_split(info.name))
            if os.path.islink(path) or not os.path.isdir(path):
                continue
            with contextlib.suppress(OSError):
                os.chmod(path, info.mode)
                os.utime(path, (info.mtime, info.mtime))
    if private:
        _make_private(destination)
    for name, why in result.skipped:
        logger.warning("Not extracting %s from %s: %s", name, label, why)
    for name, why in result.failed:
        logger.warning("Not extracting %s from %s: %s", name, label, why)
    return result
