"""The user's code: fetch and unpack it, resolve the entry point, handle requirements.txt.

* :func:`fetch_code` takes ``sagemaker_submit_directory`` -- ``s3://bucket/key``
  (boto3, imported only here, honours ``AWS_ENDPOINT_URL``), ``file://`` or a
  plain path to a ``.tar.gz`` or a directory -- and unpacks it into the code dir,
  refusing archive members that would escape it (:func:`safe_extract`). As in the
  toolkit, a code dir that already has content is left alone.
* :func:`resolve_entry_point` classifies ``sagemaker_program`` as the toolkit
  does: ``*.sh`` -> command; a ``setup.py`` in the code dir -> package (run with
  ``-m``); ``*.py`` -> script; a dotted name of a module/package in the code dir
  -> module (ours); anything else -> command (``/bin/sh -c ./name args``).
* :func:`prepare_requirements`: in containers, ``pip install`` as the toolkit
  does (``.`` for packages plus ``-r requirements.txt``); in local processes
  nothing is installed unless asked, unmet requirements are reported instead.
  When asked, the hosts of a ``local_process`` job, which share one interpreter,
  install once: the first host to take a lock in the job's shared directory runs
  pip, the others wait for it and take its result (:func:`_install_once`). Jobs
  share the interpreter too: every pip run into this machine's interpreter
  (``local_process``, a Ray node) holds its machine-wide lock,
  ``$LAUNCHBAY_HOME/locks/pip-<hash of sys.prefix>.lock`` (:func:`_interpreter_lock`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from launchbay.runtime.errors import TrainingSetupError
from launchbay.runtime.names import ENV, HP

if TYPE_CHECKING:
    import tarfile

__all__ = [
    "EntryPoint",
    "Requirement",
    "fetch_code",
    "safe_extract",
    "unsafe_members",
    "ENTRY_POINT_ACCEPTED",
    "entry_point_problem",
    "validate_entry_point_name",
    "resolve_entry_point",
    "parse_requirements",
    "unmet_requirements",
    "prepare_requirements",
    "interpreter_lock_path",
]

logger = logging.getLogger("launchbay.runtime")

_SAFE_NAME = re.compile(r"^[A-Za-z0-9._][A-Za-z0-9._+-]*(/[A-Za-z0-9._+-]+)*$")
_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


# --------------------------------------------------------------------------- fetching


def _local_path(uri: str) -> str:
    if uri.startswith("file://"):
        return urllib.parse.unquote(urllib.parse.urlparse(uri).path)
    return uri


def _s3_download(uri: str, destination: str) -> None:
    try:
        import boto3  # noqa: PLC0415 - only needed for s3:// code
    except ImportError as exc:
        raise TrainingSetupError(
            f"sagemaker_submit_directory={uri!r} is on S3 but boto3 is not installed in this "
            "environment. Install boto3 (pip install boto3) or pass a file:// or local path."
        ) from exc
    parsed = urllib.parse.urlparse(uri)
    bucket, key = parsed.netloc, parsed.path.lstrip("/")
    region = os.environ.get("AWS_REGION") or os.environ.get("SAGEMAKER_REGION")
    endpoint = os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("S3_ENDPOINT_URL")
    client = boto3.client("s3", region_name=region, endpoint_url=endpoint)
    try:
        client.download_file(bucket, key, destination)
    except Exception as exc:  # botocore errors: translate at the boundary
        raise TrainingSetupError(f"Could not download code from {uri}: {exc}") from exc


def unsafe_members(archive: tarfile.TarFile, destination: str) -> list[str]:
    """Names of the members :func:`safe_extract` refuses (:func:`launchbay.runtime.archive.refused_members`).

    Absolute names, ``..`` segments, devices and FIFOs; members whose directory or
    own path resolves outside ``destination`` through the archive's links (a chain
    such as ``a -> .`` then ``b -> a/..`` then ``b/evil.py``); links that resolve
    outside or into a loop in the final tree. The check does not depend on
    tarfile's ``data`` filter (Python 3.10 before 3.10.12, 3.11 before 3.11.4).
    """
    from launchbay.runtime.archive import refused_members  # noqa: PLC0415 - see safe_extract

    return [name for name, _why in refused_members(archive, destination)]


def safe_extract(
    archive_path: str, destination: str, *, use_data_filter: bool | None = None
) -> None:
    """Unpack a code archive into ``destination``; refuse it whole if any member escapes.

    The one safe extraction (:func:`launchbay.runtime.archive.safe_extract`) with
    the code archive's rule: raises :class:`~launchbay.runtime.errors.UnsafeArchiveError` naming the
    offending members and writes nothing (``destination`` is created, and stays
    as it was); if extraction fails part way, what it wrote is removed again.
    ``use_data_filter=False`` extracts as a Python without tarfile's ``data`` filter.
    """
    # Imported here: tarfile and the archive rules cost every host's start (a container's
    # code is unpacked already; only an s3:// or archive submit directory needs them).
    from launchbay.runtime.archive import safe_extract as extract_archive  # noqa: PLC0415

    extract_archive(archive_path, destination, whole=True, use_data_filter=use_data_filter)


def fetch_code(uri: str | None, code_dir: str) -> bool:
    """Put the code at ``uri`` into ``code_dir``; returns whether anything was fetched.

    ``uri`` is ``s3://...``, ``file://...`` or a path to a tarball or a directory.
    Nothing is done when ``uri`` is empty, is the code dir itself, or the code
    dir already has content (the toolkit's rule, so code baked into an image wins).
    """
    os.makedirs(code_dir, exist_ok=True)
    if not uri:
        return False
    if os.path.realpath(_local_path(uri)) == os.path.realpath(code_dir):
        return False  # already in place (the local Docker mode unpacks it there)
    if os.listdir(code_dir):
        logger.info("Code directory %s is not empty; not fetching %s", code_dir, uri)
        return False
    if uri.startswith("s3://"):
        with tempfile.TemporaryDirectory(prefix="launchbay-code-") as tmp:
            archive = os.path.join(tmp, "sourcedir.tar.gz")
            _s3_download(uri, archive)
            safe_extract(archive, code_dir)
        return True
    path = _local_path(uri)
    if not os.path.exists(path):
        raise TrainingSetupError(
            f"sagemaker_submit_directory={uri!r} does not exist. Accepted: an s3:// URI, a "
            "file:// URI or a path to a sourcedir.tar.gz or a directory."
        )
    if os.path.isdir(path):
        if os.path.realpath(path) == os.path.realpath(code_dir):
            return False
        shutil.copytree(path, code_dir, dirs_exist_ok=True, symlinks=True)
    elif _is_tarfile(path):
        safe_extract(path, code_dir)
    else:
        shutil.copy2(path, code_dir)
    return True


def _sha256(data: bytes) -> Any:
    import hashlib  # noqa: PLC0415 - OpenSSL's load costs every host's start 2-3 ms

    return hashlib.sha256(data)


def _is_tarfile(path: str) -> bool:
    import tarfile  # noqa: PLC0415 - see safe_extract

    return tarfile.is_tarfile(path)


# --------------------------------------------------------------------------- entry points


@dataclass(frozen=True)
class EntryPoint:
    """The resolved entry point.

    ``kind``: ``"script"`` (run a .py file), ``"module"`` (``python -m``; packages
    with setup.py and dotted module names), or ``"command"`` (``/bin/sh -c ./name``).
    """

    name: str
    kind: str
    path: str | None = None
    module: str | None = None

    @property
    def is_python(self) -> bool:
        """Whether the entry point runs in a Python interpreter."""
        return self.kind in ("script", "module")


#: What an entry point's name (``sagemaker_program``) may be: the one rule, checked by the
#: estimator (``entry_point``, relative to ``source_dir``) and by every host's runtime.
ENTRY_POINT_ACCEPTED = (
    "a plain relative path of letters, digits, '.', '_', '+', '-' and '/', not starting "
    "with '-' or '/', without '.' or '..' segments (for example 'train.py' or "
    "'bin/train.sh')"
)


def entry_point_problem(name: object) -> str | None:
    """Why ``name`` cannot be an entry point's name (to follow "it"), or ``None``.

    The name goes into a command line (``/bin/sh -c ./<name>``, ``python <name>``),
    so only a plain relative path inside the code directory is accepted: no
    spaces, no shell syntax (``$(...)``), no leading ``-`` (an option).
    """
    if not isinstance(name, str) or not name:
        return "is empty" if name == "" else f"is {type(name).__name__}, not a string"
    if not _SAFE_NAME.match(name) or any(s in (".", "..") for s in name.split("/")):
        return "is not a plain relative path"
    return None


def validate_entry_point_name(name: str | None) -> str:
    """Accept only a plain relative path inside the code dir (the toolkit's rule)."""
    if not name:
        raise TrainingSetupError(
            f"No training entry point: set the '{HP.PROGRAM}' hyperparameter to the script "
            "to run, relative to the source directory (for example 'train.py' or 'train.sh')."
        )
    problem = entry_point_problem(name)
    if problem:
        raise TrainingSetupError(
            f"The training entry point {name!r} {problem}. Accepted: {ENTRY_POINT_ACCEPTED}."
        )
    return name


def _module_in(code_dir: str, name: str) -> bool:
    if not _MODULE_NAME.match(name):
        return False
    base = os.path.join(code_dir, *name.split("."))
    return os.path.isfile(base + ".py") or os.path.isfile(os.path.join(base, "__init__.py"))


def resolve_entry_point(code_dir: str, name: str | None) -> EntryPoint:
    """Classify ``name`` in ``code_dir`` (see the module docstring for the rules)."""
    name = validate_entry_point_name(name)
    path = os.path.realpath(os.path.join(code_dir, name))
    root = os.path.realpath(code_dir)
    if not (path == root or path.startswith(root + os.sep)):
        raise TrainingSetupError(
            f"The training entry point {name!r} resolves outside the source directory."
        )
    if name.endswith(".sh"):
        return EntryPoint(name, "command", path=path)
    if os.path.exists(os.path.join(code_dir, "setup.py")):
        return EntryPoint(name, "module", path=path, module=re.sub(r"\.py$", "", name))
    if name.endswith(".py"):
        return EntryPoint(name, "script", path=path)
    if not os.path.exists(path) and _module_in(code_dir, name):
        return EntryPoint(name, "module", module=name)
    return EntryPoint(name, "command", path=path)


# --------------------------------------------------------------------------- requirements


@dataclass(frozen=True)
class Requirement:
    """One line of requirements.txt: a distribution name and its version specifier."""

    name: str
    specifier: str
    line: str


_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([^;#]*)")


def parse_requirements(text: str) -> list[Requirement]:
    """Requirement names and specifiers; options, URLs and editable lines are skipped."""
    requirements: list[Requirement] = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")) or "://" in line or line.startswith("."):
            continue
        match = _REQ.match(line)
        if match:
            requirements.append(Requirement(match.group(1), match.group(3).strip(), line))
    return requirements


def unmet_requirements(requirements: list[Requirement]) -> list[str]:
    """Human-readable problems: distributions not installed, ``==`` pins not matching."""
    import importlib.metadata  # noqa: PLC0415 - keeps the runtime's start fast

    problems: list[str] = []
    for req in requirements:
        try:
            installed = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{req.line} (not installed)")
            continue
        pin = re.fullmatch(r"==\s*([^,\s]+)", req.specifier)
        if pin and pin.group(1) != installed and not pin.group(1).endswith("*"):
            problems.append(f"{req.line} (installed: {installed})")
    return problems


def _pip_install(args: list[str], cwd: str, python: str, *, shared: bool = False) -> None:
    problem = _run_pip(args, cwd, python, shared=shared)
    if problem is not None:
        raise TrainingSetupError(problem)


def _run_pip(args: list[str], cwd: str, python: str, *, shared: bool = False) -> str | None:
    """Run ``pip install args`` with its output shown; why it failed, or ``None``.

    ``shared``: ``python`` is this machine's, shared with other jobs (``local_process``,
    a Ray node): pip runs under its machine-wide lock (:func:`_interpreter_lock`).
    """
    command = [python, "-m", "pip", "install", *args]
    with _interpreter_lock(python) if shared else contextlib.nullcontext():
        marker = _satisfied_marker(args, cwd, python) if shared else None
        if marker is not None and _still_satisfied(marker, python):
            logger.info(
                "requirements.txt is already installed into %s (unchanged since pip installed "
                "it; %s): pip does not run",
                _prefix_of(python),
                marker,
            )
            return None
        logger.info("Installing: %s", " ".join(command))
        result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
        if marker is not None and result.returncode == 0:
            _record_satisfied(marker, python)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    if result.returncode == 0:
        return None
    tail = "\n".join(result.stderr.strip().splitlines()[-10:])
    return f"'{' '.join(command)}' failed with exit code {result.returncode} in {cwd}:\n{tail}"


#: The variable naming launchbay's local root (the client's ``launchbay._home``), and its default.
_HOME_ENV = "LAUNCHBAY_HOME"
_HOME_DEFAULT = "~/.launchbay"


def _prefix_of(python: str) -> str:
    """The ``sys.prefix`` of ``python``: the environment whose site-packages pip writes.

    Read from where the interpreter lies, never by running it (running it would be a
    second process per install, and a stand-in interpreter would count it as one): a
    venv's ``<prefix>/bin/python`` (the folder that holds ``pyvenv.cfg``), else the
    folder above the interpreter's ``bin``.
    """
    if os.path.abspath(python) == os.path.abspath(sys.executable):
        return sys.prefix
    folder = os.path.dirname(os.path.dirname(os.path.abspath(python)))
    if os.path.isfile(os.path.join(folder, "pyvenv.cfg")):
        return folder
    return os.path.dirname(os.path.dirname(os.path.realpath(python)))


def _site_fingerprint(python: str) -> list[list[object]]:
    """The folders pip writes in ``python``'s environment, with their change times.

    Installing or removing a distribution adds or removes entries there, which
    changes the folder's mtime: an unchanged fingerprint means nothing was
    installed or removed since it was taken.
    """
    prefix = _prefix_of(python)
    found: list[list[object]] = []
    for lib in ("lib", "lib64"):
        with contextlib.suppress(OSError):
            for entry in sorted(os.listdir(os.path.join(prefix, lib))):
                site = os.path.join(prefix, lib, entry, "site-packages")
                with contextlib.suppress(OSError):
                    found.append([site, os.stat(site).st_mtime_ns])
    return found


def _satisfied_marker(args: list[str], cwd: str, python: str) -> str | None:
    """``<pip lock>.satisfied/<key>``: where a successful ``pip install -r requirements.txt``
    of these exact requirements into ``python``'s environment is recorded.

    ``key`` is the interpreter, the pip arguments and requirements.txt's bytes. Only
    a requirements.txt of plain ``name<specifier>`` lines has one: an option
    (``-r``, ``-e``, ``--index-url``), a path or a URL can change without its text
    changing, so pip always runs for those.
    """
    if args != ["-r", "requirements.txt"]:
        return None
    try:
        with open(os.path.join(cwd, "requirements.txt"), "rb") as f:
            content = f.read()
    except OSError:
        return None
    text = content.decode("utf-8", errors="replace")
    lines = [ln.split(" #", 1)[0].strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    if len(parse_requirements(text)) != len(lines):
        return None
    what = json.dumps([os.path.abspath(python), args]).encode() + b"\0" + content
    key = _sha256(what).hexdigest()[:32]
    return os.path.join(interpreter_lock_path(python)[: -len(".lock")] + ".satisfied", key)


def _still_satisfied(marker: str, python: str) -> bool:
    try:
        with open(marker, encoding="utf-8") as f:
            recorded = json.load(f)
    except (OSError, ValueError):
        return False
    return bool(recorded) and recorded == _site_fingerprint(python)


def _record_satisfied(marker: str, python: str) -> None:
    """Remember that pip succeeded (0600 file in a 0700 folder, as the lock); best effort."""
    try:
        os.makedirs(os.path.dirname(marker), mode=0o700, exist_ok=True)
        tmp = f"{marker}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(_site_fingerprint(python), f)
        os.replace(tmp, marker)
    except OSError as exc:
        logger.debug("Could not record the installed requirements (%s): %s", marker, exc)


def interpreter_lock_path(python: str = sys.executable) -> str:
    """``$LAUNCHBAY_HOME/locks/pip-<hash of python's sys.prefix>.lock``: one per environment."""
    home = os.path.abspath(os.path.expanduser(os.environ.get(_HOME_ENV) or _HOME_DEFAULT))
    digest = _sha256(os.path.realpath(_prefix_of(python)).encode()).hexdigest()[:16]
    return os.path.join(home, "locks", f"pip-{digest}.lock")


@contextlib.contextmanager
def _interpreter_lock(python: str) -> Iterator[None]:
    """Hold ``python``'s machine-wide pip lock (an exclusive ``flock``) while the block runs.

    Every job of this machine that installs into the same environment (its
    ``sys.prefix``), whichever job it belongs to, takes the same lock, so no two
    pip runs write one site-packages at once; a host that waits says so in its
    log. The lock's folder is 0700 and its file 0600 (``$LAUNCHBAY_HOME``'s
    rule). Where the lock cannot be made (a read-only home), pip runs unlocked
    after a warning.
    """
    try:
        import fcntl  # noqa: PLC0415 - POSIX only
    except ImportError:  # pragma: no cover - the runtime runs on Linux
        yield
        return
    path = interpreter_lock_path(python)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        logger.warning(
            "Not locking %s for pip (%s: %s): another job may install into it at the same time",
            python,
            path,
            exc.strerror or exc,
        )
        yield
        return
    try:
        os.fchmod(fd, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info(
                "Waiting for another job's pip run into %s to end (lock %s)",
                _prefix_of(python),
                path,
            )
            started = time.monotonic()
            fcntl.flock(fd, fcntl.LOCK_EX)
            logger.info("Waited %.1f s for the pip lock of %s", time.monotonic() - started, python)
        yield
    finally:
        os.close(fd)  # releases the lock


def _interpreter_key(args: list[str], cwd: str, python: str) -> str:
    """What makes two hosts' installs the same one: interpreter, arguments, requirements.

    The interpreter is its path as given (a venv's ``python`` is a link to the base
    interpreter: following it would merge venvs) and, for this one, ``sys.prefix``.
    """
    requirements = b""
    with contextlib.suppress(OSError), open(os.path.join(cwd, "requirements.txt"), "rb") as f:
        requirements = f.read()
    prefix = sys.prefix if os.path.abspath(python) == os.path.abspath(sys.executable) else ""
    what = json.dumps([os.path.abspath(python), prefix, args]).encode() + b"\0" + requirements
    return _sha256(what).hexdigest()[:24]


def _this_host() -> str:
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        from launchbay.runtime import contract  # noqa: PLC0415 - only to name the installer

        return str(contract.read_resource_config(contract.paths())["current_host"])
    return "another host"


def _install_once(args: list[str], cwd: str, python: str, shared_dir: str) -> None:
    """``pip install args`` into ``python`` once for all the hosts of a local job.

    The hosts of a ``local_process`` job share this machine's interpreter: the
    first host to take an exclusive lock on ``<shared_dir>/requirements/<key>.lock``
    (``key``: the interpreter, the pip arguments and requirements.txt's content)
    runs pip, with its output in its own log, and records the result next to the
    lock; every other host waits for the lock and takes that result: nothing to
    do after a success, the same :class:`TrainingSetupError` after a failure. A
    host that dies while installing releases the lock without a result, and the
    next host installs.
    """
    try:
        import fcntl  # noqa: PLC0415 - POSIX only; elsewhere every host installs
    except ImportError:  # pragma: no cover - the runtime runs on Linux
        _pip_install(args, cwd, python)
        return
    directory = os.path.join(shared_dir, "requirements")
    os.makedirs(directory, exist_ok=True)
    key = _interpreter_key(args, cwd, python)
    result_path = os.path.join(directory, f"{key}.json")
    with open(os.path.join(directory, f"{key}.lock"), "a+") as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info(
                "Waiting for another host of this job to install requirements.txt into %s",
                python,
            )
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            with open(result_path, encoding="utf-8") as f:
                done = json.load(f)
        except (OSError, ValueError):
            done = None
        if isinstance(done, dict):
            host = done.get("host") or "another host"
            problem = done.get("problem")
            if problem:
                raise TrainingSetupError(
                    f"{problem}\n(pip ran once for this job's hosts, on {host}: its output is "
                    f"in {host}'s log.)"
                )
            logger.info(
                "requirements.txt is installed: %s installed it into %s for this job's hosts",
                host,
                python,
            )
            return
        problem = _run_pip(args, cwd, python, shared=True)
        record = {"host": _this_host(), "python": python, "args": args, "problem": problem}
        tmp = f"{result_path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(record, f)
        os.replace(tmp, result_path)
    if problem is not None:
        raise TrainingSetupError(problem)


def prepare_requirements(
    code_dir: str,
    entry: EntryPoint,
    *,
    local_process: bool,
    install: str | None,
    python: str = sys.executable,
    shared_dir: str | None = None,
) -> list[str]:
    """Install or check requirements; returns warnings to show the user.

    ``install`` is ``$LAUNCHBAY_INSTALL_REQUIREMENTS``. In containers
    (``local_process`` false) the toolkit's rule applies unless it is ``"0"``:
    a package (setup.py) is ``pip install . [-r requirements.txt]``, a script
    with a requirements.txt gets ``pip install -r requirements.txt``; each
    container installs into its own interpreter. In local processes nothing is
    installed unless it is ``"1"``; unmet requirements are returned as warnings
    instead. When it is ``"1"``, the hosts of the job install once
    (:func:`_install_once`), coordinating in ``shared_dir`` (default
    ``$LAUNCHBAY_SHARED_DIR``; ``""``: every host installs).
    """
    requirements_file = os.path.join(code_dir, "requirements.txt")
    has_requirements = os.path.exists(requirements_file)
    is_package = os.path.exists(os.path.join(code_dir, "setup.py")) and entry.kind == "module"
    should_install = install == "1" if local_process else install != "0"
    # This machine's interpreter, shared by every job here: pip takes its lock.
    shared = local_process or os.environ.get(ENV.RAY) == "1"
    if should_install:
        if is_package and not local_process:
            _pip_install(
                ["."] + (["-r", "requirements.txt"] if has_requirements else []),
                code_dir,
                python,
                shared=shared,
            )
        elif has_requirements and entry.kind != "command":
            if shared_dir is None:
                shared_dir = os.environ.get(ENV.SHARED_DIR, "")
            if local_process and shared_dir:
                _install_once(["-r", "requirements.txt"], code_dir, python, shared_dir)
            else:
                _pip_install(["-r", "requirements.txt"], code_dir, python, shared=shared)
        return []
    if not has_requirements:
        return []
    with open(requirements_file, encoding="utf-8") as f:
        problems = unmet_requirements(parse_requirements(f.read()))
    if not problems:
        return []
    why = (
        "in local_process mode (set LAUNCHBAY_INSTALL_REQUIREMENTS=1 to install it)"
        if local_process
        else "(LAUNCHBAY_INSTALL_REQUIREMENTS=0)"
    )
    return [f"requirements.txt is not installed {why}; unmet: " + "; ".join(problems)]
