"""``launchbay images build|push|pull|base``: the training images (docs/images.md)."""

from __future__ import annotations

import argparse

from launchbay import images
from launchbay.cli.console import EXIT_OK
from launchbay.errors import ConfigurationError

__all__ = ["cmd_images_build", "cmd_images_push", "cmd_images_pull", "cmd_images_base"]


def cmd_images_build(args: argparse.Namespace) -> int:
    build_args: dict[str, str] = {}
    for item in args.build_args:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigurationError.invalid("--build-arg", item, "KEY=VALUE")
        build_args[key] = value
    tag = images.build_image(
        args.framework,
        args.framework_version,
        args.processor,
        base_image=args.base_image,
        wheelhouse=args.wheelhouse,
        tag=args.tag,
        ca_bundle=args.ca_bundle,
        py_version=args.py_version,
        reuse=args.reuse,
        build_args=build_args,
        offline=args.offline,
        nocache=args.no_cache,
        pytorch_version=args.pytorch_version,
    )
    print(tag)
    return EXIT_OK


def cmd_images_push(args: argparse.Namespace) -> int:
    print(images.push_image(args.image, args.repository, tag=args.tag))
    return EXIT_OK


def cmd_images_pull(args: argparse.Namespace) -> int:
    print(images.pull_image(args.image))
    return EXIT_OK


def cmd_images_base(args: argparse.Namespace) -> int:
    print(
        images.build_base_image(
            args.tag, suite=args.suite, sources=args.sources, reuse=not args.rebuild
        )
    )
    return EXIT_OK
