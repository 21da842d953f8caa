"""The shapes the pipeline asks plans for: rec widths rounded to the bucket, the shapes recorded at warm-up,
and the option's range (no device: arithmetic only)."""

from __future__ import annotations

import pytest

from vkocr.agent.errors import OptionsError
from vkocr.agent.ocr.options import MAX_REC_WIDTH_BUCKET, OcrOptions
from vkocr.agent.ocr.plan_shapes import REC_RESERVE_WIDTH, rec_tensor_width, rec_warm_shapes, warm_plan_shapes


@pytest.mark.parametrize(("width", "bucket", "expected"), [(320, 1, 320), (333, 1, 333), (333, 32, 352),
                                                           (352, 32, 352), (353, 32, 384), (321, 8, 328)])
def test_rec_widths_round_up_to_the_bucket(width: int, bucket: int, expected: int) -> None:
    assert rec_tensor_width(width, OcrOptions(rec_width_bucket=bucket)) == expected


def test_without_buckets_warm_up_records_the_narrowest_batch_at_every_batch_size_after_the_reserve() -> None:
    shapes = rec_warm_shapes(OcrOptions())
    assert shapes[0] == (6, 3, 48, REC_RESERVE_WIDTH), "the widest first: the shared memory is sized once"
    assert shapes[1:] == [(b, 3, 48, 320) for b in (1, 2, 4, 6)]


def test_with_buckets_warm_up_records_every_bucket() -> None:
    shapes = rec_warm_shapes(OcrOptions(rec_width_bucket=64))
    widths = sorted({s[3] for s in shapes[1:]})
    assert widths[0] == 320 and all(b - a == 64 for a, b in zip(widths, widths[1:], strict=False))
    assert {s[0] for s in shapes} == {1, 2, 4, 6}


def test_warm_plan_shapes_name_each_det_shape_once() -> None:
    shapes = warm_plan_shapes([(1920, 1080), (1920, 1080), (640, 480)], OcrOptions(), max_batch=8)
    det = [s for role, s in shapes if role == "det"]
    assert det == [(1, 3, 1088, 1920), (1, 3, 736, 992)]
    assert [s for role, s in shapes if role == "cls"] == [(b, 3, 48, 192) for b in (1, 2, 4, 8)]


@pytest.mark.parametrize("bucket", [0, -1, MAX_REC_WIDTH_BUCKET + 1])
def test_the_bucket_has_a_range(bucket: int) -> None:
    with pytest.raises(OptionsError, match="rec_width_bucket"):
        OcrOptions().replace(rec_width_bucket=bucket)


def test_the_det_reserve_is_the_largest_input_resizing_makes() -> None:
    from vkocr.agent.ocr.plan_shapes import reserve_shapes

    # 2000 × 250, the widest image before a letterbox, scaled to 736 high
    assert reserve_shapes(OcrOptions()) == [("det", (1, 3, 736, 5888))]
    assert reserve_shapes(OcrOptions(use_det=False)) == []
