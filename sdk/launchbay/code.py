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
"""

from __future__ import annotations

import gzip
import hashlib
import io
import logging
import os
import re
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

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


@dataclass(frozen=True)
class CodeBundle:
    """A packaged ``sourcedir.tar.gz``.

    Attributes:
        data: The gzip-compressed tar archive.
        sha256: Hex SHA-256 of ``data``.
        script_name: The entry point's path inside the archive (``"train.py"``).
        size: ``len(data)``.
        files: The regular files in the archive, sorted (directories not listed).
    """

    data: bytes
    sha256: str
    script_name: str
    size: int
    files: tuple[str, ...]

    def __repr__(self) -> str:  # keep the bytes out of reprs and logs
        return (
            f"CodeBundle(sha256={self.sha256!r}, script_name={self.script_name!r}, "
            f"size={self.size}, files={len(self.files)})"
        )


# -- validation ---------------------------------------------------------------------
def _is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _resolve_entry_point(entry_point: PathLike, source_dir: str | None) -> tuple[str, str]:
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
        _resolve_entry_point(entry_point, src)
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


def _collect_tree(
    root: str, arc_prefix: str, rules: Sequence[_Rule], entries: dict[str, _Entry]
) -> None:
    """Add ``root``'s contents under ``arc_prefix`` (``""`` for the archive root).

    One ``scandir`` a directory and one ``stat`` a file (the entry types come with
    the listing): this walk is all a cached packaging costs.
    """
    real_root = os.path.realpath(root)

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
                if real in seen:
                    logger.warning("Skipping %s: directory cycle through symbolic links", path)
                    continue
                entries[arcname] = _Entry(arcname, None, True)
                walk(path, real, rel, seen | {real})
            elif item.is_file():
                entries[arcname] = _file_entry(arcname, path, item.stat())
            else:
                logger.warning("Skipping %s: not a regular file or directory", path)

    walk(root, real_root, "", frozenset({real_root}))


def _add_top_level(
    path: str, arcname: str, entries: dict[str, _Entry], argument: str, rules: Sequence[_Rule] = ()
) -> None:
    """Add ``path`` (a file or a directory) to ``entries`` as ``arcname``.

    A name already in the archive is accepted only when ``path`` repeats it: every
    file it holds is there already with the same bytes (SDK v2 accepts such a
    dependency, typically one inside ``source_dir``); anything else is a clash.
    """
    new: dict[str, _Entry] = {}
    if os.path.isdir(path):
        new[arcname] = _Entry(arcname, None, True)
        _collect_tree(path, arcname, rules, new)
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


def _build_archive(entries: Iterable[_Entry], out: BinaryIO) -> None:
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


def _cached_archive(cache_dir: str, key: str) -> tuple[bytes, str] | None:
    """``(data, sha256)`` of the archive cached under ``key``, or None."""
    path = os.path.join(cache_dir, key + ".tar.gz")
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        os.utime(path)  # recently used: kept by the pruning
    except OSError:
        return None
    return data, hashlib.sha256(data).hexdigest()


def _cache_archive(cache_dir: str, key: str, data: bytes) -> None:
    """Keep ``data`` under ``key`` (atomically), then prune to :data:`CACHE_ENTRIES`.

    The cache is an optimisation: a failure to write it is logged, never raised.
    """
    try:
        os.makedirs(cache_dir, exist_ok=True)
        path = os.path.join(cache_dir, key + ".tar.gz")
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        cached = [
            os.path.join(cache_dir, n) for n in os.listdir(cache_dir) if n.endswith(".tar.gz")
        ]
        cached.sort(key=lambda p: os.stat(p).st_mtime_ns, reverse=True)
        for old in cached[CACHE_ENTRIES:]:
            os.unlink(old)
    except OSError as exc:
        logger.debug("Could not cache the source archive in %s: %s", cache_dir, exc)


_DEFAULT_CACHE: Any = object()


def package_code(
    entry_point: PathLike,
    source_dir: PathLike | None = None,
    dependencies: Sequence[PathLike] | None = None,
    cache_dir: str | None = _DEFAULT_CACHE,
) -> CodeBundle:
    """Build a deterministic ``sourcedir.tar.gz`` for ``entry_point`` (see the module docstring).

    When every file has the same size, mtime, ctime and inode as when an archive
    was last built from the same names, that archive is reused from ``cache_dir``
    (default :func:`default_cache_dir`; None: build it every time) instead of
    being compressed again: a second ``fit()`` with unchanged code only stats
    the files.

    Raises:
        ConfigurationError: as :func:`validate_code`, and also for an ``s3://``
            ``source_dir`` (nothing to package), an entry point excluded by
            ``.launchbayignore``, or dependencies whose names clash.
    """
    validate_code(entry_point, source_dir, dependencies)
    src = None if source_dir is None else os.fspath(source_dir)
    if src is not None and is_s3_uri(src):
        raise ConfigurationError.invalid(
            "source_dir",
            src,
            "a local directory (an s3:// source_dir is used as is and needs no packaging)",
        )
    entry_path, script_name = _resolve_entry_point(entry_point, src)

    entries: dict[str, _Entry] = {}
    if src is None:
        entries[script_name] = _file_entry(script_name, entry_path)
    else:
        rules = _load_ignore(src)
        _collect_tree(src, "", rules, entries)
        if script_name not in entries:
            raise ConfigurationError.invalid(
                "entry_point",
                os.fspath(entry_point),
                f"a file of source_dir={src!r} that is packaged",
                reason=(
                    f"It is excluded by {IGNORE_FILE}, a built-in rule "
                    "(.git/, __pycache__/, *.pyc) or a symbolic link outside source_dir"
                ),
            )
    for dep in dependencies or ():
        path = os.fspath(dep).rstrip("/\\") or os.fspath(dep)
        name = os.path.basename(os.path.abspath(path))
        _add_top_level(path, name, entries, "dependencies")

    if cache_dir is _DEFAULT_CACHE:
        cache_dir = default_cache_dir()
    key = _manifest_key(entries.values())
    cached = _cached_archive(cache_dir, key) if cache_dir else None
    if cached is not None:
        data, digest = cached
        logger.debug("Reusing the cached source archive %s", key)
    else:
        out = io.BytesIO()
        _build_archive(entries.values(), out)
        data = out.getvalue()
        digest = hashlib.sha256(data).hexdigest()
        if cache_dir:
            _cache_archive(cache_dir, key, data)
    files = tuple(
        sorted((e.arcname for e in entries.values() if e.path is not None), key=_sort_key)
    )
    logger.debug("Packaged %d file(s) into %d bytes (sha256 %s)", len(files), len(data), digest)
    return CodeBundle(
        data=data, sha256=digest, script_name=script_name, size=len(data), files=files
    )


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
    session.upload_bytes(bundle.data, bucket, key, extra_args=extra)
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
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(bundle.data)
    os.replace(tmp, path)
    logger.info("Staged source archive (%d bytes) at %s", bundle.size, file_uri)
    return True
