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


@dataclass(frozen=True)
class TreeEntry:
    """One thing to pack from a tree: a regular file, or a link that stays inside.

    ``rel`` is the posix path below the root, ``path`` the absolute path on this
    machine. For a link, ``link`` is its target rewritten relative to the link's
    directory (absolute targets through an alias become relative), ``target``
    the resolved posix path below the root ("" for the root), ``target_kind``
    ``"file"``, ``"dir"``, ``"missing"`` or ``"other"`` and ``target_path`` the
    resolved target on this machine (inside the root, reached without links).
    """

    rel: str
    path: str
    kind: str  # "file" or "link"
    link: str = ""
    target: str = ""
    target_kind: str = ""
    target_path: str = ""


@dataclass
class TreeScan:
    """What :func:`scan_tree` found: entries to pack and ``(rel, why)`` left out."""

    root: str
    entries: list[TreeEntry] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def scan_tree(root: str, aliases: Sequence[str] = ()) -> TreeScan:
    """Regular files and inside links under ``root``, sorted, never following a link.

    A link whose target resolves inside ``root`` (relative, or absolute through
    ``root`` itself, its real path or one of ``aliases``) is an entry of kind
    ``"link"``; directories behind links are not descended into, so a loop such
    as ``latest -> .`` is one entry. A link that leaves ``root``, a link loop
    and anything that is neither a file, a directory nor a link (FIFOs, sockets,
    devices) are listed in ``skipped`` with the reason.
    """
    scan = TreeScan(root)
    if not os.path.isdir(root):
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
                        TreeEntry(rel, item.path, "link", link, "/".join(resolved), kind, goal)
                    )
                elif item.is_dir(follow_symlinks=False):
                    walk(item.path, rel_parts)
                elif item.is_file(follow_symlinks=False):
                    scan.entries.append(TreeEntry(rel, item.path, "file"))
                else:
                    scan.skipped.append((rel, "not a regular file, directory or link"))
            except OSError as exc:
                scan.skipped.append((rel, f"cannot be read ({exc.strerror})"))

    walk(root, ())
    return scan


def open_regular(path: str) -> int | None:
    """A read-only descriptor of ``path`` if it is a regular file reached without a final link.

    ``O_NOFOLLOW`` refuses a link swapped in after the scan; ``O_NONBLOCK`` keeps
    a FIFO from blocking the open. Returns ``None`` for anything else.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
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
