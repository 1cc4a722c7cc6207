"""``launchbay config show``: the SageMaker SDK defaults files launchbay applies (docs/ci.md)."""

from __future__ import annotations

import argparse

from launchbay.cli.console import EXIT_OK
from launchbay.cli.output import print_json

__all__ = ["cmd_config_show"]


def cmd_config_show(args: argparse.Namespace) -> int:
    from launchbay import _sagemaker_config

    described = _sagemaker_config.describe(show_values=args.show_values)
    if args.output == "json":
        print_json(described)
    else:
        print("\n".join(_sagemaker_config.describe_text(described)))
    return EXIT_OK
