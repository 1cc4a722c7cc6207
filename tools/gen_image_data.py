"""Generate ``sdk/launchbay/_image_data.py`` from the SageMaker Python SDK v2's image config.

launchbay resolves the AWS Deep Learning Container training images the way
``sagemaker.image_uris.retrieve`` does, but keeps the facts in a compact table
of its own (one region -> account table per registry family, named region
sets, per-version Python versions) instead of shipping v2's JSON files.

This script is the only place that reads v2. It needs the pinned SDK::

    pip install sagemaker==2.257.7
    python tools/gen_image_data.py            # rewrites sdk/launchbay/_image_data.py
    python tools/gen_image_data.py --check    # exit 1 if the file is out of date

It reads (facts only, no code is copied): ``image_uri_config/pytorch.json``,
``tensorflow.json``, ``pytorch-smp.json``, ``pytorch-neuron.json`` for the
training scope (every version, alias and Python version listed there, the
first-generation ``sagemaker-pytorch``/``sagemaker-tensorflow*`` repositories and
per-Python images included), botocore's ECR hostnames for every region listed there (to
check the domain rules below), and ``fw_utils.GRAVITON_ALLOWED_TARGET_INSTANCE_FAMILY``.
A few facts live in v2's code rather than its JSON; they are written out by
hand in ``HAND_WRITTEN`` below, each with the place it comes from.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

PINNED = "2.257.7"
OUTPUT = Path(__file__).resolve().parent.parent / "sdk" / "launchbay" / "_image_data.py"

# (launchbay framework, launchbay scope, v2 config name): every training version v2 lists.
SOURCES = [
    ("pytorch", "training", "pytorch"),
    ("pytorch", "smp", "pytorch-smp"),
    ("pytorch", "neuron", "pytorch-neuron"),
    ("tensorflow", "training", "tensorflow"),
]

# Which account table a repository's images live in: the Deep Learning Containers'
# accounts, the SMP accounts, or the accounts of the first-generation SageMaker
# framework images (sagemaker-pytorch, sagemaker-tensorflow[-scriptmode]).
REGISTRY_FAMILY = {
    "pytorch-training": "dlc",
    "tensorflow-training": "dlc",
    "pytorch-training-neuron": "dlc",
    "smdistributed-modelparallel": "smp",
    "sagemaker-pytorch": "legacy",
    "sagemaker-tensorflow": "legacy",
    "sagemaker-tensorflow-scriptmode": "legacy",
}

# ECR domain by region prefix (first match wins); checked against botocore below.
DOMAINS = [
    ["cn-", "amazonaws.com.cn"],
    ["us-isob-", "sc2s.sgov.gov"],
    ["us-isof-", "csp.hci.ic.gov"],
    ["us-iso-", "c2s.ic.gov"],
]
DEFAULT_DOMAIN = "amazonaws.com"

# Facts that live in v2's code, not in its JSON.
HAND_WRITTEN = {
    # sagemaker.image_uris.get_training_image_uri: the CUDA suffix of a
    # smdistributed-modelparallel tag. By the framework_version's major.minor,
    # else "cu121" on p5 instances, else "cu118".
    "smp_cuda": {
        "by_minor": {
            "2.5": "cu124",
            "2.1": "cu121",
            "2.2": "cu121",
            "2.3": "cu121",
            "2.4": "cu121",
        },
        "p5": "cu121",
        "default": "cu118",
    },
    # sagemaker.image_uris._validate_instance_deprecation: ml.p2 is refused
    # from these framework versions on.
    "p2_retired_from": {"pytorch": "1.13", "tensorflow": "2.12"},
    # sagemaker.image_uris._get_image_tag: on ml.p4d instances, or with any
    # "smdistributed" distribution, these "<framework>-<tag>" keys get a CUDA/OS
    # suffix appended to the tag (the tag carries the version exactly as given).
    "auto_container_suffix": {
        "tensorflow-2.3-gpu-py37": "cu110-ubuntu18.04-v3",
        "tensorflow-2.3.1-gpu-py37": "cu110-ubuntu18.04",
        "tensorflow-2.3.2-gpu-py37": "cu110-ubuntu18.04",
        "tensorflow-1.15-gpu-py37": "cu110-ubuntu18.04-v8",
        "tensorflow-1.15.4-gpu-py37": "cu110-ubuntu18.04",
        "tensorflow-1.15.5-gpu-py37": "cu110-ubuntu18.04",
        "pytorch-1.6-gpu-py36": "cu110-ubuntu18.04-v3",
        "pytorch-1.6.0-gpu-py36": "cu110-ubuntu18.04",
        "pytorch-1.6-gpu-py3": "cu110-ubuntu18.04-v3",
        "pytorch-1.6.0-gpu-py3": "cu110-ubuntu18.04",
    },
    # The framework estimators' version rules (sagemaker/{pytorch,tensorflow}/).
    # py2: the newest version with Python 2 images (defaults.LATEST_PY2_VERSION);
    # py_version="py2" is warned about, and TensorFlow refuses it above this version
    # (TensorFlow._HIGHEST_PYTHON_2_VERSION).
    "py2_latest": {"pytorch": "1.3.1", "tensorflow": "2.1.1"},
    "py2_refused_after": {"tensorflow": "2.1.1"},
    # TensorFlow._HIGHEST_LEGACY_MODE_ONLY_VERSION: these versions run legacy mode
    # only (no script mode), and the estimator refuses them without image_uri.
    "legacy_mode_through": {"tensorflow": "1.10.0"},
}

KNOWN_VERSION_KEYS = {
    "py_versions",
    "repository",
    "registries",
    "processors",
    "container_version",
    "sdk_versions",
}


def _vtuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _load_v2() -> tuple[Path, object, object]:
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    try:
        import sagemaker
        from sagemaker import fw_utils, utils
    except ImportError:  # pragma: no cover - developer tool
        sys.exit(f"this script needs the SageMaker SDK: pip install sagemaker=={PINNED}")
    return Path(sagemaker.__file__).parent / "image_uri_config", fw_utils, utils


def build(allow_other_version: bool = False) -> dict:
    """Read v2's config and return launchbay's image table."""
    config_dir, fw_utils, utils = _load_v2()
    from collections import Counter
    from importlib.metadata import version as dist_version

    installed = dist_version("sagemaker")
    if installed != PINNED and not allow_other_version:
        sys.exit(f"expected sagemaker=={PINNED}, found {installed} (use --allow-other-version)")

    accounts: dict[str, dict[str, str]] = {}
    region_sets: dict[str, list[str]] = {}
    images: dict[str, dict[str, dict]] = {}

    def region_set_name(family: str, regions: list[str]) -> str:
        for name, members in region_sets.items():
            if name.startswith(family + "-") and members == regions:
                return name
        name = f"{family}-{len(regions)}"
        suffix = ord("a")
        while name in region_sets:
            name = f"{family}-{len(regions)}{chr(suffix)}"
            suffix += 1
        region_sets[name] = regions
        return name

    def image(config_name: str, version: str, entry: dict) -> dict:
        """One image's facts: repository, registries (as a region set), extra tag parts."""
        unknown = set(entry) - KNOWN_VERSION_KEYS
        if unknown or "repository" not in entry:
            sys.exit(f"{config_name} {version}: unexpected layout {sorted(entry)}")
        repo = entry["repository"]
        if repo not in REGISTRY_FAMILY:
            sys.exit(f"{config_name} {version}: repository {repo} has no REGISTRY_FAMILY")
        family = REGISTRY_FAMILY[repo]
        table = accounts.setdefault(family, {})
        for region, account in entry["registries"].items():
            if table.setdefault(region, account) != account:
                sys.exit(f"{family}: {region} has two accounts ({table[region]}, {account})")
        item: dict = {
            "repository": repo,
            "regions": region_set_name(family, sorted(entry["registries"])),
        }
        if "container_version" in entry:
            # v2 appends "<newest sdk>-<container version>" to neuron tags;
            # the newest SDK is picked by a plain string sort, as v2 does.
            sdk = sorted(entry.get("sdk_versions", []), reverse=True)
            item["suffix"] = {
                proc: "-".join([*sdk[:1], tail])
                for proc, tail in entry["container_version"].items()
            }
        return item

    for framework, scope, config_name in SOURCES:
        raw = json.loads((config_dir / f"{config_name}.json").read_text())
        config = raw["training"] if "training" in raw else raw
        scope_processors = config.get("processors")
        versions: dict[str, dict] = {}
        processors_seen = set()
        for version, entry in config["versions"].items():
            if "repository" in entry:
                item = image(config_name, version, entry)
                item["py"] = list(entry["py_versions"])
                processors_seen.add(tuple(scope_processors or entry["processors"]))
            else:
                # One image per Python version (v2's older layout: {"py2": {...}, "py3": {...}}).
                by_py = {py: image(config_name, version, sub) for py, sub in entry.items()}
                item = {"py": list(by_py), "by_py": by_py}
                processors_seen.add(tuple(scope_processors))
            versions[version] = item
        if len(processors_seen) != 1:
            sys.exit(f"{config_name}: expected one processor set per scope")
        # The scope's usual repository and region set are stated once; a version
        # lists them only where it differs.
        common = Counter(
            (item["repository"], item["regions"])
            for item in versions.values()
            if "by_py" not in item
        ).most_common(1)[0][0]
        for item in versions.values():
            for sub in [item, *item.get("by_py", {}).values()]:
                if sub.get("repository") == common[0]:
                    del sub["repository"]
                if sub.get("regions") == common[1]:
                    del sub["regions"]
            for py, sub in list(item.get("by_py", {}).items()):
                if not sub:
                    del item["by_py"][py]
            if item.get("by_py") == {}:
                del item["by_py"]
        repo = common[0]
        aliases = {
            alias: target
            for alias, target in config.get("version_aliases", {}).items()
            if target in versions
        }
        scope_entry: dict = {
            "repository": repo,
            "regions": common[1],
            "processors": list(processors_seen.pop()),
        }
        if "neuron" in repo:
            # v2 puts the inference tool ("neuron") where the processor goes.
            scope_entry["tag_processor"] = "neuron"
        scope_entry["aliases"] = aliases
        scope_entry["versions"] = dict(sorted(versions.items(), key=lambda kv: _vtuple(kv[0])))
        images.setdefault(framework, {})[scope] = scope_entry

    resolver = utils._botocore_resolver()
    for family, table in accounts.items():
        for region in table:
            expected = resolver.construct_endpoint("ecr", region)
            host = expected["hostname"] if expected else f"ecr.{region}.amazonaws.com"
            domain = next((d for p, d in DOMAINS if region.startswith(p)), DEFAULT_DOMAIN)
            if host != f"ecr.{region}.{domain}":
                sys.exit(f"domain rule wrong for {region}: botocore says {host}")
        accounts[family] = dict(sorted(table.items()))

    return {
        "source": f"sagemaker=={installed}",
        "domains": DOMAINS,
        "default_domain": DEFAULT_DOMAIN,
        "accounts": accounts,
        "repository_accounts": dict(sorted(REGISTRY_FAMILY.items())),
        "region_sets": dict(sorted(region_sets.items())),
        "images": images,
        "graviton_families": sorted(fw_utils.GRAVITON_ALLOWED_TARGET_INSTANCE_FAMILY),
        **HAND_WRITTEN,
    }


def _literal(value: object, indent: int = 0) -> str:
    """A compact Python literal: lists and short dicts on one line, long dicts one key a line."""
    flat = json.dumps(value)
    if not isinstance(value, dict) or len(flat) + indent <= 96:
        return flat
    pad = " " * (indent + 4)
    items = [f"{pad}{json.dumps(k)}: {_literal(v, indent + 4)}," for k, v in value.items()]
    return "{\n" + "\n".join(items) + "\n" + " " * indent + "}"


def render(data: dict) -> str:
    """The data module's source text (a dict literal; ruff's formatter leaves it alone)."""
    body = _literal(data)
    return (
        '"""Image facts for launchbay.image_uris. GENERATED by tools/gen_image_data.py; do not edit.\n'
        "\n"
        f"Source: {data['source']} (image_uri_config/*.json, training scope).\n"
        '"""\n'
        "\n"
        "from __future__ import annotations\n"
        "\n"
        "from typing import Any, TypedDict\n"
        "\n"
        "\n"
        "class SmpCuda(TypedDict):\n"
        '    """CUDA tag suffix of SMP images: per framework minor version, else by family."""\n'
        "\n"
        "    by_minor: dict[str, str]\n"
        "    p5: str\n"
        "    default: str\n"
        "\n"
        "\n"
        "class ImageData(TypedDict):\n"
        '    """The shape of DATA; an image table (images[framework][scope]) stays a plain dict."""\n'
        "\n"
        "    source: str\n"
        "    domains: list[list[str]]\n"
        "    default_domain: str\n"
        "    accounts: dict[str, dict[str, str]]\n"
        "    repository_accounts: dict[str, str]\n"
        "    region_sets: dict[str, list[str]]\n"
        "    images: dict[str, dict[str, dict[str, Any]]]\n"
        "    graviton_families: list[str]\n"
        "    smp_cuda: SmpCuda\n"
        "    p2_retired_from: dict[str, str]\n"
        "    auto_container_suffix: dict[str, str]\n"
        "    py2_latest: dict[str, str]\n"
        "    py2_refused_after: dict[str, str]\n"
        "    legacy_mode_through: dict[str, str]\n"
        "\n"
        "\n"
        "# fmt: off\n"
        f"DATA: ImageData = {body}\n"
        "# fmt: on\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if the file is out of date")
    parser.add_argument("--allow-other-version", action="store_true")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    text = render(build(args.allow_other_version))
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date; run tools/gen_image_data.py", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
