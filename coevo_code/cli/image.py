"""``coevo build-image``: the docker launcher's sandbox image, built offline from this host's
Python (:mod:`coevo_code.execution.image` parses its own arguments)."""

from __future__ import annotations

from .base import Command


class BuildImageCommand(Command):
    name = "build-image"
    help = ("build the docker launcher's sandbox image offline, from this host's Python; "
            "`coevo build-image --help`")
    raw = True

    def run(self, args, argv: list[str]) -> int:
        from ..execution.image import main as build_image_main
        return build_image_main(argv)
