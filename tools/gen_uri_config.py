"""Generate ``sdk/launchbay/data/image_uri_config.json`` from SageMaker SDK v2's image configuration.

``launchbay.image_uris.retrieve`` answers every framework, built-in algorithm and
tool image that ``sagemaker.image_uris.retrieve`` answers (issue 32). Its facts are
v2's 67 ``image_uri_config/*.json`` files, compacted: the 50-odd distinct
``registries`` maps (region -> account) are stored once and named, and each
config refers to its maps by name. Every other key and its order are kept, since
v2's rules read them in order (the "latest" version is the first or last listed).

Facts that live in v2's code rather than its JSON are read from that code too,
never typed here:

* ``sagemaker.fw_utils.GRAVITON_ALLOWED_FRAMEWORKS`` and
  ``GRAVITON_ALLOWED_TARGET_INSTANCE_FAMILY``;
* ``sagemaker.image_uris.FRAMEWORKS_WITH_CONTAINER_VERSION_SUFFIX``;
* the dict literals ``version_to_arm64_tag_mapping`` and ``container_versions`` in
  ``image_uris._get_image_tag``, and the SMP CUDA version tuples in
  ``get_training_image_uri``, read from v2's source with ``ast`` (literals only);
* the latest version v2 picks when ``version`` is not given, computed by v2's own
  ``_fetch_latest_version_from_config`` for each framework and each ``image_scope``;
* the ECR host name of every region listed, from botocore's endpoint data through
  v2's ``utils._botocore_resolver`` (``null`` where botocore knows none, where v2
  fails too), with v2's own ``il-central-1`` fallback.

Usage (needs the pinned SDK, which the test extra installs)::

    python tools/gen_uri_config.py            # rewrites the JSON file
    python tools/gen_uri_config.py --check    # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import sys
from pathlib import Path

PINNED = "2.257.7"
OUTPUT = (
    Path(__file__).resolve().parent.parent / "sdk" / "launchbay" / "data" / "image_uri_config.json"
)


def _literal_assignments(function: object) -> dict[str, object]:
    """``{name: value}`` of every ``name = <literal>`` in a function's source."""
    tree = ast.parse(inspect.getsource(function))  # type: ignore[arg-type]
    found: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                try:
                    found[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    continue
    return found


def _scopes_of(config: dict) -> list[str | None]:
    scopes: list[str | None] = [None, "training", "inference", "eia", "inference_graviton"]
    for key in config.get("scope", []) or list(config):
        if isinstance(key, str) and key not in scopes:
            scopes.append(key)
    return scopes


def build(allow_other_version: bool = False) -> dict:
    """The data file's content, from the installed SDK v2."""
    from importlib.metadata import version as dist_version

    try:
        import sagemaker
        from sagemaker import fw_utils, image_uris, utils
    except ImportError:
        sys.exit(f"this script needs the SageMaker SDK: pip install sagemaker=={PINNED}")
    installed = dist_version("sagemaker")
    if installed != PINNED and not allow_other_version:
        sys.exit(f"expected sagemaker=={PINNED}, found {installed} (use --allow-other-version)")

    folder = Path(sagemaker.__file__).parent / "image_uri_config"
    registries: dict[str, dict[str, str]] = {}
    names: dict[str, str] = {}

    def compact(value: object) -> object:
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                if key == "registries" and isinstance(item, dict):
                    text = json.dumps(item, sort_keys=True)
                    if text not in names:
                        names[text] = f"r{len(names)}"
                        registries[names[text]] = dict(sorted(item.items()))
                    out[key] = names[text]
                else:
                    out[key] = compact(item)
            return out
        if isinstance(value, list):
            return [compact(item) for item in value]
        return value

    configs: dict[str, object] = {}
    latest: dict[str, dict[str, object]] = {}
    for path in sorted(folder.glob("*.json")):
        raw = json.loads(path.read_text())
        configs[path.stem] = compact(raw)
        by_scope: dict[str, object] = {}
        for scope in _scopes_of(raw):
            try:
                value = image_uris._fetch_latest_version_from_config(raw, scope)
            except Exception as exc:  # v2 itself fails: retrieve refuses too
                value = {"error": f"{type(exc).__name__}: {exc}"}
            by_scope["" if scope is None else scope] = value
        latest[path.stem] = by_scope

    resolver = utils._botocore_resolver()
    hostnames: dict[str, str | None] = {}
    for region in sorted({r for table in registries.values() for r in table}):
        endpoint = resolver.construct_endpoint("ecr", region)
        if region == "il-central-1" and not endpoint:
            endpoint = {"hostname": f"ecr.{region}.amazonaws.com"}
        hostnames[region] = endpoint["hostname"] if endpoint else None

    tag_facts = _literal_assignments(image_uris._get_image_tag)
    smp_facts = _literal_assignments(image_uris.get_training_image_uri)
    return {
        "source": f"sagemaker=={installed}",
        "registries": registries,
        "configs": configs,
        "latest": latest,
        "hostnames": hostnames,
        "graviton_frameworks": sorted(fw_utils.GRAVITON_ALLOWED_FRAMEWORKS),
        "graviton_families": list(fw_utils.GRAVITON_ALLOWED_TARGET_INSTANCE_FAMILY),
        "container_version_suffix_frameworks": sorted(
            image_uris.FRAMEWORKS_WITH_CONTAINER_VERSION_SUFFIX
        ),
        "arm64_tags": tag_facts["version_to_arm64_tag_mapping"],
        "auto_container_versions": tag_facts["container_versions"],
        "smp_cuda": {
            "cu124": list(smp_facts["supported_smp_pt_versions_cu124"]),  # type: ignore[call-overload]
            "cu121": list(smp_facts["supported_smp_pt_versions_cu121"]),  # type: ignore[call-overload]
        },
    }


def render(data: dict) -> str:
    """Compact JSON, one config per line (diffs stay readable)."""
    lines = ["{"]
    items = list(data.items())
    for index, (key, value) in enumerate(items):
        comma = "," if index < len(items) - 1 else ""
        if key in ("configs", "registries", "latest"):
            lines.append(f"{json.dumps(key)}: {{")
            inner = list(value.items())
            for j, (name, item) in enumerate(inner):
                sep = "," if j < len(inner) - 1 else ""
                lines.append(
                    f"  {json.dumps(name)}: {json.dumps(item, separators=(',', ':'))}{sep}"
                )
            lines.append("}" + comma)
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is out of date")
    parser.add_argument("--allow-other-version", action="store_true")
    args = parser.parse_args(argv)
    text = render(build(args.allow_other_version))
    if args.check:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT} is out of date: run python tools/gen_uri_config.py", file=sys.stderr)
            return 1
        print(f"{OUTPUT} is up to date")
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
