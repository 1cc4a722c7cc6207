"""The names shared by the client and the runtime, each spelled once.

Job statuses, instance types and the ``sagemaker_*`` hyperparameter keys are
part of the SageMaker contract: the request builder writes them, the backends
report them, the CLI prints them, and the runtime reads them inside each host.
The longest log line is shared the same way: the runtime writes log lines, the
local backends read them.
Every module takes them from here. This module lives in the runtime package
because the runtime is the lowest layer (standard library only) and the client
may import from it, never the other way round.
"""

from __future__ import annotations

__all__ = [
    "COMPLETED",
    "DOCKER_INSTANCE_TYPES",
    "ENV",
    "SETTING",
    "FAILED",
    "FAILED_STATUSES",
    "HP",
    "IN_PROGRESS",
    "JOB_STATUSES",
    "LOCAL",
    "LOCAL_GPU",
    "LOCAL_INSTANCE_TYPES",
    "THIS_MACHINE_INSTANCE_TYPES",
    "LOCAL_PROCESS",
    "MAX_LOG_LINE",
    "RAY",
    "STOPPED",
    "STOPPING",
    "TERMINAL_STATUSES",
]

# ---------------------------------------------------------------- job statuses
# DescribeTrainingJob's TrainingJobStatus; local jobs report the same values.
IN_PROGRESS = "InProgress"
COMPLETED = "Completed"
FAILED = "Failed"
STOPPING = "Stopping"
STOPPED = "Stopped"
JOB_STATUSES = (IN_PROGRESS, COMPLETED, FAILED, STOPPING, STOPPED)
TERMINAL_STATUSES = (COMPLETED, FAILED, STOPPED)
FAILED_STATUSES = (FAILED, STOPPED)

# -------------------------------------------------------------- instance types
# The instance types that run on this machine (every other one is an ml.* type).
LOCAL_PROCESS = "local_process"  # each host a process group
LOCAL = "local"  # each host a Docker container
LOCAL_GPU = "local_gpu"  # each host a Docker container with GPUs
RAY = "ray"  # each host a Ray actor on its own node of a Ray cluster (docs/ray.md)
# The types launchbay runs itself, without SageMaker ("client-driven": the control loop
# runs in this process): on this machine, or on a Ray cluster through the same local control
# loop (file:// URIs, no IAM role needed).
LOCAL_INSTANCE_TYPES = (LOCAL, LOCAL_GPU, LOCAL_PROCESS, RAY)
# The types whose hosts run on this machine: its capacity (ranks, GPUs) limits them. A Ray
# job's hosts are the cluster's nodes: the Ray backend checks the cluster instead.
THIS_MACHINE_INSTANCE_TYPES = (LOCAL, LOCAL_GPU, LOCAL_PROCESS)
DOCKER_INSTANCE_TYPES = (LOCAL, LOCAL_GPU)

# -------------------------------------------------------------- log lines
#: The longest piece of a log line, in bytes. A host's runtime cuts a longer line
#: (also one that never ends) into pieces of this size, and the local backends'
#: log followers hold no more than this of a line not yet ended, so a script
#: that prints a 300 MB line costs the client no more memory than a short one.
MAX_LOG_LINE = 64 * 1024

#: local_process: the CPUs one host of a multi-host job runs on ("0,1"), its share of this
#: machine (launchbay/_capacity.py); the host's runtime and every rank of the host take it.
HOST_CPUS_ENV = "LAUNCHBAY_HOST_CPUS"


# ------------------------------------------------- backend -> runtime variables
class ENV:
    """The ``LAUNCHBAY_*`` variables a local backend sets for each host's runtime.

    :class:`launchbay.runtime.settings.RuntimeSettings` is both their one reader
    (``from_environ``) and their one writer (``to_environ``), side by side, so
    the backends never spell a name or a format of their own.
    """

    LOCAL_PROCESS = "LAUNCHBAY_LOCAL_PROCESS"  # "1": the host is a process group here
    SHARED_DIR = "LAUNCHBAY_SHARED_DIR"  # a directory every host of the job shares
    HOST_ADDRESSES = "LAUNCHBAY_HOST_ADDRESSES"  # JSON: host name -> address
    HOSTS_FILE = "LAUNCHBAY_HOSTS_FILE"  # a hosts file naming algo-N
    MASTER_PORT = "LAUNCHBAY_MASTER_PORT"  # the first of the job's loopback ports
    GRACE_SECONDS = "LAUNCHBAY_GRACE_SECONDS"  # SIGTERM -> SIGKILL, seconds
    STANDINS = "LAUNCHBAY_STANDINS"  # "1": local stand-ins of SageMaker-only libraries
    INSTALL_REQUIREMENTS = "LAUNCHBAY_INSTALL_REQUIREMENTS"  # install requirements.txt
    STARTUP_TIMEOUT = "LAUNCHBAY_STARTUP_TIMEOUT"  # seconds for the hosts to come up
    RAY = "LAUNCHBAY_RAY"  # "1": the host is a Ray actor on a node of a cluster (docs/ray.md)
    # A job network's switch pid (every host of the job), and a host's runtime pid in its own
    # namespaces (its ranks). A host gets them only from its own job: the local backends drop
    # values inherited from another job (launchbay run inside a host) or given in environment=.
    JOB_NETWORK = "LAUNCHBAY_JOB_NETWORK"
    HOST_NS_PID = "LAUNCHBAY_HOST_NS_PID"
    #: The variables that place a process in one job's namespaces.
    JOB_ONLY = (JOB_NETWORK, HOST_NS_PID)


class SETTING:
    """The ``LAUNCHBAY_*`` variables a user sets (docs/local.md), in the caller's environment or
    the job's ``environment=``; the local backend and the runtime both read them."""

    HOST_NETWORK = "LAUNCHBAY_HOST_NETWORK"  # own | shared (the runtime records what it got)
    HOST_NAMES = "LAUNCHBAY_HOST_NAMES"  # how algo-N resolves: auto, namespace, nss_wrapper ...
    # What fit(wait=False) does with a job on this machine (local_process, local, local_gpu):
    # detached (default: its own runner process, it outlives the caller) | attached (it runs
    # in the caller and stops when the caller exits). Read by the estimator only.
    LOCAL_NO_WAIT = "LAUNCHBAY_LOCAL_NO_WAIT"
    # What SageMaker will do to a local job, rehearsed (docs/local.md): spot interruptions and
    # host losses, one per attempt, e.g. "60s,host-loss:30s" (launchbay.backends.local.rehearsal).
    REHEARSE_INTERRUPTIONS = "LAUNCHBAY_REHEARSE_INTERRUPTIONS"


# ------------------------------------------------------ hyperparameter keys
class HP:
    """The ``sagemaker_*`` hyperparameter keys (values are JSON-encoded strings)."""

    PREFIX = "sagemaker_"
    # script mode
    PROGRAM = "sagemaker_program"
    SUBMIT_DIRECTORY = "sagemaker_submit_directory"
    CONTAINER_LOG_LEVEL = "sagemaker_container_log_level"
    JOB_NAME = "sagemaker_job_name"
    REGION = "sagemaker_region"
    ENABLE_CLOUDWATCH_METRICS = "sagemaker_enable_cloudwatch_metrics"
    S3_OUTPUT = "sagemaker_s3_output"
    # distribution
    INSTANCE_TYPE = "sagemaker_instance_type"
    DISTRIBUTION_INSTANCE_GROUPS = "sagemaker_distribution_instance_groups"
    MPI_ENABLED = "sagemaker_mpi_enabled"
    MPI_PROCESSES_PER_HOST = "sagemaker_mpi_num_of_processes_per_host"
    MPI_CUSTOM_OPTIONS = "sagemaker_mpi_custom_mpi_options"
    MPI_NUM_PROCESSES = "sagemaker_mpi_num_processes"
    SMDDP_ENABLED = "sagemaker_distributed_dataparallel_enabled"
    SMDDP_CUSTOM_MPI_OPTIONS = "sagemaker_distributed_dataparallel_custom_mpi_options"
    PYTORCH_DDP_ENABLED = "sagemaker_pytorch_ddp_enabled"
    PYTORCH_XLA_ENABLED = "sagemaker_pytorch_xla_multi_worker_enabled"
    TORCH_DISTRIBUTED_ENABLED = "sagemaker_torch_distributed_enabled"
    PARAMETER_SERVER_ENABLED = "sagemaker_parameter_server_enabled"
    MWMS_ENABLED = "sagemaker_multi_worker_mirrored_strategy_enabled"
