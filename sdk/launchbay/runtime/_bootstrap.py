"""The per-rank wrapper: ``python -m launchbay.runtime._bootstrap <script> args...``.

Also ``... _bootstrap -m <module> args...`` and, for non-Python entry points,
``... _bootstrap --exec <program> args...`` (sets up, then runs the program as a
child, forwarding signals, and ends as it ends: see :func:`_run_program`). It works under
torchrun (``torchrun ... -m launchbay.runtime._bootstrap``) and under mpirun
(``python -m mpi4py -m launchbay.runtime._bootstrap ...``, so an uncaught
exception still aborts every MPI rank).

Before the user's code runs it:

1. in ``local_process`` MPI mode (``$LAUNCHBAY_MPI_LOCAL``), or under the one
   torchrun of a several-host ``local_process`` job (``$LAUNCHBAY_TORCH_LOCAL``),
   becomes a rank of the host it belongs to (``hosts[rank // ppn]``): loads
   that host's environment (SM_CURRENT_HOST, SM_MODEL_DIR, ...) and working
   directory, and sets the local rank (and host index) MPI or a torchrun per
   host would report on a real cluster; under mpirun over
   SSH it loads the environment its own host's runtime published
   (``$LAUNCHBAY_HOST_ENV_FILE``), so it sees its host's SM_CURRENT_HOST;
2. sends its stdout/stderr to the runtime's per-rank FIFOs (``$LAUNCHBAY_IO_DIR``),
   so every line can be labelled with its global rank, and makes both
   line-buffered (one write per line);
3. in an smdistributed job run by the local stand-in (``$LAUNCHBAY_SMDDP``),
   exports ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` and
   ``GROUP_RANK`` from MPI's numbering (what ``smddprun`` gives each rank on
   SageMaker); in local jobs (``$LAUNCHBAY_STANDINS=1``, set only by the local
   backends) appends the stand-ins directory (:mod:`launchbay.runtime.standins`)
   to ``sys.path`` -- last, so a real library is always found first;
4. writes a start record (``$LAUNCHBAY_RANKS_DIR``, see :mod:`._records`), and
   marks the environment of the processes it starts (``$LAUNCHBAY_RANK_OWNER``):
   a bootstrap started below a rank (a user's launcher that runs it again) is
   that rank's child, and writes only a child record when it fails.

When the user's code ends it writes the end record: exit code, and for an
uncaught exception its type, message, traceback and time -- then re-raises, so
the process exits exactly as ``python script.py`` would.

One exception: a rank whose code returned normally (or called ``sys.exit(0)``)
leaves with ``os._exit(0)`` right after the last ``atexit`` handler the code
registered, once every open file object is flushed (and, under mpi4py, MPI is
finalized). Interpreter finalization is skipped: that is where torch 2.13's gloo
aborts a process that has finished its work ("terminate called without an
active exception", SIGABRT), which would otherwise fail the job. An abort that
still happens after the return (an ``atexit`` handler of the code's own) is
forgiven by the runtime with a warning, because the end record says the code
returned (see :mod:`._supervisor`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import runpy
import signal
import sys
import time
from types import TracebackType

from launchbay.runtime import _cpus, _records, standins

TYPE_CHECKING = False  # not typing's: every rank imports this module before its script
if TYPE_CHECKING:
    from typing import Any

_RANK_VARS = ("LAUNCHBAY_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "RANK")
_LOCAL_RANK_VARS = (
    "LAUNCHBAY_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID",
    "LOCAL_RANK",
)


def _first_int(names: tuple[str, ...], default: int = 0) -> int:
    for name in names:
        value = os.environ.get(name)
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value)
    return default


def _adopt_host(host_spec: dict[str, Any]) -> None:
    """Take on a host's environment (and working directory) published by its runtime."""
    old_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ.update(host_spec["env"])
    _cpus.take_cpu_share()  # the launcher ran on its own host's CPUs
    if host_spec.get("cwd"):
        os.chdir(host_spec["cwd"])
    new_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [p for p in sys.path if p not in old_path]
    sys.path[1:1] = new_path


def _own_host(variable: str, rank: int) -> tuple[dict[str, Any], int, int, int]:
    """Under one launch for every local host (``$<variable>``): the environment the host of
    ``rank`` published, that host's index, the processes per host and the host count."""
    spec = json.loads(os.environ[variable])
    ppn = int(spec["ppn"])
    hosts = spec["hosts"]
    index = min(rank // ppn, len(hosts) - 1)
    with open(os.path.join(spec["env_dir"], f"{hosts[index]}.json"), encoding="utf-8") as f:
        return json.load(f), index, ppn, len(hosts)


def _become_mpi_local_rank() -> None:
    """Adopt the environment of the host this MPI rank belongs to (local_process mode)."""
    rank = _first_int(_RANK_VARS[1:4])
    host_spec, index, ppn, _ = _own_host("LAUNCHBAY_MPI_LOCAL", rank)
    _adopt_host(host_spec)
    os.environ["OMPI_COMM_WORLD_LOCAL_RANK"] = str(rank % ppn)
    os.environ["OMPI_COMM_WORLD_LOCAL_SIZE"] = str(ppn)
    os.environ["OMPI_COMM_WORLD_NODE_RANK"] = str(index)


#: What the one torchrun of a local job gives each rank, kept over its host's environment.
_TORCHRUN_VARS = (
    "RANK",
    "WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
)


def _become_torch_local_rank() -> None:
    """Become a rank of the host this rank belongs to, under one torchrun for all hosts.

    torchrun numbered the ranks as one node; a torchrun per host would have given
    the local rank, the host's index and the sizes set here.
    """
    rank = _first_int(("RANK",))
    host_spec, index, ppn, host_count = _own_host("LAUNCHBAY_TORCH_LOCAL", rank)
    kept = {n: os.environ[n] for n in _TORCHRUN_VARS if n in os.environ}
    kept.update({n: v for n, v in os.environ.items() if n.startswith("TORCHELASTIC_")})
    _adopt_host(host_spec)
    os.environ.update(kept)
    # Imported here: only a local_process rank that another host's launcher started needs
    # them, and every rank's start pays for the imports at the top.
    from launchbay.runtime import _hostnames, _netns

    try:  # this host's own namespaces: network, name, /opt/ml
        problem = None if _netns.enter_host(os.environ) else _hostnames.become_host(os.environ)
    except OSError as exc:
        problem = str(exc)
    if host_spec.get("cwd"):
        os.chdir(host_spec["cwd"])  # entering a mount namespace moved the working directory
    if problem:
        print(
            f"[launchbay] WARNING rank {rank} sees another host's /opt/ml: {problem}",
            file=sys.stderr,
        )
    if ppn == 1 and "OMP_NUM_THREADS" not in host_spec["env"]:
        os.environ.pop("OMP_NUM_THREADS", None)  # torchrun sets it for 2+ ranks a node only
    os.environ.update(
        {
            "LOCAL_RANK": str(rank % ppn),
            "LOCAL_WORLD_SIZE": str(ppn),
            "GROUP_RANK": str(index),
            "GROUP_WORLD_SIZE": str(host_count),
        }
    )


def _export_torch_world() -> None:
    """``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``LOCAL_WORLD_SIZE`` from mpirun's variables."""
    if os.environ.get("OMPI_COMM_WORLD_SIZE") is None:
        return
    rank = _first_int(_RANK_VARS[1:4])
    local_size = max(_first_int(("OMPI_COMM_WORLD_LOCAL_SIZE",), 1), 1)
    os.environ.update(
        {
            "RANK": str(rank),
            "WORLD_SIZE": os.environ["OMPI_COMM_WORLD_SIZE"],
            "LOCAL_RANK": str(_first_int(("OMPI_COMM_WORLD_LOCAL_RANK",))),
            "LOCAL_WORLD_SIZE": str(local_size),
            "GROUP_RANK": str(rank // local_size),
        }
    )


def _redirect_output(io_dir: str, rank: int) -> None:
    """Point fds 1 and 2 at the runtime's FIFOs for this rank (if the runtime is reading)."""
    import fcntl  # noqa: PLC0415 - POSIX only, and only needed here

    targets = ((f"{rank}.out", 1, sys.stdout), (f"{rank}.err", 2, sys.stderr))
    for name, fd, stream in targets:
        try:
            pipe = os.open(os.path.join(io_dir, name), os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue  # no reader (or no FIFO): keep the inherited stream
        flags = fcntl.fcntl(pipe, fcntl.F_GETFL)
        fcntl.fcntl(pipe, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        if stream is not None:
            stream.flush()
        os.dup2(pipe, fd)
        os.close(pipe)


#: Set by a rank for every process it starts: ``{"ranks_dir", "rank", "pid"}`` (JSON).
_OWNER = "LAUNCHBAY_RANK_OWNER"


def _owning_rank(ranks_dir: str | None) -> int | None:
    """The rank that started this process, when a rank of the same job did (else ``None``).

    A rank's bootstrap marks its environment (:data:`_OWNER`); a bootstrap that
    finds the mark of the same ranks directory and another process is that
    rank's child (a user's launcher ran it): it must not write the rank's
    records. A job started from inside a rank has a ranks directory of its own,
    so its ranks are ranks.
    """
    try:
        mark = json.loads(os.environ.get(_OWNER) or "null")
    except ValueError:
        return None
    if not ranks_dir or not isinstance(mark, dict) or mark.get("ranks_dir") != ranks_dir:
        return None
    if mark.get("pid") == os.getpid() or not isinstance(mark.get("rank"), int):
        return None
    return int(mark["rank"])


def _identity() -> dict[str, Any]:
    return {
        "rank": _first_int(_RANK_VARS),
        "local_rank": _first_int(_LOCAL_RANK_VARS),
        "host": os.environ.get("SM_CURRENT_HOST") or os.uname().nodename,
        "pid": os.getpid(),
    }


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    return 1


def _is_wrapper_frame(filename: str) -> bool:
    if filename == "<frozen runpy>":
        return True
    path = os.path.realpath(filename)
    if path in (os.path.realpath(__file__), os.path.realpath(runpy.__file__)):
        return True
    return path.endswith((os.path.join("mpi4py", "run.py"), os.path.join("mpi4py", "__main__.py")))


def _trim(tb: TracebackType | None) -> TracebackType | None:
    """Drop the leading frames of this wrapper, runpy and mpi4py.run."""
    while tb is not None and _is_wrapper_frame(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return tb


def _user_traceback(exc: BaseException) -> str:
    """The traceback as the user's script would have produced it."""
    import traceback  # noqa: PLC0415 - a failing rank's only: every rank imports this module

    return "".join(traceback.format_exception(type(exc), exc, _trim(exc.__traceback__)))


def _excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    trimmed = _trim(tb) or tb
    sys.__excepthook__(kind, value.with_traceback(trimmed), trimmed)


#: The exit code to leave with after the atexit handlers, once the code returned normally.
_leave_code: int | None = None


def _flush_everything() -> None:
    """Flush every open Python file object and C stdio stream (finalization will not)."""
    import gc  # noqa: PLC0415
    import io  # noqa: PLC0415

    for obj in gc.get_objects():
        # The type's check, not isinstance(): an ABC's instance check reads obj.__class__,
        # and some objects warn on any attribute read (torch.distributed.reduce_op's
        # FutureWarning, once per rank at the end of every torch job).
        if issubclass(type(obj), io.IOBase):
            with contextlib.suppress(Exception):
                if not obj.closed and obj.writable():
                    obj.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(Exception):
        import ctypes  # noqa: PLC0415

        ctypes.CDLL(None).fflush(None)


def _finalize_mpi() -> None:
    module = sys.modules.get("mpi4py.MPI")
    if module is None:
        return
    with contextlib.suppress(Exception):
        if module.Is_initialized() and not module.Is_finalized():
            module.Finalize()


def _leave_after_atexit() -> None:
    """Registered before the user's code runs, so it runs after every handler the code added."""
    if _leave_code is None:
        return
    for signum in (signal.SIGTERM, signal.SIGINT):  # the code is done: nothing to interrupt
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signum, signal.SIG_IGN)
    _finalize_mpi()
    _flush_everything()
    os._exit(_leave_code)


#: Signals a program run with ``--exec`` gets when this wrapper gets them.
_FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGCONT")


def _run_program(argv: list[str], record: Any) -> None:
    """Run a program that is not Python (``--exec``) as a child; end as it ends.

    The wrapper stays, so the program's rank has start and end records like a
    Python rank's (its exit code, ``128 + N`` for signal N): a ``max_run`` stop
    then names only the ranks still running. Signals sent to this process are
    passed to the program, as if it had been exec'd; it runs in a process group
    of its own (a signal to the rank's whole group reaches it once, through
    here) and gets SIGKILL if this process dies. The wrapper then exits with the
    program's status, or dies of the program's signal.
    """
    import subprocess  # noqa: PLC0415 - only ranks that run a program need it

    from launchbay.runtime._procs import describe_exit, die_with_parent  # noqa: PLC0415

    if not argv:
        raise SystemExit("launchbay bootstrap: --exec needs a program")
    child: subprocess.Popen[bytes] | None = None
    pending: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if child is None:
            pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signum)  # to the program, as if it had been exec'd

    signums = [getattr(signal, n) for n in _FORWARDED if hasattr(signal, n)]
    for signum in signums:
        signal.signal(signum, forward)

    def own_group() -> None:
        os.setpgid(0, 0)
        die_with_parent()

    try:
        child = subprocess.Popen(argv, preexec_fn=own_group)  # noqa: PLW1509 - one thread
    except OSError as exc:
        message = f"launchbay bootstrap: could not run {argv[0]!r}: {exc}"
        print(message, file=sys.stderr, flush=True)
        record(exit_code=127, error=message)
        os._exit(127)
    for signum in pending:
        forward(signum, None)
    returncode = child.wait()
    code = 128 - returncode if returncode < 0 else returncode
    # What ran: the toolkit's form is /bin/sh -c './train.sh args'.
    shown = argv[2] if argv[:2] == ["/bin/sh", "-c"] and len(argv) > 2 else argv[0]
    if returncode < 0:
        record(exit_code=code, error=f"{shown} was {describe_exit(returncode)}")
    else:
        record(exit_code=code, error=f"{shown} exited with code {code}" if code else None)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    if returncode < 0:
        for signum in signums:
            signal.signal(signum, signal.SIG_DFL)
        with contextlib.suppress(ValueError, OSError):
            signal.signal(-returncode, signal.SIG_DFL)
        os.kill(os.getpid(), -returncode)
    os._exit(code)


def _run_target(argv: list[str]) -> None:
    if argv[0] == "-m":
        if len(argv) < 2:
            raise SystemExit("launchbay bootstrap: -m needs a module name")
        sys.argv[:] = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        script = argv[0]
        sys.argv[:] = argv
        sys.path[0] = os.path.dirname(os.path.realpath(script))
        runpy.run_path(script, run_name="__main__")


def main(argv: list[str] | None = None) -> None:
    """Set up this rank, run the target, record how it ended."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        raise SystemExit(
            "usage: python -m launchbay.runtime._bootstrap [--exec] <script|-m module> args..."
        )
    if os.environ.get("LAUNCHBAY_MPI_LOCAL"):
        _become_mpi_local_rank()
    elif os.environ.get("LAUNCHBAY_TORCH_LOCAL"):
        _become_torch_local_rank()
    elif os.environ.get("LAUNCHBAY_HOST_ENV_FILE"):
        host_env_file = os.environ["LAUNCHBAY_HOST_ENV_FILE"]
        if not os.path.isabs(host_env_file):  # a Ray job: under this host's own tree
            host_env_file = os.path.join(os.environ.get("SAGEMAKER_BASE_DIR", ""), host_env_file)
        try:
            with open(host_env_file, encoding="utf-8") as f:
                _adopt_host(json.load(f))
        except (OSError, ValueError):
            pass  # no file on this host: keep the forwarded environment
    if os.environ.get("LAUNCHBAY_SMDDP") == "1":
        _export_torch_world()
    if standins.enabled():
        if argv[0] == "--exec":
            standins.add_to_pythonpath(os.environ)
        else:
            standins.add_to_sys_path()
    identity = _identity()
    ranks_dir = os.environ.get("LAUNCHBAY_RANKS_DIR")
    owner = _owning_rank(ranks_dir)
    if owner is not None:  # started by a rank of this job: its child, not a rank
        identity.update(rank=owner, child=True)
    elif ranks_dir:
        os.environ[_OWNER] = json.dumps(
            {"ranks_dir": ranks_dir, "rank": identity["rank"], "pid": identity["pid"]}
        )
    io_dir = os.environ.get("LAUNCHBAY_IO_DIR")
    if io_dir and owner is None:  # a child writes where its rank's output goes already
        _redirect_output(io_dir, identity["rank"])
    for stream in (sys.stdout, sys.stderr):
        # One write per line: prompt, and never split mid-line (mpirun tags each write).
        reconfigure = getattr(stream, "reconfigure", None)  # io.TextIOWrapper's, not TextIO's
        with contextlib.suppress(AttributeError, ValueError):
            if reconfigure is not None:
                reconfigure(line_buffering=True, write_through=False)
    rank = identity["rank"]

    def record(**fields: Any) -> None:
        if not ranks_dir or (owner is not None and not fields.get("exit_code")):
            return
        path = (
            _records.end_path(ranks_dir, rank)
            if owner is None
            else _records.child_path(ranks_dir, rank, identity["pid"])
        )
        with contextlib.suppress(OSError):
            _records.write_record(path, {**identity, "timestamp": time.time(), **fields})

    if ranks_dir and owner is None:
        try:
            _records.write_record(
                _records.start_path(ranks_dir, rank), {**identity, "timestamp": time.time()}
            )
        except OSError:
            pass

    if argv[0] == "--exec":
        _run_program(argv[1:], record)
    sys.excepthook = _excepthook
    global _leave_code
    atexit.register(_leave_after_atexit)
    try:
        _run_target(argv)
    except SystemExit as exc:
        code = _exit_code(exc)
        record(exit_code=code, error=None if code == 0 else f"SystemExit: {exc.code}")
        if code == 0:
            _leave_code = 0
        raise
    except BaseException as exc:
        code = 130 if isinstance(exc, KeyboardInterrupt) else 1
        message = str(exc).strip()
        record(
            exit_code=code,
            error=f"{type(exc).__name__}: {message}" if message else type(exc).__name__,
            traceback=_user_traceback(exc),
        )
        raise
    record(exit_code=0, error=None)
    _leave_code = 0
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()


if __name__ == "__main__":
    main()
