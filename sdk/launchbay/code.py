"""Deterministic source packaging: ``sourcedir.tar.gz``, content-addressed in S3.

The archive has the layout SDK v2 builds:

* with ``source_dir``: the directory's contents at the archive root, and the
  entry point given relative to it (``script_name`` is that relative path);
* without ``source_dir``: the entry point file alone at the root;
* each dependency (a file or a directory) as a top-level entry named by its
  base name.

The same files always give the same bytes: entries are sorted, every mtime is
0, owner ids are 0 with empty owner names, modes are normalised (0o755 for
directories and executable files, 0o644 otherwise), and the gzip header holds
no file name and mtime 0. The archive is therefore named by its SHA-256
(:func:`code_s3_uri`) and uploaded only once (:func:`stage_code`). The archive
is also cached on disk under a hash of every entry's name, source path, mode
and file stat (size, mtime, ctime, inode), so packaging unchanged files again
costs a stat of each (see :func:`package_code`).

What is left out (of ``source_dir`` and of dependency directories):

* always: ``.git/`` and ``__pycache__/`` directories and ``*.pyc`` files;
* patterns listed in a ``.launchbayignore`` file at the ``source_dir`` root.
  It uses this subset of ``.gitignore`` syntax, one pattern a line:

  - blank lines and lines starting with ``#`` are ignored;
  - ``name`` or ``*.ext`` (no slash): matches a file or directory with that
    name at any depth;
  - ``dir/`` (trailing slash): matches directories only;
  - ``path/with/slash`` (or ``/name``): matched against the path relative to
    ``source_dir``, anchored at its root;
  - ``*`` and ``?`` do not cross ``/``; ``[abc]`` classes work; ``**`` matches
    any number of directories;
  - an excluded directory excludes everything under it.

  Negation (``!pattern``) is not supported and is reported as an error rather
  than silently ignored.

Symbolic links are followed (the archive holds the target's content) when the
target stays inside the directory being packaged; links that point outside it,
or nowhere, are skipped with a warning. Directory cycles are never followed.

launchbay's own files are never packaged: ``$LAUNCHBAY_HOME`` (jobs, their
environments, caches and outputs) and the archive cache, when they lie inside
``source_dir`` or a dependency (``.launchbay`` in a project packaged as ``.``),
are left out (logged once at INFO). They are recognised by real path and by
device and inode, so links and other spellings of the same directory are
caught too. A ``source_dir`` or dependency that *is* one of them is refused.

The archive is written to a temporary file, never held whole in memory, and
uploaded from it (:class:`CodeBundle` holds its path): memory stays bounded
whatever the size of the code. Temporary files get unique names
(``mkstemp``), so threads and processes packaging the same code at once never
touch each other's files, and a cached archive is published with one atomic
rename.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import re
import shutil
import tarfile
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from launchbay._home import local_home
from launchbay.errors import ConfigurationError
from launchbay.s3uri import is_s3_uri, parse_s3_uri, s3_join

if TYPE_CHECKING:  # pragma: no cover
    from launchbay.session import Session

__all__ = [
    "CodeBundle",
    "IGNORE_FILE",
    "validate_code",
    "package_code",
    "code_s3_uri",
    "stage_code",
]

logger = logging.getLogger("launchbay.code")

#: Name of the ignore file read from the ``source_dir`` root.
IGNORE_FILE = ".launchbayignore"
#: File name of the archive in S3 (the name SageMaker's toolkits expect).
ARCHIVE_NAME = "sourcedir.tar.gz"

#: gzip's own default, the level ``tar czf`` uses: level 9 took 3-4x as long here
#: for an archive 1-2% smaller (bench/scale.py).
_GZIP_LEVEL = 6
#: Changes whenever the same files would give different archive bytes.
_ARCHIVE_FORMAT = f"pax-gzip{_GZIP_LEVEL}-1"

_ALWAYS_SKIP_DIRS = frozenset({".git", "__pycache__"})
_ALWAYS_SKIP_SUFFIXES = (".pyc",)

PathLike = str | os.PathLike


@dataclass(frozen=True, eq=False)
class CodeBundle:
    """A packaged ``sourcedir.tar.gz``, held in a file (never whole in memory).

    Attributes:
        path: A file holding the gzip-compressed tar archive. It belongs to this
            bundle (nothing writes to it) and is removed when the bundle is
            garbage-collected or the interpreter exits.
        sha256: Hex SHA-256 of the archive.
        script_name: The entry point's path inside the archive (``"train.py"``).
        size: The archive's size in bytes.
        files: The regular files in the archive, sorted (directories not listed).
    """

    path: str
    sha256: str
    script_name: str
    size: int
    files: tuple[str, ...]

    def open(self) -> BinaryIO:
        """The archive, opened for reading (the caller closes it)."""
        return open(self.path, "rb")

    @property
    def data(self) -> bytes:
        """The whole archive as bytes: read from :attr:`path` at each access (small archives)."""
        with self.open() as fh:
            return fh.read()

    def __repr__(self) -> str:  # keep the bytes out of reprs and logs
        return (
            f"CodeBundle(sha256={self.sha256!r}, script_name={self.script_name!r}, "
            f"size={self.size}, files={len(self.files)})"
        )


# -- validation ---------------------------------------------------------------------
def _is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def resolve_entry_point(entry_point: PathLike, source_dir: str | None) -> tuple[str, str]:
    """Return (path on disk, script name inside the archive) or raise ConfigurationError."""
    entry = os.fspath(entry_point)
    if not entry:
        raise ConfigurationError.invalid(
            "entry_point", entry_point, "the path of a Python script or shell file"
        )
    if source_dir is None:
        if not os.path.isfile(entry):
            raise ConfigurationError.invalid(
                "entry_point",
                entry,
                "the path of an existing file (relative to the current directory "
                "when source_dir is not given)",
                reason="No such file",
            )
        return entry, os.path.basename(entry)

    root = os.path.abspath(source_dir)
    candidate = os.path.normpath(os.path.join(root, entry))
    if not _is_within(candidate, root) or candidate == root:
        raise ConfigurationError.invalid(
            "entry_point",
            entry,
            f"a file inside source_dir={source_dir!r}, given relative to it (e.g. 'train.py')",
            reason="It points outside source_dir",
        )
    if not os.path.isfile(candidate):
        raise ConfigurationError.invalid(
            "entry_point",
            entry,
            f"a file inside source_dir={source_dir!r}, given relative to it (e.g. 'train.py')",
            reason=f"No such file: {candidate!r}",
        )
    return candidate, os.path.relpath(candidate, root).replace(os.sep, "/")


def validate_code(
    entry_point: PathLike,
    source_dir: PathLike | None = None,
    dependencies: Sequence[PathLike] | None = None,
) -> None:
    """Check the code arguments of an estimator; raise ``ConfigurationError`` if one is wrong.

    * ``entry_point`` must be an existing file, relative to ``source_dir`` when
      that is given (as in SDK v2), and must not point outside it (``..`` or an
      absolute path elsewhere; an absolute path inside ``source_dir`` is fine);
    * ``source_dir`` must be an existing directory, or an ``s3://`` URI of an
      archive already staged, which is used as is (the entry point cannot be
      checked then);
    * every dependency must exist (file or directory).

    Every message names the argument, the value given and what is accepted.
    """
    src = None if source_dir is None else os.fspath(source_dir)
    if src is not None and is_s3_uri(src):
        parse_s3_uri(src, argument="source_dir")
        if not os.fspath(entry_point):
            raise ConfigurationError.invalid(
                "entry_point", entry_point, "the path of the script inside the source archive"
            )
    else:
        if src is not None and not os.path.isdir(src):
            raise ConfigurationError.invalid(
                "source_dir",
                src,
                "an existing local directory or an s3:// URI of a sourcedir.tar.gz",
                reason="No such directory" if not os.path.exists(src) else "It is not a directory",
            )
        resolve_entry_point(entry_point, src)
    for dep in dependencies or ():
        path = os.fspath(dep)
        if not path or not os.path.exists(path):
            raise ConfigurationError.invalid(
                "dependencies",
                path,
                "a list of existing local files or directories",
                reason="No such file or directory",
            )


# -- ignore rules ---------------------------------------------------------------------
def _glob_to_regex(glob: str) -> str:
    """Translate one glob (``*``, ``?``, ``[..]``, ``**``) to a regex over ``/`` paths."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "*":
            if glob[i : i + 2] == "**":
                i += 2
                if glob[i : i + 1] == "/":
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = glob.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = glob[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@dataclass(frozen=True)
class _Rule:
    pattern: str
    regex: re.Pattern[str]
    anchored: bool
    dir_only: bool

    def matches(self, rel: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        target = rel if self.anchored else rel.rsplit("/", 1)[-1]
        return bool(self.regex.fullmatch(target))


def _parse_ignore(lines: Iterable[str], origin: str) -> list[_Rule]:
    rules = []
    for lineno, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n").strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("!"):
            raise ConfigurationError(
                f"{origin}:{lineno}: negated pattern {line!r} is not supported. "
                "Accepted: name, dir/, *.ext, path/with/slash, # comments.",
                argument="source_dir",
                value=line,
            )
        dir_only = line.endswith("/")
        body = line.rstrip("/")
        anchored = "/" in body
        body = body.lstrip("/")
        if not body:
            continue
        rules.append(_Rule(line, re.compile(_glob_to_regex(body)), anchored, dir_only))
    return rules


def _load_ignore(source_dir: str) -> list[_Rule]:
    path = os.path.join(source_dir, IGNORE_FILE)
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as fh:
        return _parse_ignore(fh, path)


def _ignored(rel: str, name: str, is_dir: bool, rules: Sequence[_Rule]) -> bool:
    if is_dir and name in _ALWAYS_SKIP_DIRS:
        return True
    if not is_dir and name.endswith(_ALWAYS_SKIP_SUFFIXES):
        return True
    return any(rule.matches(rel, is_dir) for rule in rules)


# -- collection -----------------------------------------------------------------------
@dataclass(frozen=True)
class _Entry:
    arcname: str
    path: str | None  # None for a directory entry
    executable: bool
    #: (size, mtime_ns, ctime_ns, inode, device) of a file: what the archive cache compares.
    stat: tuple[int, ...] = ()


def _file_entry(arcname: str, path: str, st: os.stat_result | None = None) -> _Entry:
    st = os.stat(path) if st is None else st
    signature = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
    return _Entry(arcname, path, bool(st.st_mode & 0o111), signature)


@dataclass(frozen=True)
class _OwnDir:
    """A directory of launchbay's own that is never packaged: its real path and (device, inode)."""

    what: str
    real: str
    ident: tuple[int, int] | None

    @classmethod
    def of(cls, what: str, path: str) -> _OwnDir:
        real = os.path.realpath(path)
        try:
            st = os.stat(real)
            ident: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            ident = None
        return cls(what, real, ident)

    def holds(self, real: str, st: os.stat_result | None = None) -> bool:
        """True when ``real`` (a real path, or a directory whose ``st`` is given) is in here."""
        if _is_within(real, self.real):
            return True
        return st is not None and self.ident == (st.st_dev, st.st_ino)


def _own_dirs(cache_dir: str | None) -> tuple[_OwnDir, ...]:
    """``$LAUNCHBAY_HOME`` and the archive cache: never packed into an archive."""
    dirs = [_OwnDir.of("$LAUNCHBAY_HOME (launchbay's jobs, caches and outputs)", local_home())]
    if cache_dir:
        dirs.append(_OwnDir.of("the source archive cache", cache_dir))
    return tuple(dirs)


_left_out_logged: set[str] = set()
_left_out_lock = threading.Lock()


def _log_left_out(path: str, own: _OwnDir) -> None:
    """Say once per process (INFO) that ``path``, launchbay's own directory, is not packaged."""
    with _left_out_lock:
        first = own.real not in _left_out_logged
        _left_out_logged.add(own.real)
    logger.log(
        logging.INFO if first else logging.DEBUG,
        "Not packaging %s: it is %s, inside the code being packaged",
        path,
        own.what,
    )


def _check_not_own(root: str, argument: str, own_dirs: Sequence[_OwnDir]) -> tuple[_OwnDir, ...]:
    """Refuse ``root`` if it is one of ``own_dirs``; return those not around it (to leave out).

    A directory inside one of launchbay's own (a test's ``source_dir`` under
    ``$LAUNCHBAY_HOME``) is packaged as usual: only what lies *inside* ``root``
    and is one of them is left out.
    """
    real_root = os.path.realpath(root)
    try:
        st: os.stat_result | None = os.stat(real_root)
    except OSError:
        st = None
    for own in own_dirs:
        if real_root == own.real or (st is not None and own.ident == (st.st_dev, st.st_ino)):
            raise ConfigurationError.invalid(
                argument,
                root,
                "a directory of your code; launchbay's own directories are never packaged",
                reason=f"It is {own.what}: {own.real}",
            )
    return tuple(own for own in own_dirs if not _is_within(real_root, own.real))


def _collect_tree(
    root: str,
    arc_prefix: str,
    rules: Sequence[_Rule],
    entries: dict[str, _Entry],
    *,
    argument: str = "source_dir",
    own_dirs: Sequence[_OwnDir] = (),
) -> None:
    """Add ``root``'s contents under ``arc_prefix`` (``""`` for the archive root).

    One ``scandir`` a directory and one ``stat`` a file (the entry types come with
    the listing): this walk is all a cached packaging costs. ``own_dirs``
    (launchbay's home and caches) are left out wherever they appear below
    ``root``, whether reached directly or through a link.
    """
    real_root = os.path.realpath(root)
    inside = _check_not_own(root, argument, own_dirs)

    def own(real: str, st: os.stat_result | None) -> _OwnDir | None:
        return next((o for o in inside if o.holds(real, st)), None)

    def walk(directory: str, real_dir: str, rel_dir: str, seen: frozenset[str]) -> None:
        try:
            with os.scandir(directory) as listing:
                items = sorted(listing, key=lambda item: item.name)
        except OSError as exc:
            raise ConfigurationError(
                f"Cannot read directory {directory!r} while packaging code: {exc}",
                argument="source_dir",
                value=directory,
            ) from exc
        for item in items:
            name, path = item.name, item.path
            rel = f"{rel_dir}/{name}" if rel_dir else name
            arcname = f"{arc_prefix}/{rel}" if arc_prefix else rel
            link = item.is_symlink()
            if link:
                target = os.path.realpath(path)
                if not os.path.exists(target):
                    logger.warning("Skipping broken symbolic link %s", path)
                    continue
                if not _is_within(target, real_root):
                    logger.warning(
                        "Skipping symbolic link %s: it points outside %s (to %s)",
                        path,
                        root,
                        target,
                    )
                    continue
            is_dir = item.is_dir()
            if _ignored(rel, name, is_dir, rules):
                continue
            if is_dir:
                real = os.path.realpath(path) if link else os.path.join(real_dir, name)
                found = own(real, item.stat()) if inside else None
                if found is not None:
                    _log_left_out(path, found)
                    continue
                if real in seen:
                    logger.warning("Skipping %s: directory cycle through symbolic links", path)
                    continue
                entries[arcname] = _Entry(arcname, None, True)
                walk(path, real, rel, seen | {real})
            elif item.is_file():
                found = own(target, None) if link and inside else None
                if found is not None:
                    _log_left_out(path, found)
                    continue
                entries[arcname] = _file_entry(arcname, path, item.stat())
            else:
                logger.warning("Skipping %s: not a regular file or directory", path)

    walk(root, real_root, "", frozenset({real_root}))


def _add_top_level(
    path: str,
    arcname: str,
    entries: dict[str, _Entry],
    argument: str,
    rules: Sequence[_Rule] = (),
    own_dirs: Sequence[_OwnDir] = (),
) -> None:
    """Add ``path`` (a file or a directory) to ``entries`` as ``arcname``.

    A name already in the archive is accepted only when ``path`` repeats it: every
    file it holds is there already with the same bytes (SDK v2 accepts such a
    dependency, typically one inside ``source_dir``); anything else is a clash.
    """
    new: dict[str, _Entry] = {}
    if os.path.isdir(path):
        new[arcname] = _Entry(arcname, None, True)
        _collect_tree(path, arcname, rules, new, argument=argument, own_dirs=own_dirs)
    else:
        new[arcname] = _file_entry(arcname, path)
    if arcname not in entries and not any(a.startswith(arcname + "/") for a in entries):
        entries.update(new)
        return
    for name, entry in new.items():
        existing = entries.get(name)
        same = existing is not None and (
            existing.path is None
            if entry.path is None
            else existing.path is not None and _same_bytes(existing.path, entry.path)
        )
        if not same:
            raise ConfigurationError.invalid(
                argument,
                path,
                "paths whose base names do not clash with each other or with source_dir's "
                "contents, or that repeat them byte for byte",
                reason=f"The archive already has an entry named {arcname!r}, and "
                + (f"{name!r} differs from it" if existing else f"{name!r} is not in it"),
            )


def _same_bytes(a: str, b: str) -> bool:
    """True when the files at ``a`` and ``b`` hold the same bytes."""
    if os.path.samefile(a, b):
        return True
    if os.path.getsize(a) != os.path.getsize(b):
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            chunk = fa.read(1 << 20)
            if chunk != fb.read(1 << 20):
                return False
            if not chunk:
                return True


def _sort_key(arcname: str) -> tuple[str, ...]:
    return tuple(arcname.split("/"))


class _Writable(Protocol):
    """Where an archive is written: a binary file, or a :class:`_HashingWriter` around one."""

    def write(self, data: bytes, /) -> int: ...

    def flush(self) -> None: ...


def _build_archive(entries: Iterable[_Entry], out: _Writable) -> None:
    """Write the deterministic archive of ``entries`` to ``out``, compressing as it goes."""
    with (
        gzip.GzipFile(
            filename="", mode="wb", fileobj=out, mtime=0, compresslevel=_GZIP_LEVEL
        ) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for entry in sorted(entries, key=lambda e: _sort_key(e.arcname)):
            info = tarfile.TarInfo(entry.arcname)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if entry.path is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
                continue
            with open(entry.path, "rb") as fh:
                info.type = tarfile.REGTYPE
                info.mode = 0o755 if entry.executable else 0o644
                info.size = os.fstat(fh.fileno()).st_size
                tar.addfile(info, fh)


# -- the archive cache ------------------------------------------------------------------
#: Archives kept in the cache; the least recently used beyond this are removed.
CACHE_ENTRIES = 8


def default_cache_dir() -> str | None:
    """Where archives are cached: ``$LAUNCHBAY_CODE_CACHE``, else ``$LAUNCHBAY_HOME/cache/code``.

    ``LAUNCHBAY_CODE_CACHE=0`` (or ``off``) turns the cache off (None).
    """
    chosen = os.environ.get("LAUNCHBAY_CODE_CACHE", "").strip()
    if chosen.lower() in ("0", "false", "no", "off"):
        return None
    if chosen:
        return os.path.abspath(os.path.expanduser(chosen))
    return os.path.join(local_home(), "cache", "code")


def _manifest_key(entries: Iterable[_Entry]) -> str:
    """A hash of everything the archive is made from: names, sources, modes and file stats.

    A file edited, replaced, touched or renamed changes its size, mtime, ctime or
    inode, so the key changes and the archive is built again.
    """
    digest = hashlib.sha256(f"launchbay-code/{_ARCHIVE_FORMAT}\n".encode())
    for entry in sorted(entries, key=lambda e: _sort_key(e.arcname)):
        digest.update(repr((entry.arcname, entry.path, entry.executable, entry.stat)).encode())
        digest.update(b"\n")
    return digest.hexdigest()


#: Name prefix of the cache's temporary files: archives being built or published,
#: and the bundles' own links to cached archives.
_TMP_PREFIX = ".launchbay-code-"
_TMP_SUFFIX = ".tmp"
#: Temporary files older than this are left over by a killed process: pruned.
_STALE_TMP_SECONDS = 24 * 3600
_READ_CHUNK = 1024 * 1024


class _HashingWriter:
    """A write-only file that hashes and counts what goes through it to ``out``."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        self.size += len(data)
        return self._out.write(data)

    def flush(self) -> None:
        self._out.flush()


def _unique_path(directory: str) -> str:
    """A new temporary name in ``directory`` (for ``os.link``, which will not overwrite)."""
    import uuid  # here: uuid imports platform, which an estimator never needs at import

    return os.path.join(directory, f"{_TMP_PREFIX}{uuid.uuid4().hex}{_TMP_SUFFIX}")


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _usable_dir(cache_dir: str | None) -> str | None:
    """``cache_dir``, created if needed, or None when there is none or it cannot be made."""
    if not cache_dir:
        return None
    try:
        os.makedirs(cache_dir, exist_ok=True)
    except OSError as exc:
        logger.debug("Could not use the source archive cache %s: %s", cache_dir, exc)
        return None
    return cache_dir


def _new_temp(directory: str | None) -> tuple[int, str]:
    """``mkstemp`` in ``directory`` (the cache, so a publish is a rename), else in ``$TMPDIR``."""
    if directory is not None:
        try:
            return tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=_TMP_SUFFIX, dir=directory)
        except OSError as exc:
            logger.debug("Could not write in the source archive cache %s: %s", directory, exc)
    return tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=_TMP_SUFFIX)


def _copy_to_temp(source: str, directory: str | None) -> str:
    """A private copy of ``source`` (where hard links are not available)."""
    fd, tmp = _new_temp(directory)
    try:
        with open(source, "rb") as src, os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(src, out, _READ_CHUNK)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return tmp


def _private_link(source: str, directory: str) -> str:
    """A new name of ``source``'s file (a hard link, else a copy) that only the caller uses.

    Raises:
        FileNotFoundError: ``source`` does not exist.
    """
    link = _unique_path(directory)
    try:
        os.link(source, link)
    except FileNotFoundError:
        raise
    except OSError:  # no hard links here: a copy
        return _copy_to_temp(source, directory)
    return link


def _digest_file(path: str) -> tuple[str, int]:
    """``(sha256, size)`` of the file at ``path``, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_READ_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _cached_archive(cache_dir: str, key: str) -> tuple[str, str, int] | None:
    """``(private path, sha256, size)`` of the archive cached under ``key``, or None.

    The caller gets its own name for the cached file (a hard link), so pruning
    by another process cannot take the archive away before it is uploaded.
    """
    path = os.path.join(cache_dir, key + ".tar.gz")
    try:
        private = _private_link(path, cache_dir)
    except OSError:
        return None
    try:
        digest, size = _digest_file(private)
    except OSError as exc:
        logger.debug("Could not read the cached source archive %s: %s", path, exc)
        _unlink_quietly(private)
        return None
    try:
        os.utime(path)  # recently used: kept by the pruning
    except OSError:  # pruned by another process meanwhile: the link still holds it
        pass
    return private, digest, size


def _build_to_file(entries: Iterable[_Entry], directory: str | None) -> tuple[str, str, int]:
    """Build the archive into a new temporary file: ``(path, sha256, size)``."""
    fd, tmp = _new_temp(directory)
    try:
        with os.fdopen(fd, "wb") as out:
            writer = _HashingWriter(out)
            _build_archive(entries, writer)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return tmp, writer.hash.hexdigest(), writer.size


def _cache_archive(cache_dir: str, key: str, archive: str) -> None:
    """Publish the file ``archive`` as the cache entry ``key`` (atomically); prune.

    The entry is another name of the same file (a hard link, else a copy) put in
    place with one rename, so readers see the old entry or the whole new one; the
    caller keeps ``archive``. The cache keeps :data:`CACHE_ENTRIES` archives and
    drops temporary files a killed process left. It is an optimisation: a
    failure is logged, never raised.
    """
    try:
        path = os.path.join(cache_dir, key + ".tar.gz")
        staged = _private_link(archive, cache_dir)
        try:
            os.replace(staged, path)
        except BaseException:
            _unlink_quietly(staged)
            raise
        _prune(cache_dir)
    except OSError as exc:
        logger.debug("Could not cache the source archive in %s: %s", cache_dir, exc)


def _prune(cache_dir: str) -> None:
    """Keep the :data:`CACHE_ENTRIES` most recently used archives; drop stale temporary files."""
    cached: list[tuple[int, str]] = []
    stale_before = time.time() - _STALE_TMP_SECONDS
    for name in os.listdir(cache_dir):
        path = os.path.join(cache_dir, name)
        try:
            st = os.stat(path)
        except OSError:  # removed by another process meanwhile
            continue
        if name.endswith(".tar.gz"):
            cached.append((st.st_mtime_ns, path))
        elif name.startswith(_TMP_PREFIX) and max(st.st_mtime, st.st_ctime) < stale_before:
            _unlink_quietly(path)
    cached.sort(reverse=True)
    for _, old in cached[CACHE_ENTRIES:]:
        _unlink_quietly(old)


_DEFAULT_CACHE: Any = object()


def package_code(
    entry_point: PathLike,
    source_dir: PathLike | None = None,
    dependencies: Sequence[PathLike] | None = None,
    cache_dir: str | None = _DEFAULT_CACHE,
) -> CodeBundle:
    """Build a deterministic ``sourcedir.tar.gz`` for ``entry_point`` (see the module docstring).

    The archive is written to a file (:attr:`CodeBundle.path`), compressing as
    it goes: memory does not grow with the size of the code. When every file
    has the same size, mtime, ctime and inode as when an archive was last built
    from the same names, that archive is reused from ``cache_dir`` (default
    :func:`default_cache_dir`; None: build it every time) instead of being
    compressed again: a second ``fit()`` with unchanged code only stats the
    files. Safe to call from several threads and processes at once.

    ``$LAUNCHBAY_HOME`` and ``cache_dir`` are never packaged, even inside
    ``source_dir`` or a dependency.

    Raises:
        ConfigurationError: as :func:`validate_code`, and also for an ``s3://``
            ``source_dir`` (nothing to package), an entry point excluded by
            ``.launchbayignore``, dependencies whose names clash, or a
            ``source_dir``/dependency that is ``$LAUNCHBAY_HOME`` or the cache.
    """
    validate_code(entry_point, source_dir, dependencies)
    src = None if source_dir is None else os.fspath(source_dir)
    if src is not None and is_s3_uri(src):
        raise ConfigurationError.invalid(
            "source_dir",
            src,
            "a local directory (an s3:// source_dir is used as is and needs no packaging)",
        )
    entry_path, script_name = resolve_entry_point(entry_point, src)
    if cache_dir is _DEFAULT_CACHE:
        cache_dir = default_cache_dir()
    own_dirs = _own_dirs(cache_dir)

    entries: dict[str, _Entry] = {}
    if src is None:
        entries[script_name] = _file_entry(script_name, entry_path)
    else:
        rules = _load_ignore(src)
        _collect_tree(src, "", rules, entries, own_dirs=own_dirs)
        if script_name not in entries:
            raise ConfigurationError.invalid(
                "entry_point",
                os.fspath(entry_point),
                f"a file of source_dir={src!r} that is packaged",
                reason=(
                    f"It is excluded by {IGNORE_FILE}, a built-in rule "
                    "(.git/, __pycache__/, *.pyc), a symbolic link outside source_dir, "
                    "or it lies in $LAUNCHBAY_HOME"
                ),
            )
    for dep in dependencies or ():
        path = os.fspath(dep).rstrip("/\\") or os.fspath(dep)
        name = os.path.basename(os.path.abspath(path))
        _add_top_level(path, name, entries, "dependencies", own_dirs=own_dirs)

    key = _manifest_key(entries.values())
    directory = _usable_dir(cache_dir)
    cached = _cached_archive(directory, key) if directory else None
    if cached is not None:
        archive, digest, size = cached
        logger.debug("Reusing the cached source archive %s", key)
    else:
        archive, digest, size = _build_to_file(entries.values(), directory)
        if directory:
            _cache_archive(directory, key, archive)
    files = tuple(
        sorted((e.arcname for e in entries.values() if e.path is not None), key=_sort_key)
    )
    logger.debug("Packaged %d file(s) into %d bytes (sha256 %s)", len(files), size, digest)
    bundle = CodeBundle(
        path=archive, sha256=digest, script_name=script_name, size=size, files=files
    )
    weakref.finalize(bundle, _unlink_quietly, archive)
    return bundle


# -- staging ------------------------------------------------------------------------
def code_s3_uri(bucket: str, key_prefix: str | None, bundle: CodeBundle) -> str:
    """The content-addressed location of ``bundle``.

    ``s3://{bucket}/{key_prefix}/source/{sha256}/sourcedir.tar.gz``; an empty
    or ``None`` ``key_prefix`` is left out, and slashes are never doubled.
    Computing it uploads nothing, so a dry run can show it.
    """
    prefix = "/".join(p for p in (key_prefix or "").split("/") if p)
    return s3_join(f"s3://{bucket}", prefix, "source", bundle.sha256, ARCHIVE_NAME)


def stage_code(
    session: Session, bundle: CodeBundle, s3_uri: str, kms_key: str | None = None
) -> bool:
    """Upload ``bundle`` to ``s3_uri`` unless an object is already there.

    The key is content-addressed (:func:`code_s3_uri`), so an existing object
    holds the same bytes. With ``kms_key`` the object is encrypted with
    ``ServerSideEncryption="aws:kms"`` and that ``SSEKMSKeyId``, as SDK v2 does.
    Without it no encryption is requested and the bucket's default encryption
    applies (SDK v2 asks for ``aws:kms`` with the AWS-managed key by default).

    Returns:
        True if the archive was uploaded, False if it was already there.
    """
    bucket, key = parse_s3_uri(s3_uri, argument="s3_uri")
    if session.object_exists(bucket, key):
        logger.info("Source archive already staged at %s", s3_uri)
        return False
    extra: dict[str, Any] = {"ContentType": "application/gzip"}
    if kms_key:
        extra.update({"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms_key})
    # From the file: a large archive goes in parts, never whole in memory.
    session.upload_file(bundle.path, bucket, key, extra_args=extra)
    logger.info("Staged source archive (%d bytes) at %s", bundle.size, s3_uri)
    return True


def stage_code_file(bundle: CodeBundle, file_uri: str) -> bool:
    """Write ``bundle`` to the ``file://`` location unless it is already there.

    The path is content-addressed like :func:`code_s3_uri`, so an existing file
    holds the same bytes. The file is written to a temporary name and renamed,
    so a concurrent job never reads half an archive.

    Returns:
        True if the archive was written, False if it was already there.
    """
    path = file_uri[len("file://") :]
    if os.path.isfile(path):
        return False
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".launchbay-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out, bundle.open() as archive:
            shutil.copyfileobj(archive, out, _READ_CHUNK)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    logger.info("Staged source archive (%d bytes) at %s", bundle.size, file_uri)
    return True
