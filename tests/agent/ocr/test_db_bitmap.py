"""db_bitmap.comp against RapidOCR's own threshold and cv2.dilate on fresh random maps (output poisoned), and DB's
boxes from that bitmap against DB's boxes from the map itself (RapidOCR's procedure)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from tests.engine.kernels.harness import fresh_rng, poisoned, release, run
from vkocr.agent.ocr.db_bitmap import DB_BITMAP_PARAMS_WORDS, db_bitmap_params, record_db_bitmap, record_db_rows
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.postproc.db import DILATION_KERNEL, db_boxes


def random_map(rng: np.random.Generator, h: int, w: int, thresh: float) -> np.ndarray:
    """Blobs of high probability on low noise, with some pixels exactly at float32(thresh) and just above it
    (where a float64 comparison, or >=, would differ)."""
    prob = rng.uniform(0.0, 0.25, (h, w)).astype(np.float32)
    for _ in range(max(1, h * w // 400)):
        y, x = int(rng.integers(0, h)), int(rng.integers(0, w))
        prob[y:y + int(rng.integers(1, 8)), x:x + int(rng.integers(1, 30))] = rng.uniform(0.3, 1.0)
    edge = rng.random((h, w)) < 0.02
    prob[edge] = np.float32(thresh)
    prob[rng.random((h, w)) < 0.01] = np.nextafter(np.float32(thresh), np.float32(1))
    return prob


def gpu_bitmap(device: Device, prob: np.ndarray, thresh: float, dilate: bool) -> np.ndarray:
    h, w = prob.shape
    x = device.upload(prob.reshape(1, 1, h, w))
    params = device.upload(db_bitmap_params(thresh, dilate))
    out = poisoned(device, (h * w // 4,), np.int32)  # -1, every byte 0xff: a word left unwritten shows
    run(device, lambda rec: record_db_bitmap(rec, x, params, out.view))
    bitmap = device.download(out).view(np.uint8).reshape(h, w)
    release(device, x, params, out)
    return bitmap


@pytest.mark.parametrize(("h", "w"), [(1, 4), (2, 8), (7, 12), (64, 96), (97, 320), (736, 32)])
@pytest.mark.parametrize("dilate", [True, False])
def test_bitmap_is_rapidocrs_threshold_and_dilation(device: Device, h: int, w: int, dilate: bool) -> None:
    rng, seed = fresh_rng()
    thresh = float(rng.choice([0.3, 0.2, 0.55]))
    prob = random_map(rng, h, w, thresh)
    expected = (prob > thresh).astype(np.uint8)  # RapidOCR: segmentation = pred > self.thresh
    if dilate:
        expected = cv2.dilate(expected, DILATION_KERNEL)
    got = gpu_bitmap(device, prob, thresh, dilate)
    assert np.array_equal(got, expected), f"{h}x{w} dilate={dilate} thresh={thresh}: " \
        f"{int((got != expected).sum())} pixels differ; seed {seed}"


def test_boxes_from_the_bitmap_are_the_boxes_from_the_map(device: Device) -> None:
    rng, seed = fresh_rng()
    for dilate in (True, False):
        prob = random_map(rng, 320, 480, 0.3)
        bitmap = gpu_bitmap(device, prob, 0.3, dilate)
        bitmap.flags.writeable = False  # as the readback mapping is handed over
        ours, our_scores = db_boxes(prob, 960, 640, use_dilation=dilate, bitmap=bitmap)
        ref, ref_scores = db_boxes(prob, 960, 640, use_dilation=dilate)
        assert len(ref) > 3, "the map should hold boxes"
        assert np.array_equal(ours, ref) and our_scores == ref_scores, f"dilate={dilate}; seed {seed}"


def gpu_row_spans(device: Device, bitmap: np.ndarray) -> np.ndarray:
    """db_rows.comp's spans of an H×W uint8 bitmap, the output poisoned first (-1: a row left unwritten shows)."""
    h, w = bitmap.shape
    x = device.upload(np.ascontiguousarray(bitmap).reshape(-1).view(np.uint32))
    out = poisoned(device, (2 * h,), np.int32)
    run(device, lambda rec: record_db_rows(rec, x.view, h, w, out.view))
    spans = device.download(out).view(np.uint32).reshape(h, 2)
    release(device, x, out)
    return spans


def numpy_row_spans(bitmap: np.ndarray) -> np.ndarray:
    """db_rows.comp's spans: per row the first and one past the last column of its non-zero 4-pixel words."""
    h, w = bitmap.shape
    words = bitmap.reshape(h, w // 4, 4).any(axis=2)
    spans = np.zeros((h, 2), np.uint32)
    spans[:, 0] = w
    for y in np.flatnonzero(words.any(axis=1)):
        on = np.flatnonzero(words[y])
        spans[y] = 4 * on[0], 4 * (on[-1] + 1)
    return spans


@pytest.mark.parametrize(("h", "w"), [(1, 4), (3, 8), (37, 1000), (200, 2048), (70000, 4)])
def test_row_spans_are_the_rows_set_words(device: Device, h: int, w: int) -> None:
    """Sparse and dense rows, pixels in a row's first or last word only, empty rows, and more rows than one
    dispatch axis holds (70000: the grid folds)."""
    rng, seed = fresh_rng()
    bitmap = (rng.random((h, w)) < rng.choice([0.001, 0.02, 0.5])).astype(np.uint8)
    bitmap[rng.random(h) < 0.3] = 0
    edge = rng.random(h) < 0.1
    bitmap[edge] = 0
    bitmap[edge, rng.choice([0, w - 1])] = 1
    got = gpu_row_spans(device, bitmap)
    expected = numpy_row_spans(bitmap)
    differ = int((got != expected).any(axis=1).sum())
    assert np.array_equal(got, expected), f"{h}x{w}: {differ} rows differ; seed {seed}"


def test_boxes_from_the_bitmap_and_its_spans_are_the_boxes_from_the_map(device: Device) -> None:
    rng, seed = fresh_rng()
    prob = random_map(rng, 416, 640, 0.3)
    prob[::3] = 0.0  # empty rows between the blobs' rows: many bands
    bitmap = gpu_bitmap(device, prob, 0.3, True)
    spans = gpu_row_spans(device, bitmap)
    ours, our_scores = db_boxes(prob, 960, 640, bitmap=bitmap, row_spans=spans)
    ref, ref_scores = db_boxes(prob, 960, 640)
    assert len(ref) > 3, "the map should hold boxes"
    assert np.array_equal(ours, ref) and our_scores == ref_scores, f"seed {seed}"


def test_bad_arguments(device: Device) -> None:
    x = device.upload(np.zeros((1, 1, 4, 6), np.float32))
    params = device.upload(np.zeros(DB_BITMAP_PARAMS_WORDS, np.uint32))
    out = device.upload(np.zeros(64, np.uint32))
    with pytest.raises(KernelArgumentError, match="multiple of 4"):
        run(device, lambda rec: record_db_bitmap(rec, x, params, out.view))
    release(device, x, params, out)
    with pytest.raises(ValueError, match="bitmap of shape"):
        db_boxes(np.zeros((8, 8), np.float32), 8, 8, bitmap=np.zeros((8, 4), np.uint8))
    with pytest.raises(ValueError, match="row spans of shape"):
        db_boxes(np.zeros((8, 8), np.float32), 8, 8, bitmap=np.zeros((8, 8), np.uint8),
                 row_spans=np.zeros((7, 2), np.uint32))
    bitmap, spans = device.upload(np.zeros(16, np.uint32)), device.upload(np.zeros(8, np.uint32))
    with pytest.raises(KernelArgumentError, match="4-pixel words"):
        run(device, lambda rec: record_db_rows(rec, bitmap.view, 4, 6, spans.view))
    with pytest.raises(KernelArgumentError, match="spans of 8 rows"):
        run(device, lambda rec: record_db_rows(rec, bitmap.view, 8, 8, spans.view))
    release(device, bitmap, spans)
