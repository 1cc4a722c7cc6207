"""AWS Deep Learning Container training image URIs, resolved as SageMaker SDK v2 resolves them.

The facts (versions, Python versions, repositories, registry accounts per
region) live in :mod:`launchbay._image_data`, generated from the pinned v2 SDK
by ``tools/gen_image_data.py``. This module holds the rules that turn them into
a URI::

    <account>.dkr.ecr.<region>.<domain>/<repository>:<tag>

Three image families are known, chosen by framework, instance type and
``distribution`` (the *scope* in :func:`supported_versions`):

``training``
    ``pytorch-training`` / ``tensorflow-training``, tag
    ``<framework_version>-<cpu|gpu>-<py_version>``.
``smp``
    PyTorch with ``torch_distributed`` plus ``smdistributed.modelparallel``
    (SMP v2): ``smdistributed-modelparallel``, tag
    ``<framework_version>-gpu-<py_version>-<cuda>``.
``neuron``
    PyTorch on Trainium (``ml.trn1*``/``ml.trn2*``): ``pytorch-training-neuron``,
    tag ``<framework_version>-neuron-<py_version>-<sdk>-<os>``.

As in v2, the tag carries ``framework_version`` exactly as given, so the alias
``"2.3"`` yields ``pytorch-training:2.3-gpu-py311`` (a published floating tag)
while its facts are those of ``2.3.0``.

Stdlib only and cheap to import: the estimator imports it on construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launchbay._image_data import DATA
from launchbay._instances import instance_family
from launchbay.errors import ConfigurationError, ImageNotFoundError

__all__ = [
    "FRAMEWORKS",
    "SCOPES",
    "check_version_rules",
    "instance_family",
    "processor_for",
    "py_versions",
    "resolve_version",
    "supported_versions",
    "training_image_uri",
    "version_aliases",
]

#: Frameworks with training images.
FRAMEWORKS: tuple[str, ...] = tuple(DATA["images"])
#: Image families (scopes) per framework.
SCOPES: dict[str, tuple[str, ...]] = {fw: tuple(s) for fw, s in DATA["images"].items()}

_LOCAL_PROCESSORS = {"local": "cpu", "local_process": "cpu", "local_gpu": "gpu"}
_SCOPE_LABELS = {
    "training": "training image",
    "smp": "smdistributed modelparallel (SMP) training image",
    "neuron": "Trainium (neuron) training image",
}
_PROCESSOR_HINTS = {
    "cpu": "CPU instance types (e.g. ml.m5.xlarge, ml.c5.2xlarge), local, local_process",
    "gpu": "GPU instance types (ml.p*, ml.g*, e.g. ml.g5.xlarge, ml.p4d.24xlarge), local_gpu",
    "trn": "Trainium instance types (ml.trn1.*, ml.trn2.*)",
}
_INSTANCE_TYPE_FORMS = "ml.<family>.<size> (e.g. ml.m5.xlarge), local, local_gpu, local_process"


def _vkey(version: str) -> tuple[int, ...]:
    """Numeric sort key of a dotted version."""
    return tuple(int(part) if part.isdigit() else -1 for part in version.split("."))


def _scopes(framework: str) -> Mapping[str, Any]:
    """The image tables of one framework by scope, or an ImageNotFoundError."""
    by_scope = DATA["images"].get(framework) if isinstance(framework, str) else None
    if by_scope is None:
        raise ImageNotFoundError.invalid(
            "framework",
            framework,
            ", ".join(FRAMEWORKS),
            reason="No training images are known for it",
        )
    return by_scope


def _images(framework: str, scope: str = "training") -> Mapping[str, Any]:
    """The image table of one framework and scope, or a ConfigurationError."""
    by_scope = _scopes(framework)
    table = by_scope.get(scope) if isinstance(scope, str) else None
    if table is None:
        raise ConfigurationError.invalid(
            "scope", scope, ", ".join(by_scope), reason=f"{framework} has no such image family"
        )
    return table


def _accepted_versions(table: Mapping[str, Any]) -> str:
    versions = ", ".join(sorted(table["versions"], key=_vkey))
    aliases = ", ".join(f"{a} (= {t})" for a, t in sorted(table["aliases"].items(), key=_alias_key))
    return f"{versions}; or an alias: {aliases}" if aliases else versions


def _alias_key(item: tuple[str, str]) -> tuple[int, ...]:
    return _vkey(item[0])


def _lookup(table: Mapping[str, Any], framework_version: object) -> str | None:
    """The version key for ``framework_version``; aliases win over keys, as in v2."""
    if not isinstance(framework_version, str):
        return None
    key = table["aliases"].get(framework_version, framework_version)
    return key if key in table["versions"] else None


def supported_versions(framework: str, scope: str = "training") -> list[str]:
    """Full framework versions with a known image, oldest first.

    Args:
        framework: ``"pytorch"`` or ``"tensorflow"``.
        scope: the image family: ``"training"`` (default), and for PyTorch also
            ``"smp"`` (smdistributed modelparallel) and ``"neuron"`` (Trainium).

    Returns:
        The versions, sorted numerically. Aliases are in :func:`version_aliases`.
    """
    return sorted(_images(framework, scope)["versions"], key=_vkey)


def version_aliases(framework: str, scope: str = "training") -> dict[str, str]:
    """Short version aliases and the full version each stands for (e.g. ``"2.3" -> "2.3.0"``).

    For ``scope="smp"`` the keys are PyTorch versions and the values SMP
    library releases, exactly as SageMaker SDK v2 stores them.
    """
    return dict(sorted(_images(framework, scope)["aliases"].items(), key=_alias_key))


def resolve_version(framework: str, framework_version: str, scope: str = "training") -> str:
    """Return the full version ``framework_version`` stands for (itself if already full).

    Raises:
        ImageNotFoundError: no image of ``framework``/``scope`` has that version;
            the message lists the versions and aliases accepted.
    """
    table = _images(framework, scope)
    key = _lookup(table, framework_version)
    if key is None:
        raise ImageNotFoundError.invalid(
            "framework_version",
            framework_version,
            _accepted_versions(table),
            reason=f"No {framework} {_SCOPE_LABELS[scope]} is known for this version",
        )
    return key


def py_versions(framework: str, framework_version: str, scope: str = "training") -> list[str]:
    """The Python versions (``"py311"``) the image of ``framework_version`` is built for.

    Raises:
        ImageNotFoundError: ``framework_version`` is unknown (see :func:`resolve_version`).
    """
    key = resolve_version(framework, framework_version, scope)
    return list(_images(framework, scope)["versions"][key]["py"])


def check_version_rules(
    framework: str,
    framework_version: str | None,
    py_version: str | None,
    image_uri: str | None = None,
) -> None:
    """The framework estimators' own version rules, as SageMaker SDK v2 applies them.

    * ``py_version="py2"`` warns (one line on the ``launchbay.image_uris`` logger): Python 2 images stop at
      PyTorch 1.3.1 and TensorFlow 2.1.1; TensorFlow refuses it for newer versions.
    * TensorFlow 1.10 and older ran in legacy mode only (no script mode): refused
      unless ``image_uri`` is given.

    Raises:
        ImageNotFoundError: py2 with a TensorFlow version newer than 2.1.1, or a
            legacy-mode-only TensorFlow version without ``image_uri``.
    """
    wanted = _version_key(framework_version)
    if py_version == "py2":
        latest = DATA["py2_latest"].get(framework)
        refused_after = DATA["py2_refused_after"].get(framework)
        if refused_after and wanted and wanted > _vkey(refused_after):
            raise ImageNotFoundError.invalid(
                "py_version",
                py_version,
                "a Python 3 version such as 'py3' or 'py37'",
                reason=f"{framework} images after {refused_after} are Python 3 only",
            )
        if latest:
            import logging

            logging.getLogger("launchbay.image_uris").warning(
                "py_version='py2' is deprecated: %s %s is the newest version with Python 2 "
                "images; pass py_version='py3' for a Python 3 image.",
                framework,
                latest,
            )
    legacy = DATA["legacy_mode_through"].get(framework)
    if image_uri is None and legacy and wanted and wanted <= _vkey(legacy):
        raise ImageNotFoundError.invalid(
            "framework_version",
            framework_version,
            f"a {framework} version newer than {legacy}, or image_uri= with model_dir=False",
            reason=f"{framework} {legacy} and older run in legacy mode only, which launchbay "
            "(like SageMaker SDK v2) does not start from script mode",
        )


def _version_key(version: str | None) -> tuple[int, ...] | None:
    """``_vkey`` of a version made of numbers only, else ``None`` (no rule applies)."""
    if not isinstance(version, str) or not all(p.isdigit() for p in version.split(".")):
        return None
    return _vkey(version)


def processor_for(instance_type: str) -> str:
    """The processor an instance type needs: ``"cpu"``, ``"gpu"``, ``"trn"`` or ``"inf"``.

    The rule is SageMaker SDK v2's: a family starting with ``inf`` is
    Inferentia, ``trn`` Trainium, ``g`` or ``p`` (ml.g4dn, ml.g5, ml.p4d,
    ml.p5, ...) GPU, anything else CPU. Local modes: ``local`` and
    ``local_process`` are CPU, ``local_gpu`` is GPU.

    Raises:
        ConfigurationError: ``instance_type`` is not of a known form.
    """
    if isinstance(instance_type, str) and instance_type in _LOCAL_PROCESSORS:
        return _LOCAL_PROCESSORS[instance_type]
    family = instance_family(instance_type)
    if not family:
        raise ConfigurationError.invalid(
            "instance_type",
            instance_type,
            _INSTANCE_TYPE_FORMS,
            reason="Not a SageMaker instance type",
        )
    if family.startswith("inf"):
        return "inf"
    if family.startswith("trn"):
        return "trn"
    return "gpu" if family[0] in "gp" else "cpu"


def _wants_smp(distribution: object) -> bool:
    """True when v2's PyTorch estimator would switch to the SMP v2 image."""
    if not isinstance(distribution, Mapping):
        return False
    if "torch_distributed" not in distribution or "smdistributed" not in distribution:
        return False
    smdistributed = distribution["smdistributed"]
    if not isinstance(smdistributed, Mapping):
        return False
    modelparallel = smdistributed.get("modelparallel")
    return isinstance(modelparallel, Mapping) and bool(modelparallel.get("enabled", True))


def _has_smdistributed(distribution: object) -> bool:
    """True when v2's estimator hands ``retrieve`` a distribution with ``smdistributed``.

    The PyTorch estimator rewrites ``pytorchddp`` to ``smdistributed`` first.
    """
    return isinstance(distribution, Mapping) and (
        "smdistributed" in distribution or "pytorchddp" in distribution
    )


def _repository(table: Mapping[str, Any], entry: Mapping[str, Any], py: str) -> tuple[str, str]:
    """The repository and region-set name of one version's image for Python ``py``.

    A version states them only where they differ from its scope's; the oldest
    TensorFlow versions have one image per Python version (``by_py``).
    """
    image = {**entry, **entry.get("by_py", {}).get(py, {})}
    return (
        image.get("repository", table["repository"]),
        image.get("regions", table["regions"]),
    )


def _smp_cuda(framework_version: str, family: str) -> str:
    rules = DATA["smp_cuda"]
    minor = ".".join(framework_version.split(".")[:2])
    if minor in rules["by_minor"]:
        return rules["by_minor"][minor]
    if family.startswith("p5"):
        return rules["p5"]
    return rules["default"]


def _instance_error(instance_type: str, accepted: list[str], reason: str) -> ImageNotFoundError:
    hints = "; ".join(_PROCESSOR_HINTS.get(p, p) for p in accepted)
    return ImageNotFoundError.invalid("instance_type", instance_type, hints, reason=reason)


def training_image_uri(
    framework: str,
    framework_version: str,
    py_version: str | None,
    instance_type: str,
    region: str,
    distribution: Mapping[str, Any] | None = None,
) -> str:
    """The training image URI SageMaker SDK v2's estimator would use.

    Equivalent to ``sagemaker.image_uris.retrieve(framework, region, version,
    py_version, instance_type, image_scope="training")`` plus the PyTorch
    estimator's switch to the SMP image for ``smdistributed.modelparallel``
    with ``torch_distributed`` and to the neuron image on Trainium.

    Args:
        framework: ``"pytorch"`` or ``"tensorflow"``.
        framework_version: a full version (``"2.3.0"``) or an alias (``"2.3"``);
            it appears in the tag as given.
        py_version: e.g. ``"py311"``; ``None`` picks the only one a version has.
        instance_type: ``ml.*`` instance type or ``local``/``local_gpu``/``local_process``.
        region: AWS region of the registry (``cn-*``, ``us-gov-*`` and ISO
            regions use their own accounts and domains).
        distribution: the estimator's ``distribution`` dict, if any.

    Returns:
        ``<account>.dkr.ecr.<region>.<domain>/<repository>:<tag>``.

    Raises:
        ImageNotFoundError: no image for this framework, ``framework_version``,
            ``py_version``, ``region`` or ``instance_type``; the message names
            the argument, the value and what is accepted.
        ConfigurationError: ``instance_type`` is malformed.
    """
    by_scope = _scopes(framework)
    processor = processor_for(instance_type)
    family = instance_family(instance_type)

    if family in DATA["graviton_families"]:
        # v2 hands out an *inference* Graviton image here; there is no
        # Graviton training image, so say so instead.
        raise _instance_error(
            instance_type,
            ["cpu", "gpu"],
            "Graviton (arm64) instances have no SageMaker training image",
        )
    if processor == "inf":
        raise _instance_error(
            instance_type,
            ["cpu", "gpu", "trn"] if framework == "pytorch" else ["cpu", "gpu"],
            "Inferentia (ml.inf*) instances have no training image",
        )

    scope = "training"
    if framework == "pytorch" and _wants_smp(distribution):
        scope = "smp"
    elif processor == "trn":
        if "neuron" not in by_scope:
            raise _instance_error(
                instance_type,
                ["cpu", "gpu"],
                f"Trainium training images exist for pytorch only, not {framework}",
            )
        scope = "neuron"
    table = by_scope[scope]
    label = _SCOPE_LABELS[scope]

    key = _lookup(table, framework_version)
    if key is None:
        if scope == "neuron" and _lookup(by_scope["training"], framework_version):
            known = ", ".join(supported_versions(framework, "neuron"))
            raise _instance_error(
                instance_type,
                ["cpu", "gpu"],
                f"SageMaker SDK v2 knows a {label} only for framework_version {known}, "
                f"not {framework_version}; pass image_uri to use a newer Neuron image",
            )
        key = resolve_version(framework, framework_version, scope)  # raises
    entry = table["versions"][key]

    pythons = entry["py"]
    if py_version is None and len(pythons) == 1:
        py_version = pythons[0]
    if py_version is None or py_version not in pythons:
        raise ImageNotFoundError.invalid(
            "py_version",
            py_version,
            ", ".join(pythons),
            reason=f"The {framework} {framework_version} {label} is built for other Python versions",
        )
    repository, region_set = _repository(table, entry, py_version)

    regions = DATA["region_sets"][region_set]
    if region not in regions:
        raise ImageNotFoundError.invalid(
            "region",
            region,
            ", ".join(regions),
            reason=f"No {framework} {framework_version} {label} is published there",
        )

    if processor not in table["processors"]:
        raise _instance_error(
            instance_type,
            table["processors"],
            f"The {framework} {framework_version} {label} is built for "
            f"{'/'.join(table['processors'])}, and {instance_type} is {processor}",
        )

    retired_from = DATA["p2_retired_from"].get(framework)
    if (
        scope == "training"
        and family == "p2"
        and retired_from
        and _vkey(key) >= _vkey(retired_from)
    ):
        raise _instance_error(
            instance_type,
            ["gpu"],
            f"ml.p2 instances are retired for {framework} {retired_from} and later, "
            f"{framework_version} included; use a newer GPU family",
        )

    parts = [framework_version, table.get("tag_processor", processor), py_version]
    if "suffix" in entry:
        parts.append(entry["suffix"][processor])
    if scope == "smp":
        parts.append(_smp_cuda(framework_version, family))
    elif family == "p4d" or _has_smdistributed(distribution):
        # v2 pins a CUDA/OS build for a few old GPU tags on p4d or with smdistributed.
        suffix = DATA["auto_container_suffix"].get("-".join([framework, *parts]))
        if suffix:
            parts.append(suffix)

    account = DATA["accounts"][DATA["repository_accounts"][repository]][region]
    domain = next(
        (d for prefix, d in DATA["domains"] if region.startswith(prefix)), DATA["default_domain"]
    )
    return f"{account}.dkr.ecr.{region}.{domain}/{repository}:{'-'.join(parts)}"
