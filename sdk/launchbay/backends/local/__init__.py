"""The local wing: what runs a training job on this machine (``local_process``, ``local``, ``local_gpu``).

One control loop, host runners behind one declared protocol (the Ray runner, which
the same loop drives, is :mod:`launchbay.backends.ray`'s); each module has one job::

    control.py          LocalBackend: run/check/describe/wait/stop/list; supervise, monitor, stop
    hosts.py            HostRunner: the per-host operations the control loop drives
    process_hosts.py    ProcessHosts: each host a process group    (ProcessBackend)
    container_hosts.py  ContainerHosts: each host a Docker container (DockerBackend)
    container_cleanup.py  a Docker job's network removed; what dead clients left, swept
    record.py           LocalJob (the job's state), status.json, the name lock
    finish.py           failure triage across hosts; how a job ends (outputs, final record)
    signals.py          Ctrl-C, SIGTERM and interpreter exit; the watchdog's start
    watchdog.py         finishes a job whose client died (python -m ...)
    detached.py         jobs run by another process (submit --no-wait)
    logs.py             each host's log file: written, followed, its last lines
    layout.py           the job directory: where each file lives
    staging.py          input channels (file://, s3:// through the S3 cache)
    outputs.py          checkpoints, model and output archives, published
    attempts.py         a job's attempts: spot interruptions (rehearsed), retries, max_wait
    rehearsal.py        the LAUNCHBAY_REHEARSE_INTERRUPTIONS setting: what happens to each attempt
    checkpoint_watch.py whether a restarted script read its restored checkpoints (inotify)

The backends themselves are :class:`launchbay.backends.process.ProcessBackend`
and :class:`launchbay.backends.docker.DockerBackend`. Nothing is imported here.
What one job may take of this machine (ranks, GPU shares) is not the wing's: it is
:mod:`launchbay._capacity`, a foundation the plan and tuning read (the plan imports
no backend).
"""
