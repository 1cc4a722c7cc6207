"""``launchbay vpc up|down|show``: the training VPC, a CloudFormation stack (docs/vpc.md)."""

from __future__ import annotations

import argparse
from typing import Any

from launchbay import vpc
from launchbay.cli.console import EXIT_OK, info
from launchbay.cli.output import print_json

__all__ = ["print_vpc", "cmd_vpc_up", "cmd_vpc_show", "cmd_vpc_down"]


def print_vpc(args: argparse.Namespace, config: Any) -> None:
    if args.output == "json":
        print_json(
            {
                "stack": args.stack,
                "vpc_id": config.vpc_id,
                "subnets": list(config.subnets),
                "security_group_ids": list(config.security_group_ids),
            }
        )
        return
    print(f"stack:              {args.stack}")
    print(f"vpc_id:             {config.vpc_id}")
    print(f"subnets:            {', '.join(config.subnets)}")
    print(f"security_group_ids: {', '.join(config.security_group_ids)}")


def cmd_vpc_up(args: argparse.Namespace) -> int:
    config = vpc.provision(
        args.stack,
        args.region,
        cidr=args.cidr,
        interface_endpoints=args.interface_endpoints,
        timeout=args.timeout,
        progress=True,
    )
    print_vpc(args, config)
    return EXIT_OK


def cmd_vpc_show(args: argparse.Namespace) -> int:
    print_vpc(args, vpc.describe(args.stack, args.region))
    return EXIT_OK


def cmd_vpc_down(args: argparse.Namespace) -> int:
    if vpc.teardown(args.stack, args.region, timeout=args.timeout, progress=True):
        info(f"deleted stack {args.stack}")
    else:
        info(f"no stack {args.stack}: nothing to delete")
    return EXIT_OK
