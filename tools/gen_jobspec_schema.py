"""Render ``sdk/launchbay/schemas/jobspec.schema.json`` from the argument declarations.

The estimator arguments' properties come from :mod:`launchbay.arguments`; the rest
of the file (the spec-only keys, the rules between keys, ``$defs``) is kept.
``tests/unit/test_arguments.py`` fails when the file differs from the rendering::

    python tools/gen_jobspec_schema.py          # rewrite the file
    python tools/gen_jobspec_schema.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "sdk"))

from launchbay import jobspec  # noqa: E402

PATH = ROOT / "sdk" / "launchbay" / "schemas" / "jobspec.schema.json"


def render() -> str:
    """The file's text as the declarations give it."""
    current = json.loads(PATH.read_text(encoding="utf-8"))
    return json.dumps(jobspec.render_schema(current), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 if stale")
    args = parser.parse_args(argv)
    text = render()
    if PATH.read_text(encoding="utf-8") == text:
        return 0
    if args.check:
        print(f"{PATH} is out of date: run python tools/gen_jobspec_schema.py", file=sys.stderr)
        return 1
    PATH.write_text(text, encoding="utf-8")
    print(f"wrote {PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
