"""Host names in ``local_process`` jobs: ``algo-N`` resolves for every program a host runs.

On SageMaker and in Docker each host is reachable by its name (``algo-1`` ...),
so scripts build their own rendezvous from ``SM_HOSTS`` (``MASTER_ADDR=algo-1``
then ``torch.distributed.init_process_group``). In ``local_process`` mode every
host is a process group on this machine; the backend writes a job hosts file
(this machine's ``/etc/hosts`` plus ``127.0.0.1 algo-N`` for each host, see
:func:`write_hosts_file`) and names it in ``LAUNCHBAY_HOSTS_FILE``. At start the
host's runtime makes the C library resolve names from that file, for itself
and everything it starts (torch's TCPStore and gloo, mpirun, ``getent``), with
the first of these that works:

``namespace``
    A private mount namespace for this host's runtime in which the job hosts
    file is bind-mounted over ``/etc/hosts``: ``unshare(CLONE_NEWNS)`` as root,
    else ``unshare(CLONE_NEWUSER | CLONE_NEWNS)`` mapping the caller's own uid
    and gid (unprivileged user namespaces). The real ``/etc/hosts`` is never
    written; the namespace ends with the host's last process. No pid namespace:
    the processes keep their pids, signals and ``/proc`` work as before.
``nss_wrapper``
    ``LD_PRELOAD=libnss_wrapper.so`` with ``NSS_WRAPPER_HOSTS=<job hosts file>-nss_wrapper``
    (the job hosts file plus IPv4-mapped ``::ffff:127.0.0.1`` twins, for torch)
    for the processes the runtime starts (Debian/Ubuntu: ``libnss-wrapper``;
    Fedora: ``nss_wrapper``; ``LAUNCHBAY_NSS_WRAPPER=<path>`` names another
    copy). Covers dynamically linked programs.

``LAUNCHBAY_HOST_NAMES`` chooses: ``auto`` (default: the first that works,
else a warning and the job goes on with names unresolved), ``namespace`` or
``nss_wrapper`` (that one, else the job fails with the reason), ``off``.
Standard library only: this runs inside the host.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
import sys
from collections.abc import Callable, Iterable, Mapping, MutableMapping

from launchbay.runtime._linux import (
    CLONE_NEWNS,
    CLONE_NEWUSER,
    MS_BIND,
    MS_NODEV,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    check,
    libc,
    write_proc_file,
)
from launchbay.runtime.errors import TrainingSetupError
from launchbay.runtime.names import ENV, SETTING

__all__ = [
    "MODES",
    "HostNames",
    "apply",
    "hosts_file_text",
    "nss_wrapper_library",
    "write_hosts_file",
]

#: Accepted values of ``LAUNCHBAY_HOST_NAMES``.
MODES = ("auto", "namespace", "nss_wrapper", "off")
LOOPBACK = "127.0.0.1"

#: Where SageMaker puts a host's tree; each local_process host sees its own here.
OPT_ML = "/opt/ml"
#: Set by a host's runtime whose namespace binds its tree (the value) on /opt/ml.
OPT_ML_ENV = "LAUNCHBAY_OPT_ML"
_NSCD_SOCKETS = ("/run/nscd/socket", "/var/run/nscd/socket")
_NSS_WRAPPER_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
)


def hosts_file_text(
    hosts: Iterable[str],
    base: str = "/etc/hosts",
    addresses: Mapping[str, str] | None = None,
    others: Mapping[str, str] | None = None,
) -> str:
    """``base``'s entries (this machine's names stay), then ``<address> <host>`` for each host
    (``addresses``, else ``127.0.0.1``), then ``others`` (name -> address). A name given here
    is taken out of ``base``'s entries: the job's own address is the one that resolves."""
    try:
        with open(base, encoding="utf-8", errors="replace") as f:
            existing = f.read().splitlines()
    except OSError:
        existing = [f"{LOOPBACK} localhost"]
    addresses = addresses or {}
    others = others or {}
    hosts = list(hosts)
    ours = {name.lower() for name in [*hosts, *others]}
    # No comments or blank lines: nss_wrapper rejects a file that has any.
    lines = []
    for line in existing:
        fields = line.split("#", 1)[0].split()
        names = [name for name in fields[1:] if name.lower() not in ours]
        if fields and names:
            lines.append(" ".join([fields[0], *names]))
    lines += [f"{addresses.get(h, LOOPBACK)} {h}" for h in hosts]
    lines += [f"{address} {name}" for name, address in others.items()]
    # torch's sockets are IPv6 with IPv4-mapped peers: their names come from these.
    lines += [f"::ffff:{addresses[h]} {h}" for h in hosts if h in addresses]
    return "\n".join(lines) + "\n"


def write_hosts_file(
    path: str,
    hosts: Iterable[str],
    addresses: Mapping[str, str] | None = None,
    others: Mapping[str, str] | None = None,
) -> str:
    """Write the job hosts file for ``hosts`` at ``path`` (world-readable); returns ``path``."""
    text = hosts_file_text(hosts, addresses=addresses, others=others)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return path


class HostNames:
    """What :func:`apply` did: the mechanism used (``None``: none) and why others failed.

    ``opt_ml`` tells whether this host has its own ``/opt/ml`` (only in a namespace);
    ``opt_ml_problem`` why not, when the namespace was made but the bind failed.
    """

    def __init__(
        self, mechanism: str | None, failures: list[str], opt_ml_problem: str | None = None
    ):
        self.mechanism = mechanism
        self.failures = failures
        self.opt_ml_problem = opt_ml_problem

    @property
    def opt_ml(self) -> bool:
        return self.mechanism == "namespace" and self.opt_ml_problem is None


def _enter_namespace(hosts_file: str, user: bool, opt_ml: str | None = None) -> str | None:
    """Enter a new mount (and, with ``user``, user) namespace; bind ``hosts_file`` on /etc/hosts
    and, with ``opt_ml``, that directory on ``/opt/ml`` (:func:`bind_opt_ml`).

    Returns why ``/opt/ml`` could not be bound (the namespace stands), else None.
    """
    lib = libc()
    uid, gid = os.geteuid(), os.getegid()
    flags = CLONE_NEWNS | (CLONE_NEWUSER if user else 0)
    check(lib.unshare(flags), "unshare(CLONE_NEWUSER | CLONE_NEWNS)" if user else "unshare")
    if user:  # the same ids inside: files, permissions and ps look as before
        write_proc_file("/proc/self/setgroups", "deny")
        write_proc_file("/proc/self/uid_map", f"{uid} {uid} 1")
        write_proc_file("/proc/self/gid_map", f"{gid} {gid} 1")
    return private_mounts(hosts_file, opt_ml)


def private_mounts(hosts_file: str, opt_ml: str | None) -> str | None:
    """In a mount namespace just made: the hosts file and, with ``opt_ml``, ``/opt/ml``.

    Returns why ``/opt/ml`` could not be bound, else None.
    """
    lib = libc()
    # Nothing done here may reach the machine's mount table.
    check(lib.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    bind_hosts_file(hosts_file)
    if opt_ml is None:
        return None
    try:
        bind_opt_ml(opt_ml)
    except OSError as exc:
        return str(exc)
    return None


def bind_hosts_file(hosts_file: str) -> None:
    """In this process's own mount namespace: ``hosts_file`` becomes ``/etc/hosts``."""
    lib = libc()
    check(lib.mount(hosts_file.encode(), b"/etc/hosts", None, MS_BIND, None), "bind mount")
    for socket_path in _NSCD_SOCKETS:  # a caching nscd would answer from the real file
        if os.path.exists(socket_path):
            with contextlib.suppress(OSError):
                check(lib.mount(b"/dev/null", socket_path.encode(), None, MS_BIND, None), "")
    with open("/etc/hosts", "rb") as seen, open(hosts_file, "rb") as wanted:
        if seen.read() != wanted.read():
            raise OSError("the bind mount did not replace /etc/hosts")
    for socket_path in _NSCD_SOCKETS:  # a caching nscd would answer from the real file
        if os.path.exists(socket_path):
            with contextlib.suppress(OSError):
                check(lib.mount(b"/dev/null", socket_path.encode(), None, MS_BIND, None), "")


def bind_opt_ml(tree: str) -> None:
    """In this process's own mount namespace: the host's tree ``tree`` becomes ``/opt/ml``.

    Scripts written for SageMaker use literal paths (``/opt/ml/model/m.pt``); here
    they land in this host's model, output, checkpoint and input directories. Where
    the machine has no ``/opt/ml`` (the usual case) a mount point is needed without
    touching the machine: ``/opt`` is covered with a tmpfs in this namespace holding
    the real ``/opt``'s entries, each bound back from an fd opened before, plus an
    empty ``ml``. Without ``/opt`` there is no place to mount on: OSError.
    """
    lib = libc()
    if not os.path.isdir(OPT_ML):
        _make_opt_ml_mount_point(lib)
    check(lib.mount(tree.encode(), OPT_ML.encode(), None, MS_BIND | MS_REC, None), "bind /opt/ml")
    if not os.path.samefile(OPT_ML, tree):
        raise OSError(f"the bind mount did not make {tree} {OPT_ML}")


def _make_opt_ml_mount_point(lib: ctypes.CDLL) -> None:
    opt = os.path.dirname(OPT_ML)
    if not os.path.isdir(opt) or os.path.islink(opt):
        raise OSError(f"this machine has no {opt} directory to put /opt/ml in")
    real = os.open(opt, os.O_RDONLY | os.O_DIRECTORY)
    try:
        names = os.listdir(real)
        check(
            lib.mount(b"tmpfs", opt.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755"),
            f"mount tmpfs on {opt}",
        )
        for name in names:  # the real /opt's entries, as they were
            source = f"/proc/self/fd/{real}/{name}"
            target = os.path.join(opt, name)
            st = os.lstat(source)
            if stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(source), target)
                continue
            if stat.S_ISDIR(st.st_mode):
                os.mkdir(target)
            else:
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o600))
            check(
                lib.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None),
                f"bind {opt}/{name} back",
            )
        os.mkdir(OPT_ML, 0o755)
    finally:
        os.close(real)


def become_host(environ: Mapping[str, str]) -> str | None:
    """A rank that one launcher started for another host takes that host's ``/opt/ml``.

    Under one torchrun for every ``local_process`` host, the ranks of ``algo-2`` are
    children of ``algo-1``'s runtime and see its mount namespace. The host
    environment the rank adopts names its own tree (``$LAUNCHBAY_OPT_ML``); the rank
    then makes a mount namespace of its own (nested in its launcher's) binding that
    tree on ``/opt/ml``. Call it while single-threaded. Returns why not, else None.
    """
    tree = environ.get(OPT_ML_ENV)
    hosts_file = environ.get(ENV.HOSTS_FILE)
    if not tree or not hosts_file:
        return None
    with contextlib.suppress(OSError):
        if os.path.samefile(OPT_ML, tree):
            return None  # the host's own runtime started this rank
    try:
        return _enter_namespace(hosts_file, os.geteuid() != 0, tree)
    except OSError as exc:
        return str(exc)


_NAMESPACE_PROBE: list[str | None] = []


def namespace_problem() -> str | None:
    """Why this process's children could not have a mount namespace, or None (probed once)."""
    if not _NAMESPACE_PROBE:
        if not sys.platform.startswith("linux"):
            _NAMESPACE_PROBE.append(f"needs Linux (this is {sys.platform})")
        else:
            _NAMESPACE_PROBE.append(_probe_unshare(os.geteuid() != 0))
    return _NAMESPACE_PROBE[0]


def _probe_unshare(user: bool) -> str | None:
    """Can a forked child of this process make a mount (and user) namespace?"""
    flags = CLONE_NEWNS | (CLONE_NEWUSER if user else 0)
    return _in_child(lambda: check(libc().unshare(flags), "unshare(CLONE_NEWUSER | CLONE_NEWNS)"))


def _probe_namespace(hosts_file: str, user: bool, opt_ml: str | None) -> str | None:
    """Try the namespace in a forked child (a half-made user namespace cannot be undone)."""
    return _in_child(lambda: _enter_namespace(hosts_file, user, opt_ml))


def _in_child(attempt: Callable[[], object]) -> str | None:
    """Run ``attempt`` in a forked child (single-threaded, as the runtime is at this point);
    None when it worked, else why not."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(read_end)
            attempt()
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.write(write_end, str(exc).encode()[:500])
            code = 1
        os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        message = pipe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        return None
    return message or f"exit status {status}"


def _namespace(hosts_file: str, opt_ml: str | None, failures: list[str]) -> HostNames | None:
    if not sys.platform.startswith("linux"):
        failures.append(f"namespace: needs Linux (this is {sys.platform})")
        return None
    attempts = [False, True] if os.geteuid() == 0 else [True]
    for user in attempts:
        what = "user+mount namespace" if user else "mount namespace"
        problem = _probe_namespace(hosts_file, user, opt_ml)
        if problem is None:
            try:
                opt_ml_problem = _enter_namespace(hosts_file, user, opt_ml)
                return HostNames("namespace", failures, opt_ml_problem=opt_ml_problem)
            except OSError as exc:
                problem = str(exc)
        failures.append(f"{what}: {problem}")
    return None


def nss_wrapper_library(environ: Mapping[str, str] | None = None) -> str | None:
    """``LAUNCHBAY_NSS_WRAPPER`` if set, else ``libnss_wrapper.so`` in the usual places, or None."""
    explicit = (os.environ if environ is None else environ).get("LAUNCHBAY_NSS_WRAPPER")
    if explicit:
        return explicit
    for directory in _NSS_WRAPPER_DIRS:
        path = os.path.join(directory, "libnss_wrapper.so")
        if os.path.isfile(path):
            return path
    return None


def _nss_wrapper(hosts_file: str, environ: MutableMapping[str, str], failures: list[str]) -> bool:
    library = nss_wrapper_library(environ)
    if library is None:
        failures.append(
            "nss_wrapper: libnss_wrapper.so not found (install libnss-wrapper / nss_wrapper)"
        )
        return False
    if not os.path.isfile(library):
        failures.append(f"nss_wrapper: LAUNCHBAY_NSS_WRAPPER={library!r} is not a file")
        return False
    try:
        wrapper_hosts = _nss_wrapper_hosts_file(hosts_file)
    except OSError as exc:
        failures.append(f"nss_wrapper: {exc}")
        return False
    preload = [p for p in environ.get("LD_PRELOAD", "").replace(":", " ").split() if p]
    if library not in preload:
        preload.append(library)
    environ["LD_PRELOAD"] = " ".join(preload)
    environ["NSS_WRAPPER_HOSTS"] = wrapper_hosts
    return True


def _nss_wrapper_hosts_file(hosts_file: str) -> str:
    """``hosts_file`` plus ``::ffff:127.x.y.z`` (IPv4-mapped) twins of its loopback lines.

    nss_wrapper answers an IPv6 query for an IPv4-only name with EAI_ADDRFAMILY,
    where glibc says "no such name"; torch's c10d asks for IPv6 first and keeps
    retrying on that error. The mapped address still is this machine's loopback.
    """
    with open(hosts_file, encoding="utf-8") as f:
        lines = f.read().splitlines()
    mapped = [f"::ffff:{line}" for line in lines if line.startswith("127.")]
    path = f"{hosts_file}-nss_wrapper"
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines + mapped) + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return path


def apply(
    environ: MutableMapping[str, str] | None = None, opt_ml: str | None = None
) -> HostNames | None:
    """Make the job's host names resolve here (see the module doc); ``None`` when not asked.

    With ``opt_ml`` (this host's tree), the namespace also binds it on ``/opt/ml``.
    Call it while the process is single-threaded, before anything is started.
    Raises :class:`TrainingSetupError` for a bad ``LAUNCHBAY_HOST_NAMES`` or
    when the mechanism it names cannot be used.
    """
    environ = os.environ if environ is None else environ
    hosts_file = environ.get(ENV.HOSTS_FILE)
    raw_mode = environ.get(SETTING.HOST_NAMES, "")
    mode = raw_mode.strip().lower() or "auto"
    if mode not in MODES:
        raise TrainingSetupError(
            f"Invalid LAUNCHBAY_HOST_NAMES={raw_mode!r}. Accepted: {', '.join(MODES)}."
        )
    if not hosts_file or mode == "off":
        return None
    failures: list[str] = []
    if mode in ("auto", "namespace"):
        made = _namespace(hosts_file, opt_ml, failures)
        if made is not None:
            return made
    if mode in ("auto", "nss_wrapper") and _nss_wrapper(hosts_file, environ, failures):
        return HostNames("nss_wrapper", failures)
    if mode != "auto":
        raise TrainingSetupError(
            f"LAUNCHBAY_HOST_NAMES={raw_mode!r}: the host names of this local_process job "
            f"cannot be made to resolve ({'; '.join(failures)}). Accepted: auto, "
            "namespace (root, or unprivileged user namespaces), nss_wrapper (libnss-wrapper "
            "installed), off."
        )
    return HostNames(None, failures)
