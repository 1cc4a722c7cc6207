"""``image_uris.retrieve``: every image SageMaker SDK v2 knows, with v2's answers and refusals.

The facts are ``launchbay/data/image_uri_config.json``, generated from v2's 67
``image_uri_config`` files by ``tools/gen_uri_config.py`` (registries stored once
each, v2's "latest" version per scope, ECR host names, and the few facts v2 keeps in
code). This module holds the rules, in the order v2 applies them, so that the same
arguments give the same URI or are refused where v2 refuses them
(``tests/compat/test_retrieve_parity.py`` compares the two over every framework,
algorithm, version, region, scope, processor and Python version).

A refusal is a :class:`~launchbay.errors.ImageNotFoundError` (a ``ValueError``, as
v2's) that names the argument, the value and what is accepted. JumpStart
(``model_id``/``model_version``) is out of scope and refused as such.

Loaded on the first call: importing :mod:`launchbay.image_uris` reads nothing.
"""

from __future__ import annotations

import copy
import functools
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from launchbay._instances import instance_family
from launchbay.errors import ImageNotFoundError

__all__ = [
    "config_for_framework",
    "get_base_python_image_uri",
    "get_training_image_uri",
    "retrieve",
    "frameworks",
]

logger = logging.getLogger("launchbay.image_uris")

_HF = "huggingface"
_TRAINIUM_FRAMEWORKS = "pytorch"  # v2 tests ``framework in "pytorch"`` (a substring test)
_GRAVITON_SCOPE = "inference_graviton"
_TRITON = "sagemaker-tritonserver"
_NEURON_SDK_REPOSITORIES = (
    "pytorch-training-neuron",
    "pytorch-training-neuronx",
    "huggingface-vllm-inference-neuronx",
)
_HF_TRCOMP_REPOSITORIES = (
    "huggingface-pytorch-trcomp-training",
    "huggingface-tensorflow-trcomp-training",
)
_HF_NEURON_REPOSITORIES = (
    "huggingface-pytorch-inference-neuron",
    "huggingface-pytorch-inference-neuronx",
)
_INSTANCE_TYPES = "ml.<family>.<size> (e.g. ml.m5.xlarge, ml.g5.2xlarge), local, local_gpu"


@functools.lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    import json  # on the first lookup: importing image_uris stays light
    from importlib import resources

    text = resources.files("launchbay").joinpath("data/image_uri_config.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _expand(value: Any, registries: Mapping[str, Any]) -> Any:
    if isinstance(value, dict):
        return {
            key: dict(registries[item])
            if key == "registries" and isinstance(item, str)
            else _expand(item, registries)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_expand(item, registries) for item in value]
    return value


@functools.cache
def framework_config(framework: str) -> dict[str, Any]:
    data = _data()
    if framework not in data["configs"]:
        raise ImageNotFoundError.invalid(
            "framework", framework, ", ".join(frameworks()), reason="SageMaker has no such image"
        )
    expanded: dict[str, Any] = _expand(data["configs"][framework], data["registries"])
    return expanded


def frameworks() -> list[str]:
    """Every framework, algorithm and tool name ``retrieve`` knows (v2's config names)."""
    return list(_data()["configs"])


def config_for_framework(framework: str) -> dict[str, Any]:
    """The image configuration of ``framework`` as SDK v2's JSON file holds it (a copy)."""
    if not isinstance(framework, str):
        raise ImageNotFoundError.invalid("framework", framework, ", ".join(frameworks()))
    return copy.deepcopy(framework_config(framework))


def _refuse(argument: str, value: object, accepted: Sequence[Any], reason: str = "") -> None:
    """v2's ``_validate_arg``: refuse ``value`` unless it is one of ``accepted``."""
    try:
        known = value in accepted
    except TypeError:  # an unhashable value against a key view
        known = False
    if not known:
        raise ImageNotFoundError.invalid(
            argument, value, ", ".join(str(a) for a in accepted) or "(none)", reason=reason
        )


def _family(instance_type: object) -> str:
    return instance_family(instance_type) if isinstance(instance_type, str) else ""


def _as_text(argument: str, value: object) -> str:
    if not isinstance(value, str):
        raise ImageNotFoundError.invalid(argument, value, "a string")
    return value


def _scope_config(
    framework: str, image_scope: str | None, accelerator_type: str | None
) -> dict[str, Any]:
    """The table of one scope (v2's ``_config_for_framework_and_scope``)."""
    config = framework_config(framework)
    if accelerator_type:
        accelerator = _as_text("accelerator_type", accelerator_type)
        if not accelerator.startswith("ml.eia") and accelerator != "local_sagemaker_notebook":
            raise ImageNotFoundError.invalid(
                "accelerator_type",
                accelerator_type,
                "ml.eia* Elastic Inference types, local_sagemaker_notebook",
            )
        if image_scope not in ("eia", "inference"):
            logger.warning(
                "Elastic inference is for inference only. Ignoring image scope: %s.", image_scope
            )
        image_scope = "eia"
    scopes = list(config.get("scope", list(config.keys())))
    if len(scopes) == 1:
        if image_scope and image_scope != scopes[0]:
            logger.warning(
                "Defaulting to only supported image scope: %s. Ignoring image scope: %s.",
                scopes[0],
                image_scope,
            )
        image_scope = scopes[0]
    if not image_scope and "scope" in config and set(scopes) == {"training", "inference"}:
        image_scope = scopes[0]
    _refuse("image_scope", image_scope, scopes, f"{framework} images exist for these scopes")
    if "scope" in config:
        return config
    table: dict[str, Any] = config[image_scope]  # type: ignore[index]  # checked just above
    return table


def _latest(framework: str, image_scope: str | None) -> str | None:
    """The version v2 picks when none is given (precomputed from v2 per scope)."""
    if framework not in _data()["latest"]:
        raise ImageNotFoundError.invalid("framework", framework, ", ".join(frameworks()))
    by_scope = _data()["latest"][framework]
    key = "" if image_scope is None else image_scope
    value = by_scope.get(key, by_scope[""]) if isinstance(key, str) else by_scope[""]
    if isinstance(value, dict):  # v2 itself fails to pick one
        raise ImageNotFoundError.invalid(
            "version", None, "an explicit version", reason=f"No latest {framework} version"
        )
    return value


def _version(
    version: str | None, config: Mapping[str, Any], framework: str, image_scope: str | None
) -> str:
    available = list(config["versions"].keys())
    aliases = list(config.get("version_aliases", {}).keys())
    if len(available) == 1 and not _contains(aliases, version):
        return available[0]
    if not version:
        version = _latest(framework, image_scope)
    _refuse("version", version, available + aliases, f"{framework} images exist for these")
    return version  # type: ignore[return-value]  # checked just above


def _contains(options: Sequence[Any], value: object) -> bool:
    try:
        return value in options
    except TypeError:
        return False


def _processor(
    instance_type: str | None,
    available: Sequence[str] | None,
    serverless_inference_config: object = None,
) -> str | None:
    if not available:
        return None
    if len(available) == 1 and not instance_type:
        return available[0]
    if serverless_inference_config is not None:
        return "cpu"
    if not instance_type:
        raise ImageNotFoundError.invalid(
            "instance_type",
            instance_type,
            _INSTANCE_TYPES,
            reason="These images differ by processor",
        )
    text = _as_text("instance_type", instance_type)
    if text.startswith("local"):
        processor = "cpu" if text == "local" else "gpu"
    elif text.startswith("neuron"):
        processor = "neuron"
    else:
        family = instance_family(text)
        if not family:
            raise ImageNotFoundError.invalid("instance_type", instance_type, _INSTANCE_TYPES)
        if family in available:
            processor = family
        elif family.startswith("inf"):
            processor = "inf"
        elif family.startswith("trn"):
            processor = "trn"
        elif family[0] in ("g", "p"):
            processor = "gpu"
        else:
            processor = "cpu"
    if processor not in available:
        raise ImageNotFoundError.invalid(
            "instance_type",
            instance_type,
            f"instance types of these processors: {', '.join(available)}",
            reason=f"Its processor is {processor}",
        )
    return processor


def _py_version(py_version: str | None, table: Mapping[str, Any], framework: str) -> str | None:
    if "repository" in table:
        available = table.get("py_versions")
    else:
        available = list(table.keys())
    if not available:
        return None
    if py_version is None and framework == "spark":
        return None
    if py_version is None and len(available) == 1:
        return str(available[0])
    _refuse("py_version", py_version, available, "These images are built for other Pythons")
    return py_version


def _numeric_version(version: str) -> tuple[int, ...]:
    """A release version as PEP 440 compares it (``2.3`` == ``2.3.0``)."""
    if not isinstance(version, str) or not re.fullmatch(r"v?\d+(\.\d+)*", version.strip()):
        raise ImageNotFoundError.invalid("version", version, "a release version such as 2.3.0")
    parts = [int(p) for p in version.strip().lstrip("v").split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def _check_p2(framework: str, instance_type: str | None, version: str) -> None:
    if _family(instance_type) != "p2":
        return
    retired = {"pytorch": (1, 13), "tensorflow": (2, 12)}.get(framework)
    if retired is not None and _numeric_version(version) >= retired:
        raise ImageNotFoundError.invalid(
            "instance_type",
            instance_type,
            "a newer GPU family (ml.g5, ml.p3, ...)",
            reason="P2 instances have been retired for PyTorch 1.13 and TensorFlow 2.12 on",
        )


def _check_hardware(framework: str, instance_type: str | None) -> None:
    data = _data()
    if isinstance(instance_type, str) and "trn" in instance_type:
        if framework not in _TRAINIUM_FRAMEWORKS:
            raise ImageNotFoundError.invalid(
                "framework", framework, "pytorch", reason="Trainium instances run these only"
            )
    family = _family(instance_type)
    if family in data["graviton_families"] and framework not in data["graviton_frameworks"]:
        raise ImageNotFoundError.invalid(
            "framework",
            framework,
            ", ".join(data["graviton_frameworks"]),
            reason="Graviton instances run these only",
        )


def _format_tag(
    prefix: Any, processor: Any, py_version: Any, container: Any, inference_tool: Any
) -> str:
    middle = inference_tool if inference_tool else processor
    return "-".join(str(x) for x in (prefix, middle, py_version, container) if x)


def _tag(
    framework: str,
    scope: str | None,
    version: str,
    prefix: Any,
    processor: str | None,
    py_version: str | None,
    container: Any,
    inference_tool: Any,
    instance_type: str | None,
    distribution: Any,
) -> str:
    data = _data()
    family = _family(instance_type)
    if framework in ("xgboost", "sklearn"):
        if family and scope == _GRAVITON_SCOPE and family not in data["graviton_families"]:
            raise ImageNotFoundError.invalid(
                "instance_type",
                instance_type,
                "Graviton families: " + ", ".join(data["graviton_families"]),
                reason=f"The {framework} {scope} images run on Graviton only",
            )
        if family in data["graviton_families"] or scope == _GRAVITON_SCOPE:
            arm64 = data["arm64_tags"][framework]
            _refuse("version", version, list(arm64), f"{framework} has arm64 images for these")
            tag: str = arm64[version]
            return tag
        return _format_tag(prefix, processor, py_version, container, inference_tool)
    tag = _format_tag(prefix, processor, py_version, container, inference_tool)
    if instance_type is not None and (
        family == "p4d" or (bool(distribution) and "smdistributed" in distribution)
    ):
        suffix = data["auto_container_versions"].get(f"{framework}-{tag}")
        if suffix:
            tag = f"{tag}-{suffix}"
    if framework == _TRITON and processor == "gpu":
        tag = tag.rstrip("-gpu")  # v2 strips these characters, not the suffix
    return tag


def retrieve(
    framework: str,
    region: str,
    version: str | None = None,
    py_version: str | None = None,
    instance_type: str | None = None,
    accelerator_type: str | None = None,
    image_scope: str | None = None,
    container_version: str | None = None,
    distribution: Mapping[str, Any] | None = None,
    base_framework_version: str | None = None,
    training_compiler_config: Any = None,
    model_id: str | None = None,
    model_version: str | None = None,
    hub_arn: str | None = None,
    tolerate_vulnerable_model: bool = False,
    tolerate_deprecated_model: bool = False,
    sdk_version: str | None = None,
    inference_tool: str | None = None,
    serverless_inference_config: Any = None,
    sagemaker_session: Any = None,
    config_name: str | None = None,
    model_type: Any = None,
) -> str:
    """The ECR URI of a SageMaker image, as ``sagemaker.image_uris.retrieve`` gives it.

    Every framework, built-in algorithm and tool image in SDK v2's image
    configuration (``pytorch``, ``tensorflow``, ``huggingface``, ``sklearn``,
    ``xgboost``, ``mxnet``, ``linear-learner``, ``forecasting-deepar``, ``kmeans``,
    ``blazingtext``, ``debugger``, ...: :func:`frameworks` lists them), every
    version, alias, region, scope (``training``, ``inference``, ``eia``,
    ``inference_graviton``), processor and Python version v2 accepts.

    Args:
        framework: the framework or algorithm name.
        region: the AWS region of the registry.
        version: the framework or algorithm version (or alias); where omitted, the
            only one, or the latest as v2 picks it.
        py_version: e.g. ``"py311"``; where omitted, the only one.
        instance_type: chooses the processor (``ml.m5.xlarge`` cpu, ``ml.g5.xlarge``
            gpu, ``ml.inf1.xlarge``, ``ml.trn1.2xlarge``, Graviton families; as in
            v2, ``local`` is cpu and other ``local*`` types are gpu).
        accelerator_type: an Elastic Inference type (``ml.eia*``): the ``eia`` scope.
        image_scope: ``training``, ``inference``, ``eia`` or ``inference_graviton``.
        container_version: a tag build component, for the images that carry one.
        distribution: the estimator's ``distribution`` (CUDA builds for ``smdistributed``).
        base_framework_version: HuggingFace's ``pytorch<version>``/``tensorflow<version>``.
        training_compiler_config: the Training Compiler images (PyTorch, HuggingFace).
        sdk_version: the Neuron SDK version of Trainium/Inferentia images.
        inference_tool: ``neuron`` or ``neuronx``.
        serverless_inference_config: a serverless endpoint config (cpu images).
        model_id, model_version, hub_arn, tolerate_vulnerable_model,
        tolerate_deprecated_model, sagemaker_session, config_name, model_type:
            JumpStart's arguments: accepted for v2's signature; a ``model_id`` or
            ``model_version`` is refused (JumpStart is out of launchbay's scope).

    Returns:
        ``<account>.dkr.<ecr host>/<repository>[:<tag>]``.

    Raises:
        ImageNotFoundError: no such image; the message names the argument, the
            value and what is accepted.
    """
    arguments = {k: v for k, v in locals().items() if v is not None and v is not False}
    try:
        return _retrieve(
            framework, region, version, py_version, instance_type, accelerator_type, image_scope,
            container_version, distribution, base_framework_version, training_compiler_config,
            model_id, model_version, sdk_version, inference_tool, serverless_inference_config,
        )  # fmt: skip
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        # The image table has no entry where these arguments lead (SDK v2 fails there too,
        # with a KeyError or the like): say which arguments found nothing.
        shown = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
        raise ImageNotFoundError(
            f"No SageMaker image matches retrieve({shown}): the image table has no "
            f"{exc} entry there. Accepted: the versions, scopes, processors and Python "
            f"versions launchbay.image_uris.config_for_framework({framework!r}) lists.",
            argument="framework",
            value=framework,
        ) from exc


def _retrieve(
    framework: str,
    region: str,
    version: str | None,
    py_version: str | None,
    instance_type: str | None,
    accelerator_type: str | None,
    image_scope: str | None,
    container_version: str | None,
    distribution: Mapping[str, Any] | None,
    base_framework_version: str | None,
    training_compiler_config: Any,
    model_id: str | None,
    model_version: str | None,
    sdk_version: str | None,
    inference_tool: str | None,
    serverless_inference_config: Any,
) -> str:
    if model_id is not None or model_version is not None:
        raise ImageNotFoundError.invalid(
            "model_id",
            model_id,
            "None: JumpStart models are out of launchbay's scope; call "
            "sagemaker.image_uris.retrieve with the sagemaker SDK installed, or pass image_uri",
            reason="JumpStart image lookup is not supported",
        )
    framework = _as_text("framework", framework)
    original_version = version
    if training_compiler_config and framework in (_HF, "pytorch"):
        scope = image_scope
        config = _scope_config(f"{framework}-training-compiler", scope, accelerator_type)
    else:
        name = framework
        if framework == _HF or framework in _TRAINIUM_FRAMEWORKS:
            if not inference_tool:
                family = _family(instance_type)
                if family.startswith("inf") or family.startswith("trn"):
                    inference_tool = "neuron"
            if inference_tool in ("neuron", "neuronx"):
                name = f"{framework}-{inference_tool}"
        data = _data()
        if framework in data["graviton_frameworks"] and (
            _family(instance_type) in data["graviton_families"]
        ):
            scope = _GRAVITON_SCOPE
        elif image_scope is None and framework in ("xgboost", "sklearn"):
            scope = "training"
        else:
            scope = image_scope
        _check_hardware(framework, instance_type)
        config = _scope_config(name, scope, accelerator_type)

    version = _version(version, config, framework, image_scope)
    aliases = config.get("version_aliases") or {}
    table: dict[str, Any] = config["versions"][aliases.get(version, version)]

    if framework == _HF:
        base_aliases = table.get("version_aliases")
        if not base_aliases:
            raise ImageNotFoundError.invalid(
                "base_framework_version",
                base_framework_version,
                "none for this version",
                reason=f"HuggingFace {version} has no base framework table",
            )
        base = base_aliases.get(base_framework_version, base_framework_version)
        _refuse("base_framework_version", base, list(table.keys()), f"HuggingFace {version}")
        table = table[base]

    py_version = _py_version(py_version, table, framework)
    table = table.get(py_version) or table if py_version is not None else table
    if "registries" not in table:
        raise ImageNotFoundError.invalid(
            "py_version", py_version, "a Python version with its own images"
        )
    registries = table["registries"]
    _refuse("region", region, list(registries), f"No {framework} {version} image there")
    hostname = _data()["hostnames"].get(region)
    if not hostname:
        raise ImageNotFoundError.invalid("region", region, "a region botocore knows")
    if "repository" not in table:
        raise ImageNotFoundError.invalid("version", version, "a version with one repository")
    repository: str = table["repository"]

    processor = _processor(
        instance_type,
        config.get("processors") or table.get("processors"),
        serverless_inference_config,
    )
    requested_container = container_version
    if table.get("container_version"):
        containers = table["container_version"]
        if processor not in containers:
            raise ImageNotFoundError.invalid(
                "instance_type",
                instance_type,
                f"instance types of these processors: {', '.join(containers)}",
                reason=f"No {framework} {version} image for processor {processor}",
            )
        container_version = containers[processor]
    if repository in _NEURON_SDK_REPOSITORIES:
        sdk_version = sdk_version or sorted(table["sdk_versions"], reverse=True)[0]
        container_version = f"{sdk_version}-{_needed(container_version)}"

    if framework == _HF:
        match = re.match(r"^(pytorch|tensorflow)(.*)$", str(base_framework_version or ""))
        if match is None or base_framework_version is None:
            raise ImageNotFoundError.invalid(
                "base_framework_version",
                base_framework_version,
                "pytorch<version> or tensorflow<version>",
            )
        base_version = match.group(2)
        tag_version = original_version
        if repository in _HF_TRCOMP_REPOSITORIES:
            tag_version = version
        if repository in _HF_NEURON_REPOSITORIES:
            sdk_version = sdk_version or sorted(table["sdk_versions"], reverse=True)[0]
            container_version = f"{sdk_version}-{_needed(container_version)}"
            top_aliases = config.get("version_aliases")
            if top_aliases is None:
                raise ImageNotFoundError.invalid("version", original_version, "an aliased version")
            tag_version = top_aliases.get(original_version) or tag_version
            nested = (
                config.get("versions", {})
                .get(tag_version, {})
                .get("version_aliases", {})
                .get(base_framework_version, {})
            )
            if nested:
                nested_match = re.match(r"^(pytorch|tensorflow)(.*)$", str(nested))
                if nested_match is None:
                    raise ImageNotFoundError.invalid(
                        "base_framework_version", base_framework_version, "a listed version"
                    )
                base_version = nested_match.group(2)
        prefix: Any = f"{base_version}-transformers{tag_version}"
    else:
        prefix = table.get("tag_prefix", version)

    if repository == f"{framework}-inference-graviton":
        container_version = f"{container_version}-sagemaker"
    _check_p2(framework, instance_type, version)

    if (
        requested_container is not None
        and not table.get("container_version")
        and framework not in _data()["container_version_suffix_frameworks"]
        and repository != f"{framework}-inference-graviton"
        and "neuron" not in repository
    ):
        raise ImageNotFoundError.invalid(
            "container_version",
            requested_container,
            "None: it is a tag build component (a CUDA/OS suffix) that these images do not "
            "carry; pass the full framework version instead",
            reason=f"No published {framework} {version} image has such a tag",
        )

    tag = _tag(
        framework, scope, version, prefix, processor, py_version, container_version,
        inference_tool, instance_type, distribution,
    )  # fmt: skip
    account = registries[region]
    uri = f"{account}.dkr.{hostname}/{repository}"
    return f"{uri}:{tag}" if tag else uri


def _needed(container_version: Any) -> str:
    if not isinstance(container_version, str):
        raise ImageNotFoundError.invalid(
            "container_version", container_version, "a container version for this image"
        )
    return container_version


def get_training_image_uri(
    region: str,
    framework: str,
    framework_version: str | None = None,
    py_version: str | None = None,
    image_uri: str | None = None,
    distribution: Mapping[str, Any] | None = None,
    compiler_config: Any = None,
    tensorflow_version: str | None = None,
    pytorch_version: str | None = None,
    instance_type: str | None = None,
) -> str:
    """The training image of a framework estimator (SDK v2's ``get_training_image_uri``).

    ``image_uri``, when given, is returned as is. HuggingFace takes
    ``pytorch_version`` or ``tensorflow_version``; PyTorch with
    ``torch_distributed`` and ``smdistributed.modelparallel`` gets the SMP image.
    """
    if image_uri:
        return image_uri
    base: str | None = None
    container: str | None = None
    if tensorflow_version is not None or pytorch_version is not None:
        processor = _processor(instance_type, ["cpu", "gpu"])
        if processor == "gpu" and not compiler_config:
            container = "cu110-ubuntu18.04"
        base = (
            f"tensorflow{tensorflow_version}"
            if tensorflow_version is not None
            else f"pytorch{pytorch_version}"
        )
    if isinstance(distribution, Mapping) and "torch_distributed" in distribution:
        smdistributed = distribution.get("smdistributed")
        if isinstance(smdistributed, Mapping) and "modelparallel" in smdistributed:
            if smdistributed["modelparallel"].get("enabled", True):
                framework = "pytorch-smp"
                cuda = _data()["smp_cuda"]
                text = _as_text("framework_version", framework_version)
                if any(v in text for v in cuda["cu124"]):
                    container = "cu124"
                elif "p5" in _as_text("instance_type", instance_type) or any(
                    v in text for v in cuda["cu121"]
                ):
                    container = "cu121"
                else:
                    container = "cu118"
    return retrieve(
        framework,
        region,
        instance_type=instance_type,
        version=framework_version,
        py_version=py_version,
        image_scope="training",
        distribution=distribution,
        base_framework_version=base,
        container_version=container,
        training_compiler_config=compiler_config,
    )


def get_base_python_image_uri(region: str, py_version: str = "310") -> str:
    """SageMaker's base Python image (SDK v2's ``get_base_python_image_uri``)."""
    config = framework_config("sagemaker-base-python")
    table = config["versions"]["1.0"]
    registries = table["registries"]
    _refuse("region", region, list(registries), "No base Python image there")
    hostname = _data()["hostnames"].get(region)
    if not hostname:
        raise ImageNotFoundError.invalid("region", region, "a region botocore knows")
    return f"{registries[region]}.dkr.{hostname}/{table['repository']}-{py_version}:1.0"
