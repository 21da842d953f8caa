"""`--device`, as every command that opens a device takes it."""

from __future__ import annotations

import argparse


def add_device_option(p: argparse.ArgumentParser, *, cpu: bool = False) -> None:
    extra = "; 'cpu' runs the NumPy executor instead (the explicit CPU fallback)" if cpu else ""
    p.add_argument(
        "--device",
        metavar="SEL",
        help="Vulkan device to use: index, UUID or part of the name (default: VKOCR_DEVICE, else the best "
        f"ranked){extra}",
    )
