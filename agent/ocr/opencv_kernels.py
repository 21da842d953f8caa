"""The OpenCV calls that the NumPy references of the image kernels (image_reference.py) reproduce bit for bit
(tests/agent/ocr/test_image.py holds them to it): the same bytes at OpenCV's speed, for the CPU backend."""

from __future__ import annotations

import cv2
import numpy as np

from vkocr.agent.ocr.image_reference import U8


def resize_linear_u8(img: U8, out_h: int, out_w: int) -> U8:
    """image_reference.resize_linear_u8: cv2.resize INTER_LINEAR."""
    return np.asarray(cv2.resize(img, (out_w, out_h), interpolation=cv2.INTER_LINEAR), np.uint8)


def warp_perspective_cubic(img: U8, inverse: np.ndarray, w: int, h: int) -> U8:
    """image_reference.warp_perspective_cubic: warpPerspective INTER_CUBIC, BORDER_REPLICATE, given the
    inverse matrix that warpPerspective would compute itself (cv::invert of the forward one)."""
    return np.asarray(cv2.warpPerspective(img, np.asarray(inverse, np.float64), (w, h),
                                          flags=cv2.INTER_CUBIC | cv2.WARP_INVERSE_MAP,
                                          borderMode=cv2.BORDER_REPLICATE), np.uint8)
