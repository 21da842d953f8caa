"""db_boxes against RapidOCR's DBPostProcess on real detector outputs: the det model run with onnxruntime on
images of RapidOCR's own test set, preprocessed by RapidOCR's DetPreProcess (resize so the short side is 736,
sides multiples of 32, RGB→BGR as its LoadImage gives, /255, mean 0.5, std 0.5, CHW)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.paths import COMPAT, MODELS
from tests.postproc.reference import iou, rapid_db
from vkocr.postproc.db import db_boxes

IMAGES = ["ch_en_num.jpg", "text_vertical_words.png", "black_font_color_transparent.png", "issue_170.png"]
VARIANTS: list[dict[str, Any]] = [{}, {"box_thresh": 0.3, "unclip_ratio": 2.0}, {"thresh": 0.2, "score_mode": "slow"}]

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def prob_maps() -> dict[str, tuple[np.ndarray, int, int]]:
    ort = pytest.importorskip("onnxruntime")
    from rapidocr_onnxruntime.ch_ppocr_det.utils import DetPreProcess
    from rapidocr_onnxruntime.utils import LoadImage

    model = MODELS / "ch_PP-OCRv4_det_infer.onnx"
    if not model.is_file():
        pytest.skip(f"{model} is absent")
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    maps = {}
    for name in IMAGES:
        image = LoadImage()(str(COMPAT / "images" / name))
        x = DetPreProcess(736, "min", [0.5, 0.5, 0.5], [0.5, 0.5, 0.5])(image)
        prob = session.run(None, {session.get_inputs()[0].name: x})[0][0, 0]
        maps[name] = (prob, image.shape[1], image.shape[0])
    return maps


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "defaults")
@pytest.mark.parametrize("name", IMAGES)
def test_matches_rapidocr_on_detector_output(
    prob_maps: dict[str, tuple[np.ndarray, int, int]], name: str, variant: dict[str, Any]
) -> None:
    prob, w, h = prob_maps[name]
    ref, _ = rapid_db(prob, w, h, **variant)
    ours, _ = db_boxes(prob, w, h, **variant)
    assert len(ours) == len(ref) > 0
    ious = [iou(a, b) for a, b in zip(ours, ref, strict=True)]
    identical = sum(np.array_equal(a, b) for a, b in zip(ours, ref, strict=True))
    print(f"{name} {variant}: {len(ours)} boxes, IoU min {min(ious):.4f}, bit-identical {identical}/{len(ref)}")
    assert min(ious) >= 0.95
