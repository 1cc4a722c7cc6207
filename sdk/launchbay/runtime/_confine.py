"""Resolving paths inside one directory tree the way the kernel would, without leaving it.

Two places must know where a symbolic link really leads before they touch it:

* the code-archive check (:func:`launchbay.runtime.code.unsafe_members`), where
  the links are members of a tar that does not exist on disk yet, and
* the local backends packing outputs and checkpoints
  (:func:`scan_tree`), where a training script or container wrote the links.

Both resolve a path component by component: every component that is a link
(as ``readlink`` says) is replaced by its target, ``..`` goes up one real
directory, and the walk stops as *outside* when it would go above the root or
when an absolute target is not one of the root's own names (``aliases``: the
paths by which the writer saw the root, for example ``/opt/ml/model`` inside a
container). More than :data:`MAX_LINKS` expansions is a *loop* (the kernel's
``ELOOP``). Nothing here ever follows a link on the real file system.

Reading what a job wrote goes the same way: :func:`open_beneath` opens a path
below a trusted directory (the job's directory, made by the client) one
component at a time, each with ``O_NOFOLLOW``, so a directory that a script or a
container replaced by a link (``/opt/ml/model -> /``, ``output/data -> /home``)
is refused instead of followed, also when the link is swapped in after a scan.

Standard library only: the runtime imports it inside training images.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "MAX_LINKS",
    "INSIDE",
    "OUTSIDE",
    "LOOP",
    "resolve",
    "TreeEntry",
    "TreeScan",
    "scan_tree",
    "open_regular",
    "open_beneath",
    "read_beneath",
    "unlink_beneath",
    "rmtree_beneath",
    "reached_without_links",
]

#: Link expansions allowed while resolving one path (Linux allows 40).
MAX_LINKS = 40

INSIDE = "inside"
OUTSIDE = "outside"
LOOP = "loop"

Parts = tuple[str, ...]


def _split(path: str) -> list[str]:
    return [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]


def _strip_alias(target: str, aliases: Sequence[str]) -> list[str] | None:
    """The components of absolute ``target`` below one of ``aliases``, or ``None``."""
    parts = _split(target)
    for alias in aliases:
        prefix = _split(alias)
        if prefix and parts[: len(prefix)] == prefix:
            return parts[len(prefix) :]
    return None


def resolve(
    parts: Sequence[str],
    readlink: Callable[[Parts], str | None],
    *,
    aliases: Sequence[str] = (),
    follow_final: bool = True,
) -> tuple[str, Parts]:
    """Resolve ``parts`` (relative to the root) through the links ``readlink`` reports.

    ``readlink(p)`` returns the target of the link at ``p`` (a tuple of real,
    already resolved components) or ``None`` when ``p`` is not a link (or does
    not exist). Returns ``(INSIDE, resolved parts)``, ``(OUTSIDE, ())`` or
    ``(LOOP, ())``. With ``follow_final`` false the last component is not expanded.
    """
    pending = [p for p in parts if p not in ("", ".")]
    resolved: list[str] = []
    expansions = 0
    while pending:
        name = pending.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            if not resolved:
                return OUTSIDE, ()
            resolved.pop()
            continue
        candidate = (*resolved, name)
        if not pending and not follow_final:
            resolved.append(name)
            break
        target = readlink(candidate)
        if target is None:
            resolved.append(name)
            continue
        expansions += 1
        if expansions > MAX_LINKS:
            return LOOP, ()
        if target.startswith(("/", "\\")):
            rest = _strip_alias(target, aliases)
            if rest is None:
                return OUTSIDE, ()
            resolved = []
            pending = rest + pending
        else:
            pending = _split(target) + pending  # ".." segments are kept
    return INSIDE, tuple(resolved)


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def _parts_below(base: str, path: str) -> list[str]:
    """The components of ``path`` (absolute, or relative to ``base``) below ``base``."""
    if not os.path.isabs(path):
        return _split(path)
    base_norm = os.path.normpath(os.path.abspath(base))
    path_norm = os.path.normpath(path)
    if path_norm == base_norm:
        return []
    if not path_norm.startswith(base_norm.rstrip(os.sep) + os.sep):
        raise ValueError(f"{path!r} is not below {base!r}")
    return _split(path_norm[len(base_norm) :])


def open_beneath(base: str, path: str, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """A descriptor of ``path`` opened so that no component below ``base`` is a link.

    ``base`` is trusted (the caller made it; it may itself be reached through
    links). Every directory below it is opened with ``O_NOFOLLOW | O_DIRECTORY``
    relative to the one before, and the last component with ``O_NOFOLLOW`` added
    to ``flags``: a link anywhere on the way raises ``OSError`` (``ELOOP`` or
    ``ENOTDIR``) instead of being followed. ``path`` is absolute below ``base`` or
    relative to it; ``ValueError`` when it is neither.
    """
    parts = _parts_below(base, path) if path else []
    if ".." in parts:
        raise ValueError(f"{path!r} goes up out of {base!r}")
    fd = os.open(base, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for part in parts[:-1]:
            child = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = child
        if not parts:
            return os.dup(fd) if flags & _DIRECTORY else os.open(".", flags, dir_fd=fd)
        return os.open(parts[-1], flags | _NOFOLLOW | _CLOEXEC, mode, dir_fd=fd)
    finally:
        os.close(fd)


def reached_without_links(base: str, path: str) -> bool:
    """Whether the directory ``path`` is reached from ``base`` without any link."""
    try:
        fd = open_beneath(base, path, os.O_RDONLY | _DIRECTORY)
    except (OSError, ValueError):
        return False
    os.close(fd)
    return True


def read_beneath(base: str, path: str, limit: int = 1 << 20) -> bytes | None:
    """At most ``limit`` bytes of the regular file ``path`` below ``base``, never through a link.

    ``None`` when it is missing, reached through a link, or not a regular file.
    """
    fd = open_regular(path, base)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read(limit)


def unlink_beneath(base: str, path: str) -> bool:
    """Remove the file or link ``path`` below ``base`` without following any link on the way."""
    parts = _parts_below(base, path)
    if not parts:
        return False
    try:
        fd = open_beneath(base, os.sep.join(parts[:-1]), os.O_RDONLY | _DIRECTORY)
    except (OSError, ValueError):
        return False
    try:
        os.unlink(parts[-1], dir_fd=fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def rmtree_beneath(base: str, path: str) -> None:
    """Remove the directory tree ``path`` below ``base``; a link on the way is left alone."""
    import shutil
    import sys

    parts = _parts_below(base, path)
    if not parts:
        return
    try:
        fd = open_beneath(base, os.sep.join(parts[:-1]), os.O_RDONLY | _DIRECTORY)
    except (OSError, ValueError):
        return
    try:
        if sys.version_info >= (3, 11):
            shutil.rmtree(parts[-1], dir_fd=fd, ignore_errors=True)
        elif reached_without_links(base, path):
            shutil.rmtree(path, ignore_errors=True)  # fd-based walk; the top is checked above
    finally:
        os.close(fd)


@dataclass(frozen=True)
class TreeEntry:
    """One thing to pack from a tree: a regular file, or a link that stays inside.

    ``rel`` is the posix path below the root, ``path`` the absolute path on this
    machine. For a link, ``link`` is its target rewritten relative to the link's
    directory (absolute targets through an alias become relative), ``target``
    the resolved posix path below the root ("" for the root), ``target_kind``
    ``"file"``, ``"dir"``, ``"missing"`` or ``"other"`` and ``target_path`` the
    resolved target on this machine (inside the root, reached without links).
    ``base`` is the trusted directory above the root: read the entry with
    ``open_regular(entry.path, entry.base)``, which refuses a link anywhere below it.
    """

    rel: str
    path: str
    kind: str  # "file" or "link"
    link: str = ""
    target: str = ""
    target_kind: str = ""
    target_path: str = ""
    base: str = ""


@dataclass
class TreeScan:
    """What :func:`scan_tree` found: entries to pack and ``(rel, why)`` left out."""

    root: str
    entries: list[TreeEntry] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def scan_tree(root: str, aliases: Sequence[str] = (), base: str | None = None) -> TreeScan:
    """Regular files and inside links under ``root``, sorted, never following a link.

    ``root`` itself must be a directory reached from ``base`` (default: its parent
    directory) without a link: a job that replaced the directory itself with a
    link (``model -> /home/me``) gets nothing scanned, and one ``(".", why)`` in
    ``skipped``.

    A link whose target resolves inside ``root`` (relative, or absolute through
    ``root`` itself, its real path or one of ``aliases``) is an entry of kind
    ``"link"``; directories behind links are not descended into, so a loop such
    as ``latest -> .`` is one entry. A link that leaves ``root``, a link loop
    and anything that is neither a file, a directory nor a link (FIFOs, sockets,
    devices) are listed in ``skipped`` with the reason.
    """
    scan = TreeScan(root)
    base = base if base is not None else os.path.dirname(os.path.abspath(root))
    if not reached_without_links(base, root):
        if os.path.lexists(root):
            where = _first_link(base, root)
            why = (
                f"{where} is a symbolic link to {_readlink(where)!r}: the directory is not "
                "followed, so nothing in it is taken"
                if where
                else "not a directory"
            )
            scan.skipped.append((".", why))
        return scan
    names = [root, os.path.realpath(root), *aliases]

    def readlink(parts: Parts) -> str | None:
        path = os.path.join(root, *parts)
        try:
            return os.readlink(path) if os.path.islink(path) else None
        except OSError:
            return None

    def walk(directory: str, rel_dir: Parts) -> None:
        try:
            with os.scandir(directory) as it:
                items = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            scan.skipped.append(("/".join(rel_dir) or ".", f"cannot be read ({exc.strerror})"))
            return
        for item in items:
            rel_parts = (*rel_dir, item.name)
            rel = "/".join(rel_parts)
            try:
                if item.is_symlink():
                    target = os.readlink(item.path)
                    where, resolved = resolve(rel_parts, readlink, aliases=names)
                    if where == OUTSIDE:
                        scan.skipped.append(
                            (rel, f"a symbolic link to {target!r}, which leaves {root}")
                        )
                        continue
                    if where == LOOP:
                        scan.skipped.append(
                            (rel, f"a symbolic link to {target!r} in a loop of links")
                        )
                        continue
                    goal = os.path.join(root, *resolved)
                    mode = os.lstat(goal).st_mode if os.path.lexists(goal) else None
                    kind = (
                        "missing"
                        if mode is None
                        else "file"
                        if stat.S_ISREG(mode)
                        else "dir"
                        if stat.S_ISDIR(mode)
                        else "other"
                    )
                    link = posixpath.relpath("/".join(resolved) or ".", "/".join(rel_dir) or ".")
                    scan.entries.append(
                        TreeEntry(
                            rel, item.path, "link", link, "/".join(resolved), kind, goal, base
                        )
                    )
                elif item.is_dir(follow_symlinks=False):
                    walk(item.path, rel_parts)
                elif item.is_file(follow_symlinks=False):
                    scan.entries.append(TreeEntry(rel, item.path, "file", base=base))
                else:
                    scan.skipped.append((rel, "not a regular file, directory or link"))
            except OSError as exc:
                scan.skipped.append((rel, f"cannot be read ({exc.strerror})"))

    walk(root, ())
    return scan


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _first_link(base: str, path: str) -> str | None:
    """The first component of ``path`` below ``base`` that is a link, or ``None``."""
    try:
        parts = _parts_below(base, path)
    except ValueError:
        return None
    current = base
    for part in parts:
        current = os.path.join(current, part)
        if os.path.islink(current):
            return current
    return None


def open_regular(path: str, base: str | None = None) -> int | None:
    """A read-only descriptor of ``path`` if it is a regular file reached without a link.

    ``O_NOFOLLOW`` refuses a final link swapped in after the scan; with ``base``
    no directory between ``base`` and ``path`` may be a link either
    (:func:`open_beneath`). ``O_NONBLOCK`` keeps a FIFO from blocking the open.
    Returns ``None`` for anything else.
    """
    flags = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC
    try:
        fd = open_beneath(base, path, flags) if base else os.open(path, flags)
    except (OSError, ValueError):
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            if hasattr(os, "set_blocking"):
                os.set_blocking(fd, True)
            return fd
    except OSError:
        pass
    os.close(fd)
    return None
