"""The ``train`` entry point: what SageMaker, Docker and local processes run on each host.

``train`` / ``launchbay-train`` / ``python -m launchbay.runtime.train``:

1. read the contract under ``$SAGEMAKER_BASE_DIR`` (default ``/opt/ml``) and
   build the SM_* environment exactly as the sagemaker-training toolkit does;
2. fetch ``sagemaker_submit_directory`` into ``<base>/code`` and resolve
   ``sagemaker_program``; handle requirements.txt;
3. pick the launcher from the ``sagemaker_*`` hyperparameters and run it under
   the supervisor (output labelled ``[rank N] ``, failures triaged, signals
   forwarded);
4. exit 0 after writing ``<base>/output/success``, or non-zero after writing
   ``<base>/output/failure`` and ``<base>/output/launchbay-failure.json``.

Environment variables (beyond the SageMaker contract):

``SAGEMAKER_BASE_DIR``
    Base directory of the contract (as the toolkit). Container paths in configs
    (``/opt/ml/...``) are rewritten under it.
``LAUNCHBAY_LOCAL_PROCESS=1``
    Every host is a process group on this one machine: MPI runs without SSH
    (one mpirun on the first host), torchrun/TF use loopback addresses and
    distinct ports, requirements.txt is not installed unless asked.
``LAUNCHBAY_HOST_ADDRESSES``
    JSON object host -> address, used wherever a host must be reached
    (torchrun ``--master_addr``, MASTER_ADDR, TF_CONFIG, ``mpirun --host``).
``LAUNCHBAY_HOSTS_FILE``, ``LAUNCHBAY_HOST_NAMES``
    local_process: the job hosts file (``127.0.0.1 algo-N``) and how to make
    the C library use it for everything this host starts (:mod:`._hostnames`).
``LAUNCHBAY_HOST_CPUS``
    local_process, 2+ hosts: the CPUs this host runs on (``0,1``), its share of the
    machine; the runtime and every rank of the host keep to them (:mod:`._cpus`).
``LAUNCHBAY_MASTER_PORT``
    Rendezvous port (torchrun, MASTER_PORT; base of the TF ports in local mode).
    Default: the toolkit's 7777 (TF: 2222/2223, 8890).
``LAUNCHBAY_SHARED_DIR``
    A directory every host of a local job can read and write (unset on
    SageMaker): per-rank records, failure marks, stop requests, local MPI
    coordination (see :mod:`._shared`).
``LAUNCHBAY_INSTALL_REQUIREMENTS``
    ``1``: install requirements.txt also in local_process mode; ``0``: do not
    install it in containers either. Default: install in containers (as the
    toolkit), report unmet requirements in local_process mode.
``LAUNCHBAY_GRACE_SECONDS``
    Seconds between forwarding SIGTERM to the ranks and SIGKILL (default 10).
``LAUNCHBAY_STARTUP_TIMEOUT``
    Seconds to wait for the other hosts of an MPI job to come up (default 900).
``LAUNCHBAY_STANDINS=1``
    Set by the local backends only (never on SageMaker): the ranks may import
    launchbay's local stand-ins of SageMaker-only libraries where the real ones
    are absent (``smdistributed.dataparallel``, :mod:`.standins`), and
    smdistributed dataparallel without ``smddprun`` launches them with mpirun.

Set for the ranks: every SM_* variable (plus ``SM_CHECKPOINT_DIR`` when a
checkpoint config exists), ``CURRENT_HOST``, ``SAGEMAKER_JOB_NAME``,
``SAGEMAKER_REGION`` (as the toolkit), ``MASTER_ADDR``/``MASTER_PORT`` (as the
PyTorch toolkit), ``PYTHONPATH`` (code dir first), ``PYTHONUNBUFFERED=1``,
``SMDEBUG_CONFIG_FILE_PATH`` when ``debughookconfig.json`` exists (unless
already set), and the runtime's private ``LAUNCHBAY_RANKS_DIR`` etc.

Exit status: 0 on success; on failure the root cause's exit code (non-zero),
or ``128 + signal`` when the runtime was stopped by SIGTERM/SIGINT.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import stat
import sys
import time

from launchbay.runtime import _cpus, contract
from launchbay.runtime._shared import SharedDir
from launchbay.runtime._supervisor import Supervisor, make_io_dir
from launchbay.runtime.code import fetch_code, prepare_requirements, resolve_entry_point
from launchbay.runtime.errors import TrainingSetupError
from launchbay.runtime.launchers import LaunchContext, build_plan
from launchbay.runtime.launchers.torchrun import MASTER_PORT
from launchbay.runtime.names import ENV, HP, SETTING
from launchbay.runtime.settings import RuntimeSettings

__all__ = ["main", "rank_environment", "run"]

logger = logging.getLogger("launchbay.runtime")

_PRIVATE = (
    "LAUNCHBAY_RANK",
    "LAUNCHBAY_LOCAL_RANK",
    "LAUNCHBAY_IO_DIR",
    "LAUNCHBAY_MPI_LOCAL",
    "LAUNCHBAY_TORCH_LOCAL",
    "LAUNCHBAY_HOST_ENV_FILE",
    "LAUNCHBAY_SMDDP",
)


def rank_environment(
    env: contract.TrainingEnv, settings: RuntimeSettings, ranks_dir: str
) -> dict[str, str]:
    """The environment every rank of this host starts from."""
    p = env.paths
    result = {k: v for k, v in os.environ.items() if k not in _PRIVATE}
    result.update(contract.env_vars(env))
    hps = env.sagemaker_hyperparameters
    region = (
        hps.get(HP.REGION)
        or os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION", "")
    )
    result.update(
        {
            "CURRENT_HOST": env.current_host,
            "SAGEMAKER_JOB_NAME": str(hps.get(HP.JOB_NAME, "")),
            "SAGEMAKER_REGION": str(region or ""),
            "PYTHONUNBUFFERED": "1",
            "LAUNCHBAY_RANKS_DIR": ranks_dir,
        }
    )
    existing = os.environ.get("PYTHONPATH")
    result["PYTHONPATH"] = p.code_dir + (os.pathsep + existing if existing else "")
    result.setdefault("MASTER_ADDR", settings.address(env.master_hostname))
    result.setdefault("MASTER_PORT", str(settings.master_port or MASTER_PORT))
    if env.debug_hook_config is not None:
        result.setdefault("SMDEBUG_CONFIG_FILE_PATH", p.debug_hook_config_file)
    return result


def _normalise_debug_hook_config(p: contract.ContractPaths) -> None:
    """Make the hook config's ``LocalPath`` point under the base dir (smdebug reads the file)."""
    config = contract.read_debug_hook_config(p)
    if config is None:
        return
    with open(p.debug_hook_config_file, encoding="utf-8") as f:
        raw = json.load(f)
    if raw.get("LocalPath") != config["LocalPath"]:
        with open(p.debug_hook_config_file, "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2)


def _clear_previous_outputs(p: contract.ContractPaths) -> None:
    for path in (p.failure_file, p.failure_json_file, p.success_file):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def _user_failure_message(p: contract.ContractPaths, started: float) -> str | None:
    """A failure message the script wrote itself during this run (kept in the report)."""
    try:
        if os.stat(p.failure_file).st_mtime < started - 1:
            return None
        with open(p.failure_file, encoding="utf-8", errors="replace") as f:
            return f.read(2000)
    except OSError:
        return None


def _fail_setup(
    p: contract.ContractPaths, host: str, message: str, shared: SharedDir | None = None
) -> int:
    logger.error("%s", message)
    from launchbay.runtime import _triage  # noqa: PLC0415 - a failing host's only

    failure = _triage.setup_failure(host, message, time.time())
    if shared is not None:  # the other hosts learn at once that this one cannot start
        try:
            shared.mark_host("failed", 1, failure.timestamp, error=message)
        except OSError as exc:
            logger.error("Could not tell the other hosts through %s: %s", shared.root, exc)
    document = {**failure.__dict__, "reporting_host": host, "ranks": []}
    try:
        os.makedirs(p.output_dir, exist_ok=True)
        with open(p.failure_file, "w", encoding="utf-8") as f:
            f.write(_triage.failure_report(failure, []))
        with open(p.failure_json_file, "w", encoding="utf-8") as f:
            json.dump(document, f)
    except OSError as exc:
        logger.error("Could not write the failure files under %s: %s", p.output_dir, exc)
    return 1


def _resolve_host_names(env: contract.TrainingEnv, tree: str) -> None:
    """local_process: make ``algo-N`` resolve for everything this host starts, and give the
    host its own ``/opt/ml`` (``tree``), in a mount namespace of its own (:mod:`._hostnames`)."""
    if os.environ.get(ENV.JOB_NETWORK):  # local_process, each host on its own network
        _join_job_network(env, tree)
        return
    if not os.environ.get(ENV.HOSTS_FILE) and not os.environ.get(SETTING.HOST_NAMES):
        return  # a container's or SageMaker's hosts: their network resolves the names
    # Imported here: a container's runtime needs neither (every host's start pays imports).
    from launchbay.runtime import _hostnames  # noqa: PLC0415

    if os.environ.get(ENV.HOSTS_FILE):  # local_process: the hosts share this machine's network
        os.environ[SETTING.HOST_NETWORK] = "shared"
    result = _hostnames.apply(opt_ml=tree)
    if result is None:
        return
    names = ", ".join(env.hosts)
    if result.opt_ml:
        os.environ[_hostnames.OPT_ML_ENV] = tree  # ranks of this host started elsewhere rebind it
    else:
        logger.warning(
            "This host has no /opt/ml of its own (%s): a script that writes to a literal "
            "/opt/ml path writes to this machine's /opt/ml, shared by every host and left "
            "out of model.tar.gz and output.tar.gz. Use the SM_* paths, or Docker mode "
            "(docs/local.md).",
            result.opt_ml_problem or "; ".join(result.failures) or "LAUNCHBAY_HOST_NAMES=off",
        )
    if result.mechanism:
        logger.debug("Host names %s resolve to 127.0.0.1 (%s)", names, result.mechanism)
        return
    logger.warning(
        "Host names %s do not resolve in this local_process job (%s). The launchers use "
        "127.0.0.1, but a script that connects to an SM_HOSTS name will fail. Run as root, "
        "allow unprivileged user namespaces, or install libnss-wrapper (docs/local.md).",
        names,
        "; ".join(result.failures),
    )


def _join_job_network(env: contract.TrainingEnv, tree: str) -> None:
    """This host's own network, host name, ``/etc/hosts`` and ``/opt/ml`` (:mod:`._netns`)."""
    from launchbay.runtime import _hostnames, _netns  # noqa: PLC0415 - local_process only

    holder = os.environ[_netns.HOLDER_ENV]
    hosts_file = os.environ.get(ENV.HOSTS_FILE, "")
    try:
        _netns.join(int(holder), env.hosts.index(env.current_host), env.current_host)
        problem = _hostnames.private_mounts(hosts_file, tree)
        for missing in _netns.own_mounts():  # its own /dev/shm and /sys, as a machine's
            logger.warning("This host shares this machine's %s; see docs/local.md.", missing)
    except (OSError, ValueError) as exc:
        raise TrainingSetupError(
            f"{env.current_host} could not join the job's network (switch pid {holder}): {exc}. "
            "Set LAUNCHBAY_HOST_NETWORK=shared to run the hosts on this machine's network "
            "(docs/local.md)."
        ) from exc
    os.environ[SETTING.HOST_NETWORK] = "own"
    shared_dir = os.environ.get(ENV.SHARED_DIR)
    if shared_dir:  # a script's own mpirun reaches the other hosts as through ssh
        _netns.publish(shared_dir, env.current_host)
        os.environ.setdefault("OMPI_MCA_plm_rsh_agent", _netns.rsh_agent())
    if problem:
        logger.warning("This host has no /opt/ml of its own (%s); see docs/local.md.", problem)
    else:
        os.environ[_hostnames.OPT_ML_ENV] = tree


def _setup_logging() -> None:
    if logger.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[launchbay] %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


class _Stopped(Exception):
    """SIGTERM/SIGINT arrived before any rank was started."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum: int, _frame: object) -> None:
    raise _Stopped(signum)


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def run() -> int:
    """Run this host's part of the training job; returns the exit status."""
    previous = {s: signal.signal(s, _raise_stopped) for s in _STOP_SIGNALS}
    try:
        return _run()
    except _Stopped as stopped:
        name = signal.Signals(stopped.signum).name
        p = contract.paths()
        try:
            host = contract.read_resource_config(p)["current_host"]
        except (OSError, ValueError, KeyError):
            host = socket.gethostname()
        _fail_setup(p, host, f"Stopped by {name} during setup.")
        return 128 + stopped.signum
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _run() -> int:
    started = time.time()
    _cpus.take_cpu_share()  # before any thread or process of this host starts
    p = contract.paths()
    _clear_previous_outputs(p)
    try:
        settings = RuntimeSettings.from_environ()
        env = contract.training_env(p.base_dir)
    except (TrainingSetupError, OSError, ValueError, KeyError) as exc:
        return _fail_setup(p, socket.gethostname(), f"Invalid training configuration: {exc}")
    host = env.current_host
    try:
        _resolve_host_names(env, p.base_dir)
    except TrainingSetupError as exc:
        return _fail_setup(p, host, str(exc))
    if isinstance(env.log_level, int):
        logger.setLevel(env.log_level)
    shared = SharedDir(settings.shared_dir, host) if settings.shared_dir else None
    ranks_dir = shared.ranks_dir if shared else p.ranks_dir
    io_dir = make_io_dir()
    try:
        try:
            submit = env.sagemaker_hyperparameters.get(HP.SUBMIT_DIRECTORY)
            fetch_code(p.container_path(str(submit)) if submit else None, p.code_dir)
            entry = resolve_entry_point(p.code_dir, env.user_entry_point)
            if entry.kind == "command" and entry.path and os.path.isfile(entry.path):
                mode = os.stat(entry.path).st_mode
                os.chmod(entry.path, mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
            for warning in prepare_requirements(
                p.code_dir,
                entry,
                local_process=settings.local_process,
                install=settings.install_requirements,
            ):
                logger.warning("%s", warning)
            _normalise_debug_hook_config(p)
            ctx = LaunchContext(
                env=env,
                entry=entry,
                args=env.user_args(),
                base_env=rank_environment(env, settings, ranks_dir),
                settings=settings,
                python=sys.executable,
                io_dir=io_dir,
                ranks_dir=ranks_dir,
            )
            plan = build_plan(ctx)
        except TrainingSetupError as exc:
            return _fail_setup(p, host, str(exc), shared)
        for note in plan.notes:
            logger.warning("%s", note)
        for spec in plan.processes:
            if spec.role == "main":
                logger.info("%s on %s: %s", plan.launcher, host, " ".join(spec.argv))
        supervisor = Supervisor(
            plan,
            host=host,
            ranks_dir=ranks_dir,
            io_dir=io_dir,
            shared=shared,
            grace_seconds=settings.grace_seconds,
        )
        try:
            outcome = supervisor.run()
        except TrainingSetupError as exc:
            return _fail_setup(p, host, str(exc), shared)
        for s in _STOP_SIGNALS:  # the ranks are gone: finish the report undisturbed
            signal.signal(s, signal.SIG_IGN)
        code = outcome.exit_code
        failure = None
        if code != 0:
            from launchbay.runtime import _triage  # noqa: PLC0415 - a failing host's only

            failure = _triage.find_root_cause(
                outcome, plan, host=host, ranks_dir=ranks_dir, shared=shared
            ) or _triage.setup_failure(
                host, f"the job failed with exit code {code}", time.time(), code
            )
            stopped = outcome.signal is not None or outcome.teardown_reason == "stop"
            root_code = failure.exit_code
            if not stopped and isinstance(root_code, int) and 0 < root_code < 256:
                code = root_code  # not the 137/143 of ranks we tore down
        for hook in plan.on_finish:
            try:
                hook(code)
            except Exception as exc:  # a coordination hook must not hide the job's result
                logger.warning("end-of-job step failed: %s", exc)
        if failure is None:
            os.makedirs(p.output_dir, exist_ok=True)
            with open(p.success_file, "w", encoding="utf-8"):
                pass
            return 0
        _triage.write_failure_files(
            p,
            failure,
            outcome,
            host=host,
            ranks_dir=ranks_dir,
            user_message=_user_failure_message(p, started),
        )
        logger.error("Training failed: %s", _triage.failure_report(failure, []).splitlines()[0])
        return code
    finally:
        shutil.rmtree(io_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    """Console entry point (``train``, ``launchbay-train``)."""
    args = sys.argv[1:] if argv is None else argv
    if args:  # --help, or a mistake: argparse (7 ms) is not every host's start's to import
        import argparse  # noqa: PLC0415

        parser = argparse.ArgumentParser(
            prog="train",
            description="Run this host's part of a SageMaker-style training job "
            "(reads $SAGEMAKER_BASE_DIR, default /opt/ml).",
        )
        parser.parse_args(args)
    _setup_logging()
    sys.exit(run())


if __name__ == "__main__":
    main()
