"""What the end-to-end agent tests share: word images rendered here, and real agents on loopback ports."""

from __future__ import annotations

import io
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.serving.background import BackgroundAgent, start_agent
from vkocr.agent.serving.config import load_config
from vkocr.agent.serving.jobs import Job
from vkocr.v1 import ocr_pb2

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"  # fonts-dejavu-core, installed by ./test.sh

# Recognition only: the whole image is one line. 48×320 is the smallest input the recogniser takes, so these are
# the cheapest real requests on lavapipe (about 0.4 s each).
REC_ONLY = ocr_pb2.Options(use_det=False, use_cls=False)


def frame(request: ocr_pb2.RecognizeRequest) -> ocr_pb2.RecognizeStreamRequest:
    """One RecognizeStream frame carrying `request`."""
    return ocr_pb2.RecognizeStreamRequest(request=request)


def word_pixels(text: str, size: int = 28) -> np.ndarray:
    """Black text on white, one line, tightly framed (H×W×3 uint8)."""
    font = ImageFont.truetype(FONT, size)
    image = Image.new("RGB", (24 + int(size * 0.62) * len(text), size + 12), "white")
    ImageDraw.Draw(image).text((12, 4), text, fill="black", font=font)
    return np.asarray(image)


def word_png(text: str, size: int = 28) -> bytes:
    out = io.BytesIO()
    Image.fromarray(word_pixels(text, size)).save(out, format="PNG")
    return out.getvalue()


def white_png(width: int, height: int) -> bytes:
    """A blank page of that size, PNG-encoded: a request whose cost is its size alone."""
    out = io.BytesIO()
    Image.fromarray(np.full((height, width, 3), 255, np.uint8)).save(out, format="PNG")
    return out.getvalue()


def free_port() -> int:
    """A port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def lot_number(i: int) -> str:
    """Distinct, reliably recognised words: LOT0000, LOT0001, …"""
    return f"LOT{i:04d}"


def rec_job(pipeline: OcrPipeline, i: int, kind: type[Job] = Job) -> Job:
    """A worker job that reads lot_number(i) from its word image, recognition only (no det, no cls)."""
    options = pipeline.options.replace(use_det=False, use_cls=False)
    return kind(f"job-{i}", pipeline.request(word_pixels(lot_number(i)), options, decoded=True))


def agent_config(**overrides: Any) -> Any:
    """A loopback agent on a free port; `overrides` as {"server.queue_size": 1, ...}. No plans are recorded
    before serving unless `plans.warm_shapes` is given: the default sizes take seconds on lavapipe, for det and
    cls plans that most tests (recognition only) never use. The device is lavapipe, named (never chosen
    automatically), unless `device.select` says otherwise. The models are ppocrv4's, not the default set's,
    unless `models.set` says otherwise: the tests' words read the same with both, and ppocrv4 runs in half the
    time on lavapipe (its recogniser has 6,625 classes, ppocrv6-small's 18,710)."""
    return load_config(None, env={}, overrides={"server.listen": "127.0.0.1:0", "logging.json": True,
                                                "plans.warm_shapes": [], "device.select": "llvmpipe",
                                                "models.set": "ppocrv4", **overrides})


@contextmanager
def running_agent(**overrides: Any) -> Iterator[BackgroundAgent]:
    background = start_agent(agent_config(**overrides))
    try:
        yield background
    finally:
        background.stop(5)


def wait_for(condition: Callable[[], object], timeout: float = 60.0) -> None:
    """Poll `condition` until it holds; fail the test when it still does not after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert condition(), "condition not reached"
