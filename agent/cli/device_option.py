"""`--device`, as every command that opens a device takes it, and what a command says when it was not given
and the machine has no usable GPU."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager

PIPELINE_BACKENDS = ("; or 'cpu' (onnxruntime, what serves when no usable GPU exists) or 'numpy' (the reference "
                     "executor)")
ENGINE_EXECUTORS = "; or 'numpy' (the engine's NumPy reference executor)"
ENGINE_ONLY = ("This command measures vkocr's Vulkan engine: name a Vulkan device outright (--device llvmpipe for "
               "lavapipe, Mesa's CPU driver, whose times are no speed claim; `vkocr devices` lists them)")
OFF_THE_ENGINE = ("cpu", "numpy")  # the names that are no Vulkan device


def vulkan_device(text: str) -> str:
    """--device of a command that times or calibrates vkocr's Vulkan engine: 'cpu' and 'numpy' are refused now,
    before any work, naming what the command takes."""
    if text.strip().lower() in OFF_THE_ENGINE:
        raise argparse.ArgumentTypeError(f"{text!r}: this command measures vkocr's Vulkan engine; name a Vulkan "
                                         "device (`vkocr devices` lists them: llvmpipe, lavapipe, is one)")
    return text


def add_device_option(p: argparse.ArgumentParser, *, cpu: bool = False, numpy: bool = False) -> None:
    """`cpu`: the command runs the OCR pipeline (or one model), so it also takes the CPU backends' names;
    `numpy`: it makes a plan of one model on the engine, which also has the NumPy executor; neither: only a
    Vulkan device."""
    extra = PIPELINE_BACKENDS if cpu else ENGINE_EXECUTORS if numpy else ""
    p.add_argument(
        "--device",
        metavar="SEL",
        type=str if cpu or numpy else vulkan_device,
        help="Vulkan device to use: index, UUID or part of the name, lavapipe included (default: VKOCR_DEVICE, "
        f"else the best ranked usable GPU){extra}",
    )


@contextmanager
def saying_which_devices(selector: str | None, choices: str) -> Iterator[None]:
    """Around a command's opening of a Vulkan device: when no device was named and the machine has no usable GPU
    (or no Vulkan driver), the error says which devices this command can use (`choices`), not only that there
    is none."""
    from vkocr.engine.errors import VulkanUnavailable

    try:
        yield
    except VulkanUnavailable as exc:  # no driver, or no usable GPU (NoUsableDevice)
        if selector is not None or os.environ.get("VKOCR_DEVICE"):
            raise
        reason = str(exc).partition("; name a device")[0]
        raise type(exc)(f"{reason}. {choices}") from None
