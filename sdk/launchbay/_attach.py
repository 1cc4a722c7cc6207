"""Rebuild an estimator from a training job's description (``Estimator.attach``).

:func:`init_params_from_description` turns a DescribeTrainingJob response back
into the estimator arguments that produce the same CreateTrainingJob request:
``create_training_job_request(job_name=<same name>)`` of the rebuilt estimator
equals the job's request in every field the description holds (tags are not
part of a description). It is the inverse of :mod:`launchbay._request`:

* resources, stopping condition, output, VPC, spot, checkpoints, network
  isolation, encryption, environment, retries, debugger/profiler settings,
  metric definitions and container entry point come from their request fields;
* hyperparameters are JSON-decoded (raw strings for the generic ``Estimator``
  without script mode, as it sends ``str()`` values); ``sagemaker_*`` keys are
  removed, ``entry_point``/``source_dir``/``container_log_level`` come from
  ``sagemaker_program``/``sagemaker_submit_directory``/``sagemaker_container_log_level``
  (``source_dir`` is the S3 ``sourcedir.tar.gz``; with network isolation, the
  ``code`` channel's URI), and ``distribution`` from the distribution keys;
* for PyTorch/TensorFlow, ``framework_version``/``py_version`` are read from the
  Deep Learning Container tag (``2.3-gpu-py311``). ``image_uri`` is kept only when
  the image is not the one those versions resolve to (a custom image);
* the ``model_channel_name`` channel carrying ``application/x-sagemaker-model``
  becomes ``model_uri``; TensorFlow's ``model_dir`` hyperparameter is kept only
  when it differs from the default for that job.

Known limit: a generic ``Estimator`` job made with ``entry_point`` but without
``source_dir`` sent ``str()`` hyperparameters; rebuilt, its ``source_dir`` is the
code tarball, so string values come back JSON-quoted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from launchbay import arguments, image_uris
from launchbay._request import NETWORK_ISOLATION_CODE_PATH
from launchbay.distribution import distribution_from_hyperparameters  # re-exported
from launchbay.errors import ConfigurationError, LaunchbayError
from launchbay.job import TrainingJob
from launchbay.runtime.names import HP
from launchbay.session import Session

__all__ = ["attach", "init_params_from_description", "distribution_from_hyperparameters"]

MODEL_CONTENT_TYPE = "application/x-sagemaker-model"
_TAG_RE = re.compile(r"^(?P<version>\d+(?:\.\d+)*)-(?P<processor>[a-z]+)-(?P<py>py\d+)(?:-.*)?$")
_STAMP_RE = re.compile(r"^(?P<base>.+)-\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-\d{3}$")
_FRAMEWORK_REPOSITORIES = {
    "huggingface": ("huggingface-pytorch", "huggingface-tensorflow"),
    "pytorch": ("pytorch", "smdistributed-modelparallel"),
    "tensorflow": ("tensorflow",),
    "sklearn": ("scikit-learn",),
    "xgboost": ("xgboost",),
    "mxnet": ("mxnet",),
}
_CLASS_NAMES = {
    "huggingface": "huggingface.HuggingFace",
    "pytorch": "pytorch.PyTorch",
    "tensorflow": "tensorflow.TensorFlow",
    "sklearn": "sklearn.SKLearn",
    "xgboost": "xgboost.XGBoost",
    "mxnet": "mxnet.MXNet",
}
#: HuggingFace tags: ``<base version>-transformers<version>-<processor>-<py>[-...]``.
_HF_TAG_RE = re.compile(
    r"^(?P<base>\d+(?:\.\d+)*)-transformers(?P<version>\d+(?:\.\d+)*)-[a-z]+-(?P<py>py\d+)(?:-.*)?$"
)
#: scikit-learn and XGBoost tags: ``1.2-1-cpu-py3``, ``1.7-1``.
_BUILD_TAG_RE = re.compile(r"^(?P<version>\d+(?:\.\d+)*(?:-\d+)?)(?:-[a-z]+-(?P<py>py\d+))?$")


def attach(
    cls: type,
    training_job_name: str,
    sagemaker_session: Any = None,
    model_channel_name: str = "model",
) -> Any:
    """``cls.attach(...)``: describe the job, rebuild the estimator, point it at the job.

    A local job of that name on this machine (one ``fit(wait=False)`` left running
    detached, or ``launchbay submit``'s) is attached without asking AWS; any other
    name is SageMaker's.
    """
    # The backends (botocore's waiters and log tailing) are loaded only to attach.
    from launchbay.backends import registry
    from launchbay.backends.base import InProcessBackend

    if sagemaker_session is None:
        sagemaker_session = Session()
    backend = registry.backend_for_job(training_job_name, sagemaker_session)
    description = backend.describe(training_job_name)
    region: str | None
    if isinstance(backend, InProcessBackend):  # a local job needs no AWS region
        try:
            region = sagemaker_session.boto_region_name
        except LaunchbayError:
            region = None
    else:
        region = sagemaker_session.boto_region_name
    params = init_params_from_description(cls, description, model_channel_name, region=region)
    estimator = cls(sagemaker_session=sagemaker_session, **params)
    estimator.latest_training_job = TrainingJob(training_job_name, backend)
    estimator._current_job_name = training_job_name
    return estimator


def _decode(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _repository(image: str) -> str:
    match = re.match(r"^(?:.+/)?([^:/]+)(?::[^:/]+)?$", image)
    return match.group(1) if match else image


def _framework_of_image(image: str) -> str | None:
    repository = _repository(image)
    for framework, names in _FRAMEWORK_REPOSITORIES.items():
        if any(name in repository for name in names):
            return framework
    return None


def _versions_from_image(image: str) -> tuple[str, str] | None:
    """``(framework_version, py_version)`` from a Deep Learning Container tag."""
    tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
    match = _TAG_RE.match(tag)
    return (match.group("version"), match.group("py")) if match else None


def _version_params(framework: str, image: str) -> dict[str, Any] | None:
    """The version arguments an official image's tag gives back (None: not such a tag)."""
    tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
    if framework == "huggingface":
        match = _HF_TAG_RE.match(tag)
        if not match:
            return None
        base = "tensorflow" if "huggingface-tensorflow" in image else "pytorch"
        return {
            "transformers_version": match.group("version"),
            f"{base}_version": match.group("base"),
            "py_version": match.group("py"),
        }
    if framework in ("sklearn", "xgboost"):
        match = _BUILD_TAG_RE.match(tag)
        if not match:
            return None
        return {
            "framework_version": match.group("version"),
            "py_version": match.group("py") or "py3",
        }
    versions = _versions_from_image(image)
    return {"framework_version": versions[0], "py_version": versions[1]} if versions else None


def _rebuilt_image(
    framework: str,
    params: Mapping[str, Any],
    instance_type: str,
    region: str,
    distribution: Mapping[str, Any] | None,
) -> str:
    """The official image the estimator picks for these versions (to tell a custom image)."""
    if framework in ("pytorch", "tensorflow"):
        return image_uris.training_image_uri(
            framework,
            params["framework_version"],
            params["py_version"],
            instance_type,
            region,
            distribution,
        )
    if framework in ("sklearn", "xgboost"):
        return image_uris.retrieve(
            framework,
            region,
            version=params["framework_version"],
            py_version=params["py_version"],
            instance_type=instance_type,
            image_scope="training",
        )
    return image_uris.get_training_image_uri(
        region,
        framework,
        params.get("transformers_version", params.get("framework_version")),
        params["py_version"],
        distribution=distribution,
        tensorflow_version=params.get("tensorflow_version"),
        pytorch_version=params.get("pytorch_version"),
        instance_type=instance_type,
    )


def _image_params(
    framework: str | None,
    image: str,
    name: str,
    instance_type: str | None,
    region: str | None,
    distribution: Mapping[str, Any] | None,
) -> dict[str, Any]:
    if framework is None:
        return {"image_uri": image}
    found = _framework_of_image(image)
    if found is not None and found != framework:
        raise ConfigurationError(
            f"Training job {name!r} ran the {found} image {image!r}, not a {framework} image: "
            f"attach it with launchbay.{_CLASS_NAMES[found]}.attach (or "
            "launchbay.Estimator.attach).",
            argument="training_job_name",
            value=name,
        )
    params = _version_params(framework, image) if found == framework else None
    if params is None:
        return {"image_uri": image}
    rebuilt = None
    if instance_type and region:
        try:
            rebuilt = _rebuilt_image(framework, params, instance_type, region, distribution)
        except LaunchbayError:
            rebuilt = None
    if rebuilt != image:
        params["image_uri"] = image
    return params


def init_params_from_description(
    cls: type,
    description: Mapping[str, Any],
    model_channel_name: str = "model",
    *,
    region: str | None = None,
) -> dict[str, Any]:
    """The ``cls(...)`` keyword arguments that rebuild the job's request (module docstring).

    Every argument that fills a request field is read back from it as its
    declaration says (:func:`launchbay.arguments.from_description`); what follows
    is what the estimator resolves itself: names, code, hyperparameters, the
    distribution, the image, the model channel.
    """
    framework = getattr(cls, "_framework_name", None)
    name = str(description["TrainingJobName"])
    params = arguments.from_description(cls, description)
    resources = description.get("ResourceConfig") or {}
    groups = resources.get("InstanceGroups")
    first_type = groups[0]["InstanceType"] if groups else resources.get("InstanceType")
    vpc = description.get("VpcConfig") or {}
    if vpc.get("Subnets") or vpc.get("SecurityGroupIds"):
        params["subnets"] = list(vpc.get("Subnets") or [])
        params["security_group_ids"] = list(vpc.get("SecurityGroupIds") or [])
    if not (description.get("CheckpointConfig") or {}).get("S3Uri"):
        params.pop("checkpoint_local_path", None)
    isolated = bool(description.get("EnableNetworkIsolation"))
    algorithm = description.get("AlgorithmSpecification") or {}
    stamped = _STAMP_RE.match(name)
    if stamped:
        params["base_job_name"] = stamped.group("base")

    code_channel = None
    for channel in description.get("InputDataConfig") or []:
        source = (channel.get("DataSource") or {}).get("S3DataSource") or {}
        if (
            channel.get("ChannelName") == model_channel_name
            and channel.get("ContentType") == MODEL_CONTENT_TYPE
            and source.get("S3Uri")
        ):
            params["model_uri"] = source["S3Uri"]
            params["model_channel_name"] = model_channel_name
        elif isolated and channel.get("ChannelName") == "code" and source.get("S3Uri"):
            code_channel = source["S3Uri"]

    raw = dict(description.get("HyperParameters") or {})
    script_mode = HP.PROGRAM in raw
    decoded = {k: _decode(v) for k, v in raw.items()}
    keep_raw = framework is None and HP.SUBMIT_DIRECTORY not in raw
    hyperparameters = {
        k: (raw[k] if keep_raw else decoded[k])
        for k in raw
        if not k.startswith(HP.PREFIX) and k != "mp_parameters"
    }
    if script_mode:
        params["entry_point"] = decoded[HP.PROGRAM]
        submit = decoded.get(HP.SUBMIT_DIRECTORY)
        if submit == NETWORK_ISOLATION_CODE_PATH and code_channel:
            submit = code_channel
        if submit:
            params["source_dir"] = submit
        if isinstance(decoded.get(HP.CONTAINER_LOG_LEVEL), int):
            params["container_log_level"] = decoded[HP.CONTAINER_LOG_LEVEL]
    distribution = distribution_from_hyperparameters(decoded)
    if distribution:
        params["distribution"] = distribution

    image = str(algorithm.get("TrainingImage", ""))
    params.update(_image_params(framework, image, name, first_type, region, distribution))

    if framework == "tensorflow":
        model_dir = hyperparameters.pop("model_dir", None)
        if model_dir is None:
            params["model_dir"] = False
        else:
            mpi = bool((distribution or {}).get("mpi", {}).get("enabled"))
            out = str(params.get("output_path") or "")
            default = "/opt/ml/model" if mpi else f"{out.rstrip('/')}/{name}/model"
            if model_dir != default:
                params["model_dir"] = model_dir
    if hyperparameters:
        params["hyperparameters"] = hyperparameters
    return params
