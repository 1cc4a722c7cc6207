"""The ``launchbay`` command. Subcommands arrive with the CLI issue; for now it prints help."""

from __future__ import annotations

import argparse
import sys

from launchbay import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="launchbay",
        description="Run distributed ML training jobs locally or on SageMaker.",
    )
    parser.add_argument("--version", action="version", version=f"launchbay {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
