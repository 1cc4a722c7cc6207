"""Training image names: what a launchbay image is called and what its name says. Pure.

::

    launchbay/<framework>-training:<framework_version>-<cpu|gpu>-<py_version>
    launchbay/pytorch-training:2.13.0-cpu-py311
    launchbay/sklearn-training:1.2-1-cpu-py3                     SageMaker's version scheme
    launchbay/huggingface-training:5.24.0-pytorch2.13.0-cpu-py311  transformers, then torch
"""

from __future__ import annotations

import re
from typing import NamedTuple

from launchbay import image_uris
from launchbay.errors import ConfigurationError

__all__ = [
    "FRAMEWORKS",
    "PROCESSORS",
    "DEFAULT_PY_VERSION",
    "DEFAULT_GPU_BASE_IMAGE",
    "REPOSITORY_PREFIX",
    "LABEL_PREFIX",
    "LABEL_HASH",
    "ImageSpec",
    "image_name",
    "parse_image_name",
    "build_command",
    "default_base_image",
    "huggingface_version",
]

FRAMEWORKS = ("pytorch", "tensorflow", "huggingface", "sklearn", "xgboost")
#: Frameworks whose images install this project's pinned packages whatever SageMaker version
#: names them (images/context.py): a loose ``py3`` in their name builds on Python 3.11.
_PINNED_FRAMEWORKS = ("huggingface", "sklearn", "xgboost")
PROCESSORS = ("cpu", "gpu")
DEFAULT_PY_VERSION = "py311"
#: The GPU base: a CUDA + cuDNN *runtime* image (NCCL included). Ubuntu 22.04 has no Python
#: 3.11 of its own, so the Dockerfile installs python3.11 from its apt sources.
DEFAULT_GPU_BASE_IMAGE = "nvidia/cuda:12.6.3-cudnn-runtime-ubuntu22.04"
REPOSITORY_PREFIX = "launchbay"
#: Image labels (``docker inspect``): what the image is, and the hash of what it was built from.
LABEL_PREFIX = "ai.launchbay."
LABEL_HASH = LABEL_PREFIX + "context-hash"

_NAME_RE = re.compile(
    r"^launchbay/(?P<framework>[a-z]+)-training:"
    r"(?P<framework_version>[0-9A-Za-z][0-9A-Za-z._-]*)-(?P<processor>cpu|gpu)-(?P<py_version>py\d+)$"
)
# A '-' inside is SageMaker's build suffix (SKLearn/XGBoost "1.2-1") or HuggingFace's base.
_VERSION_RE = re.compile(r"^[0-9A-Za-z](?:[0-9A-Za-z._-]{0,80}[0-9A-Za-z._])?$")
_HUGGINGFACE_RE = re.compile(
    r"^(?P<transformers>[^-]+)-(?P<base>pytorch|tensorflow)(?P<base_version>[^-]+)$"
)
PY_RE = re.compile(r"^py3(\d{1,2})$")


class ImageSpec(NamedTuple):
    """What a launchbay training image name says."""

    framework: str
    framework_version: str
    processor: str
    py_version: str

    @property
    def name(self) -> str:
        """The image name: ``launchbay/<framework>-training:<fv>-<processor>-<py>``."""
        return image_name(self.framework, self.framework_version, self.processor, self.py_version)


def check_framework(framework: object) -> str:
    if framework not in FRAMEWORKS:
        raise ConfigurationError.invalid("framework", framework, " or ".join(map(repr, FRAMEWORKS)))
    return str(framework)


def check_processor(processor: object) -> str:
    if processor not in PROCESSORS:
        raise ConfigurationError.invalid("processor", processor, " or ".join(map(repr, PROCESSORS)))
    return str(processor)


def check_framework_version(version: object, framework: str | None = None) -> str:
    if not isinstance(version, str) or not _VERSION_RE.match(version):
        raise ConfigurationError.invalid(
            "framework_version",
            version,
            "a version such as '2.13.0' or '1.2-1' (letters, digits, '.', '_', '-')",
        )
    if framework == "huggingface" and not _HUGGINGFACE_RE.match(version):
        raise ConfigurationError.invalid(
            "framework_version",
            version,
            "the transformers version and the PyTorch version, as '5.24.0-pytorch2.13.0' "
            "(build_image(..., pytorch_version=) and --pytorch-version join them)",
            reason="A HuggingFace image is named by both",
        )
    return version


def huggingface_version(transformers_version: str, base_version: str, base: str = "pytorch") -> str:
    """The version part of a HuggingFace image's name: transformers', then its base's.

    >>> huggingface_version("5.24.0", "2.13.0")
    '5.24.0-pytorch2.13.0'
    """
    return f"{transformers_version}-{base}{base_version}"


def split_huggingface(version: str) -> tuple[str, str, str]:
    """``"5.24.0-pytorch2.13.0"`` -> ``("5.24.0", "pytorch", "2.13.0")``."""
    match = _HUGGINGFACE_RE.match(version)
    if not match:  # check_framework_version refuses it first
        raise ConfigurationError.invalid("framework_version", version, "'5.24.0-pytorch2.13.0'")
    return match.group("transformers"), match.group("base"), match.group("base_version")


def python_version(py_version: object) -> str:
    """``"py311"`` -> ``"3.11"``."""
    match = PY_RE.match(py_version) if isinstance(py_version, str) else None
    if not match:
        raise ConfigurationError.invalid(
            "py_version", py_version, "'py3' and a minor version, e.g. 'py311'"
        )
    return f"3.{match.group(1)}"


def image_name(
    framework: str, framework_version: str, processor: str, py_version: str = DEFAULT_PY_VERSION
) -> str:
    """The local image name for a framework image.

    >>> image_name("pytorch", "2.13.0", "cpu")
    'launchbay/pytorch-training:2.13.0-cpu-py311'
    """
    check_framework(framework)
    check_framework_version(framework_version, framework)
    check_processor(processor)
    python_version(py_version)
    return f"{REPOSITORY_PREFIX}/{framework}-training:{framework_version}-{processor}-{py_version}"


def parse_image_name(name: str) -> ImageSpec | None:
    """The :class:`ImageSpec` of a launchbay image name, or ``None`` for any other name.

    >>> parse_image_name("launchbay/pytorch-training:2.13.0-cpu-py311")
    ImageSpec(framework='pytorch', framework_version='2.13.0', processor='cpu', py_version='py311')
    """
    match = _NAME_RE.match(name) if isinstance(name, str) else None
    if not match or match.group("framework") not in FRAMEWORKS:
        return None
    return ImageSpec(**match.groupdict())


def build_command(name: str) -> str | None:
    """The ``launchbay images build ...`` line that makes image ``name`` (``None`` if not ours).

    >>> build_command("launchbay/pytorch-training:2.13.0-gpu-py311")
    'launchbay images build pytorch --framework-version 2.13.0 --processor gpu'

    Old framework versions name their image with SageMaker's loose Python tag (``py3``,
    ``py2``); the command then builds on the newest Python 3 that version's SageMaker
    image had (``py37`` for TensorFlow 1.15.2, else ``py36``) and tags the result with
    the name the estimator asks for:

    >>> build_command("launchbay/tensorflow-training:1.15.2-cpu-py3")  # doctest: +NORMALIZE_WHITESPACE
    'launchbay images build tensorflow --framework-version 1.15.2 --processor cpu
     --py-version py37 --tag launchbay/tensorflow-training:1.15.2-cpu-py3'

    SKLearn's and XGBoost's ``py3`` images hold this project's pinned packages on Python 3.11;
    HuggingFace's name carries transformers' version and its PyTorch's:

    >>> build_command("launchbay/sklearn-training:1.2-1-cpu-py3")  # doctest: +NORMALIZE_WHITESPACE
    'launchbay images build sklearn --framework-version 1.2-1 --processor cpu
     --tag launchbay/sklearn-training:1.2-1-cpu-py3'
    >>> build_command("launchbay/huggingface-training:5.24.0-pytorch2.13.0-cpu-py311")  # doctest: +NORMALIZE_WHITESPACE
    'launchbay images build huggingface --framework-version 5.24.0 --pytorch-version 2.13.0
     --processor cpu'
    """
    spec = parse_image_name(name)
    if spec is None:
        return None
    py_version, tag = spec.py_version, None
    if not PY_RE.match(py_version):
        py_version, tag = python_for(spec.framework, spec.framework_version), name
    version = f"--framework-version {spec.framework_version}"
    hf = _HUGGINGFACE_RE.match(spec.framework_version) if spec.framework == "huggingface" else None
    if hf and hf.group("base") == "pytorch":
        version = (
            f"--framework-version {hf.group('transformers')} "
            f"--pytorch-version {hf.group('base_version')}"
        )
    command = f"launchbay images build {spec.framework} {version} --processor {spec.processor}"
    if py_version != DEFAULT_PY_VERSION:
        command += f" --py-version {py_version}"
    if tag:
        command += f" --tag {tag}"
    return command


def python_for(framework: str, framework_version: str) -> str:
    """The newest ``py3X`` SageMaker's image of this version had, else ``py36``.

    The images of pinned packages (SKLearn's, XGBoost's ``py3``) build on Python 3.11.
    """
    if framework in _PINNED_FRAMEWORKS:
        return DEFAULT_PY_VERSION
    try:
        listed = image_uris.py_versions(framework, framework_version)
    except ConfigurationError:
        listed = []
    explicit = [p for p in listed if PY_RE.match(p)]
    return max(explicit, key=lambda p: int(p[3:])) if explicit else "py36"


def default_base_image(processor: str, py_version: str = DEFAULT_PY_VERSION) -> str:
    """The base a build uses without ``base_image``: ``python:3.11-slim``, or the CUDA image."""
    python = python_version(py_version)
    if check_processor(processor) == "gpu":
        return DEFAULT_GPU_BASE_IMAGE
    return f"python:{python}-slim"


def check_tag(name: object, argument: str) -> None:
    if not isinstance(name, str) or not re.match(
        r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::\d+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
        r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$",
        name.split("@")[0],
    ):
        raise ConfigurationError.invalid(
            argument,
            name,
            "a Docker image reference such as 'launchbay/pytorch-training:2.13.0-cpu-py311'",
        )
