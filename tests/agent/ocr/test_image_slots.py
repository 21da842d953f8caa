"""Several images on the device at once (GpuStages' image slots): one cls or rec batch holding crops of
different images answers, crop by crop, exactly what each image's crops answer in a batch of their own; on
lavapipe with the real PP-OCRv4 models, on fresh random images (outputs of one image's run compared with the
mixed run's, so a crop read from the wrong image or slot fails)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tests.engine.kernels.harness import fresh_rng
from vkocr.agent.ocr.gpu_stages import GpuStages
from vkocr.agent.ocr.image_kernels import Crop, line_crops
from vkocr.agent.ocr.pipeline import ppocrv4_paths
from vkocr.agent.ocr.prep import preparation
from vkocr.agent.ocr.stages import RecBatch
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError

SIZES = [(180, 260), (96, 400), (2100, 240)]  # the last one is resized on the device (a side over 2000)


@pytest.fixture(scope="module")
def stages(device: Device) -> Iterator[GpuStages]:
    paths = ppocrv4_paths()
    gpu = GpuStages(device, {role: paths[role] for role in ("cls", "rec")}, image_slots=len(SIZES))
    yield gpu
    gpu.close()


def random_crops(rng: np.random.Generator, h: int, w: int, n: int, image: int) -> list[Crop]:
    quads = []
    for _ in range(n):
        x0, y0 = rng.uniform(0, w * 0.5), rng.uniform(0, h * 0.7)
        x1, y1 = x0 + rng.uniform(20, w * 0.5), y0 + rng.uniform(8, 30)
        quads.append([[x0, y0], [x1, y0 + rng.uniform(-2, 2)], [x1, y1], [x0, y1]])
    return line_crops(np.array(quads, np.float32), 48, 320, image=image)


def load(stages: GpuStages, image: np.ndarray, slot: int) -> tuple[int, int]:
    prep = preparation(*image.shape[:2], max_side_len=2000, min_side_len=30, min_height=30,
                       width_height_ratio=-1, letterbox=True)
    stages.load(image, prep, slot)
    return prep.shape


def test_a_batch_of_several_images_crops_answers_as_each_alone(stages: GpuStages) -> None:
    rng, seed = fresh_rng()
    images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in SIZES]
    alone_cls, alone_rec, crops = [], [], []
    for slot, image in enumerate(images):
        h, w = load(stages, image, 0)  # each alone, in slot 0
        own = random_crops(rng, h, w, 2, image=0)
        alone_cls.append(stages.classify([c.fitted(48, 192) for c in own], 48, 192))
        alone_rec.append(stages.recognize([c.fitted(48, 320) for c in own], 48, 320, 6))
        crops.append([Crop(c.inverse, c.width, c.height, c.rotate90, c.rotate180, c.resized_w, slot)
                      for c in own])
    for slot, image in enumerate(images):
        load(stages, image, slot)
    mixed = [crops[k][i] for i in range(2) for k in range(len(images))]  # interleaved: a0 b0 c0 a1 b1 c1
    cls = stages.classify([c.fitted(48, 192) for c in mixed], 48, 192)
    indices, values = stages.recognize([c.fitted(48, 320) for c in mixed], 48, 320, 6)
    for n, (k, i) in enumerate((k, i) for i in range(2) for k in range(len(images))):
        where = f"crop {i} of image {k} (seed {seed})"
        np.testing.assert_allclose(cls[n], alone_cls[k][i], rtol=1e-5, atol=1e-6, err_msg=where)
        np.testing.assert_array_equal(indices[n], alone_rec[k][0][i], err_msg=where)
        np.testing.assert_allclose(values[n], alone_rec[k][1][i], rtol=1e-5, atol=1e-6, err_msg=where)


def test_a_batch_of_sixteen_crops_of_several_images_reads_as_their_own_batches_of_six(stages: GpuStages) -> None:
    """What the agent's reading lanes do (throughput.batch_lines = 16): the lines of several requests, of one width,
    in one submission, each reading as in its request's own batches of RapidOCR's six."""
    rng, seed = fresh_rng()
    images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in SIZES]
    for slot, image in enumerate(images):
        load(stages, image, slot)
    crops = [c.fitted(48, 320) for slot, image in enumerate(images)
             for c in random_crops(rng, *load(stages, image, slot), 5, image=slot)]
    assert len(crops) == 15
    indices, values = stages.recognize(crops, 48, 320, 16)  # padded to a batch of 16
    for start in range(0, len(crops), 6):
        own_indices, own_values = stages.recognize(crops[start:start + 6], 48, 320, 6)
        where = f"crops {start}.. (seed {seed})"
        np.testing.assert_array_equal(indices[start:start + 6], own_indices, err_msg=where)
        np.testing.assert_allclose(values[start:start + 6], own_values, rtol=1e-5, atol=1e-6, err_msg=where)


def test_batches_of_several_widths_in_one_submission_read_as_each_alone(stages: GpuStages) -> None:
    """recognize_many: rec batches of different widths and sizes (two of one width among them), run jointly in
    one submission (vk/graph/joint.py) and one round past it, read bit for bit as each does alone."""
    rng, seed = fresh_rng()
    stages.prepare("rec", (16, 3, 48, 640))  # as the agent's warm-up: the placement the smaller plans then reuse
    images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in SIZES]
    crops = [c for slot, image in enumerate(images) for c in random_crops(rng, *load(stages, image, slot), 4,
                                                                          image=slot)]
    shapes = [(320, 3), (352, 1), (320, 2), (416, 4), (384, 2), (320, 5)]  # (width, crops): 6 batches, 2 rounds
    batches = [RecBatch([c.fitted(48, w) for c in crops[:n]], 48, w, 6) for w, n in shapes]
    alone = [stages.recognize(*b) for b in batches]
    assert stages.joint_batches == 1  # a library call's default: one batch after another
    stages.set_joint_batches(4)  # the agent's
    before = stages.plan_stats()["rec"]["plan_memory_bytes"]
    try:
        together = stages.recognize_many(batches)
    finally:
        stages.set_joint_batches(1)
    assert stages.plan_stats()["rec"]["plan_memory_bytes"] > before  # the copies count with rec's plans
    assert len(together) == len(batches)
    for (w, n), (indices, values), (own_indices, own_values) in zip(shapes, together, alone):
        where = f"{n} crops at {w} px (seed {seed})"
        assert indices.shape[0] == n, where
        np.testing.assert_array_equal(indices, own_indices, err_msg=where)
        np.testing.assert_array_equal(values, own_values, err_msg=where)


def test_a_crop_of_an_empty_slot_or_past_the_slots_is_refused(device: Device, stages: GpuStages) -> None:
    image = fresh_rng()[0].integers(0, 256, (60, 80, 3), dtype=np.uint8)
    with pytest.raises(KernelArgumentError, match="image slot 3 outside 0..2"):
        load(stages, image, 3)
    paths = ppocrv4_paths()
    fresh = GpuStages(device, {"cls": paths["cls"]}, image_slots=2)
    try:
        load(fresh, image, 0)
        crop = random_crops(fresh_rng()[0], 60, 80, 1, image=1)
        with pytest.raises(KernelArgumentError, match="image slot 1, where no image was loaded"):
            fresh.classify([c.fitted(48, 192) for c in crop], 48, 192)
    finally:
        fresh.close()
