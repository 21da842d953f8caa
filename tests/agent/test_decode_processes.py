"""`[experimental] decode_processes`: images decoded in processes of their own give the pixels and the errors a decode
thread gives, a process that dies costs no request, and the agent answers with them. Fresh random images; real
processes, real shared memory, a real agent on a loopback port."""

from __future__ import annotations

import io
import multiprocessing
import os
import signal
from collections.abc import Iterator

import numpy as np
import pytest
from PIL import Image

from tests.agent.agents import lot_number, running_agent, word_png
from vkocr.agent.errors import ImageError
from vkocr.agent.ocr.images import decode_image
from vkocr.agent.serving.client import OcrClient
from vkocr.agent.serving.config import load_config
from vkocr.agent.serving.decode_processes import DecodeProcesses
from vkocr.agent.serving.errors import ConfigError

BIG = 10**8


@pytest.fixture(scope="module")
def decoders() -> Iterator[DecodeProcesses]:
    pool = DecodeProcesses(2)
    yield pool
    pool.close()


def encoded(array: np.ndarray, fmt: str) -> bytes:
    out = io.BytesIO()
    Image.fromarray(array).save(out, fmt)
    return out.getvalue()


@pytest.mark.parametrize(("fmt", "channels", "rgba"), [("PNG", 3, "mask"), ("JPEG", 3, "mask"), ("PNG", 4, "mask"),
                                                       ("PNG", 4, "blend"), ("PNG", 1, "mask")])
def test_the_pixels_are_a_decode_threads(decoders: DecodeProcesses, fmt: str, channels: int, rgba: str) -> None:
    rng = np.random.default_rng()
    shape = (int(rng.integers(17, 300)), int(rng.integers(17, 300)), channels)
    data = encoded(rng.integers(0, 256, shape, dtype=np.uint8).squeeze(), fmt)
    got = decoders.decode(data, max_pixels=BIG, apply_exif=True, rgba=rgba)
    want = decode_image(data, max_pixels=BIG, apply_exif=True, rgba=rgba)
    assert got.dtype == np.uint8 and got.flags.c_contiguous and got.shape == (*shape[:2], 3)
    np.testing.assert_array_equal(got, want)


def test_the_errors_are_a_decode_threads(decoders: DecodeProcesses) -> None:
    with pytest.raises(ImageError) as corrupt:
        decoders.decode(b"\x89PNG\r\n\x1a\n" + os.urandom(64), max_pixels=BIG, apply_exif=True, rgba="mask")
    assert corrupt.value.reason == "corrupt"
    data = encoded(np.random.default_rng().integers(0, 256, (40, 50, 3), dtype=np.uint8), "PNG")
    with pytest.raises(ImageError, match="50×40 = 2,000 pixels, more than the limit of 1,999") as large:
        decoders.decode(data, max_pixels=1999, apply_exif=True, rgba="mask")
    assert large.value.reason == "too_large"


def test_a_process_that_dies_costs_no_request() -> None:
    others = {child.pid for child in multiprocessing.active_children()}
    pool = DecodeProcesses(1)
    try:
        data = encoded(np.random.default_rng().integers(0, 256, (33, 44, 3), dtype=np.uint8), "PNG")
        want = decode_image(data)
        np.testing.assert_array_equal(pool.decode(data, max_pixels=BIG, apply_exif=True, rgba="mask"), want)
        [child] = [c for c in multiprocessing.active_children() if c.pid not in others]  # the pool's one process
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)  # as the OOM killer would
        child.join(30)
        # decoded on the calling thread while the pool starts again, then in the new pool
        for _ in range(2):
            np.testing.assert_array_equal(pool.decode(data, max_pixels=BIG, apply_exif=True, rgba="mask"), want)
    finally:
        pool.close()


@pytest.mark.parametrize("bad", [-1, 65])
def test_a_count_outside_the_range_is_refused(bad: int) -> None:
    with pytest.raises(ConfigError, match=rf"decode_processes must be 0 \(decode on threads\) to 64, got {bad}"):
        load_config(None, env={}, overrides={"experimental.decode_processes": bad})


def test_the_agent_answers_with_decode_processes() -> None:
    with running_agent(**{"experimental.decode_processes": 1}) as agent:
        assert agent.agent.ocr._decoders is not None and agent.agent.ocr._decoders.count == 1
        with OcrClient(agent.target) as client:
            for i in (5, 6):
                response = client.recognize(word_png(lot_number(i)), use_det=False, use_cls=False, timeout=120)
                assert [line.text for line in response.lines] == [lot_number(i)]
