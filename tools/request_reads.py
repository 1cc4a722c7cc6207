"""Count the reads of a CreateTrainingJob request on its way down (issue 21).

The request is built once (``_request.py``, checked by ``_rules.py`` and
``_request_rules.py``) and resolved once into a plan (``backends/plan.py``). Every other client module
should take what it needs from the plan, not read the request again. This counts
what is left, per module and in total:

* ``.get("<Key>")`` of a top-level CreateTrainingJob key (with or without
  ``or {}``/``or []`` after it), and
* ``["<Key>"]`` subscripts of those keys,

in ``sdk/launchbay`` outside ``runtime/`` and the modules above.

    python tools/request_reads.py          # per module, then the total
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "sdk" / "launchbay"
SHAPES = PACKAGE / "schemas" / "create_training_job.json"

#: The modules whose job is to build (or refuse) the request, and the plan itself.
EXCLUDED = {
    "_request.py",
    "_rules.py",
    "_request_rules.py",
    "backends/_sagemaker_request.py",  # gone: its checks are _request_rules.py's
    "backends/plan.py",
}


def keys() -> list[str]:
    """CreateTrainingJob's top-level keys, from botocore's model as the package ships it."""
    return sorted(json.loads(SHAPES.read_text())["request"]["members"])


def pattern(names: list[str]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(name) for name in names)
    quoted = rf"""["'](?:{alternatives})["']"""
    return re.compile(rf"\.get\(\s*{quoted}\s*[,)]|\[\s*{quoted}\s*\]")


def count() -> dict[str, int]:
    """Reads per module (relative to ``sdk/launchbay``), modules without any left out."""
    found = pattern(keys())
    counts: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("runtime/") or relative in EXCLUDED:
            continue
        hits = len(found.findall(path.read_text()))
        if hits:
            counts[relative] = hits
    return counts


def main() -> int:
    counts = count()
    for module, hits in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        print(f"{hits:4d}  {module}")
    print(f"{sum(counts.values()):4d}  total ({len(counts)} modules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
