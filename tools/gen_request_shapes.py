"""Generate ``sdk/launchbay/schemas/create_training_job.json`` from botocore's SageMaker model.

launchbay checks every CreateTrainingJob request (and every estimator argument
that goes into one) against what the service accepts: types, lengths, ranges,
patterns and enums (:mod:`launchbay._request_rules`). Those facts come from
botocore's service model, the same file boto3 validates against, so they are
written out once as a compact JSON tree that ships with the package (botocore
is only needed with the ``aws`` extra).

    python tools/gen_request_shapes.py           # rewrites the JSON file
    python tools/gen_request_shapes.py --check   # exit 1 if it is out of date

Each node is ``{"shape": name, "type": ..., "min"/"max"/"pattern"/"enum": ...,
"required": [...], "members": {...}, "member": {...}, "key": {...}, "value": {...}}``
with only the keys that apply.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

OUTPUT = Path(__file__).resolve().parent.parent / "sdk/launchbay/schemas/create_training_job.json"
OPERATION = "CreateTrainingJob"


def node(shape: Any, depth: int = 0) -> dict[str, Any]:
    if depth > 20:
        raise RuntimeError(f"{shape.name} nests too deep (a recursive shape?)")
    out: dict[str, Any] = {"shape": shape.name, "type": shape.type_name}
    for key in ("min", "max", "pattern"):
        if key in shape.metadata:
            out[key] = shape.metadata[key]
    enum = getattr(shape, "enum", None)
    if enum:
        out["enum"] = list(enum)
    if shape.type_name == "structure":
        out["required"] = list(shape.required_members)
        out["members"] = {name: node(sub, depth + 1) for name, sub in shape.members.items()}
    elif shape.type_name == "list":
        out["member"] = node(shape.member, depth + 1)
    elif shape.type_name == "map":
        out["key"] = node(shape.key, depth + 1)
        out["value"] = node(shape.value, depth + 1)
    return out


def generate() -> str:
    import botocore
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    tree = node(model.operation_model(OPERATION).input_shape)
    document = {
        "source": f"botocore {botocore.__version__}, sagemaker {model.api_version}, {OPERATION}",
        "request": tree,
    }
    return json.dumps(document, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    text = generate()
    if args.check:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if json.loads(current or "{}").get("request") != json.loads(text)["request"]:
            print(f"{OUTPUT} is out of date: run python tools/gen_request_shapes.py")
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
