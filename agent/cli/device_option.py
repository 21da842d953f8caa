"""`--device`, as every command that opens a device takes it."""

from __future__ import annotations

import argparse

PIPELINE_BACKENDS = ("; or 'cpu' (onnxruntime, what serves when no usable GPU exists) or 'numpy' (the reference "
                     "executor)")
ENGINE_EXECUTORS = "; or 'numpy' (the engine's NumPy reference executor)"


def add_device_option(p: argparse.ArgumentParser, *, cpu: bool = False, numpy: bool = False) -> None:
    """`cpu`: the command runs the OCR pipeline, so it also takes the CPU backends' names; `numpy`: it runs one
    model on the engine, which also has the NumPy executor."""
    extra = PIPELINE_BACKENDS if cpu else ENGINE_EXECUTORS if numpy else ""
    p.add_argument(
        "--device",
        metavar="SEL",
        help="Vulkan device to use: index, UUID or part of the name, lavapipe included (default: VKOCR_DEVICE, "
        f"else the best ranked usable GPU){extra}",
    )
