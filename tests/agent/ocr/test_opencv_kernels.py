"""The CPU backend's image kernels (agent/ocr/opencv_kernels.py) give the NumPy references' bytes: the same
crops, so the same lines as the reference executor and the GPU stages."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from tests.agent.ocr.test_image import random_image, random_quads
from tests.engine.kernels.harness import fresh_rng
from vkocr.agent.ocr import image_reference, opencv_kernels
from vkocr.agent.ocr.image_reference import crop_geometry

pytestmark = pytest.mark.skipif(int(cv2.__version__.split(".")[0]) < 5,
                                reason=f"OpenCV {cv2.__version__}: the references follow OpenCV 5")


@pytest.mark.parametrize(("h", "w"), [(300, 400), (211, 317), (12, 9)])
def test_warp_with_the_inverse_map_is_the_reference(h: int, w: int) -> None:
    rng, seed = fresh_rng()
    rgb = random_image(rng, h, w)
    quads = random_quads(rng, h, w, 25) if min(h, w) > 20 else [
        np.array([[-3, -2], [10, 1], [12, 14], [-1, 11]], np.float32)]
    for q in quads:
        cw, ch, inverse = crop_geometry(q)
        ref = image_reference.warp_perspective_cubic(rgb, inverse, cw, ch)
        got = opencv_kernels.warp_perspective_cubic(rgb, inverse, cw, ch)
        np.testing.assert_array_equal(got, ref, err_msg=f"quad {q.tolist()}; seed {seed}")


@pytest.mark.parametrize(("h", "w", "out_h", "out_w"), [(323, 430, 736, 960), (48, 301, 48, 320),
                                                        (1000, 700, 500, 350), (17, 5, 48, 13), (60, 80, 48, 64)])
def test_resize_is_the_reference(h: int, w: int, out_h: int, out_w: int) -> None:
    rng, seed = fresh_rng()
    img = random_image(rng, h, w)
    np.testing.assert_array_equal(opencv_kernels.resize_linear_u8(img, out_h, out_w),
                                  image_reference.resize_linear_u8(img, out_h, out_w), err_msg=f"seed {seed}")
