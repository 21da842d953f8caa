"""One OCR request, built once at admission (DESIGN.md, "One request, end to end"): its options, its plugin chain,
its decoded image and that image's geometry under those options. Nothing downstream works the geometry out again:
the request limits (agent/serving/admission.py), the warm-up's plan shapes (plan_shapes.py) and the pipeline
(pipeline.py) all read `RequestGeometry`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vkocr.agent.ocr.image_reference import det_input_size
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.ocr.prep import Prepared, preparation
from vkocr.postproc.registry import PluginChain


@dataclass(frozen=True)
class RequestGeometry:
    """What a height x width image becomes under a request's options: its preparation (RapidOCR's resizes and
    letterbox) and the detection input size ((0, 0) without detection, or when RapidOCR would detect nothing)."""

    prep: Prepared
    det_size: tuple[int, int]

    @classmethod
    def of(cls, height: int, width: int, opts: OcrOptions) -> RequestGeometry:
        """The geometry of a height x width image (ImageError when a resize would leave a side of 0)."""
        prep = preparation(height, width, max_side_len=opts.max_side_len, min_side_len=opts.min_side_len,
                           min_height=opts.min_height, width_height_ratio=opts.width_height_ratio,
                           letterbox=opts.use_det)
        det_size = det_input_size(*prep.shape, opts.limit_side_len, opts.limit_type) if opts.use_det else (0, 0)
        return cls(prep, det_size)

    @property
    def detects(self) -> bool:
        """Whether detection runs on a map of at least one pixel."""
        return self.det_size[0] > 0 and self.det_size[1] > 0

    @property
    def largest(self) -> tuple[int, int]:
        """(height, width) of the largest image the request makes: each resize, its letterbox, the det input."""
        sizes = list(self.prep.sizes)
        if self.prep.pad_top:
            sizes.append(self.prep.shape)
        if self.det_size != (0, 0):
            sizes.append(self.det_size)
        return max(sizes, key=lambda s: s[0] * s[1], default=(0, 0))


@dataclass(frozen=True)
class OcrRequest:
    """A request ready to run: options checked against their ranges, the plugin chain they ask for, the decoded
    image (H×W×3 uint8 RGB) and its geometry."""

    options: OcrOptions
    chain: PluginChain
    image: np.ndarray
    geometry: RequestGeometry

    @classmethod
    def of(cls, image: np.ndarray, options: OcrOptions, chain: PluginChain) -> OcrRequest:
        return cls(options, chain, image, RequestGeometry.of(image.shape[0], image.shape[1], options))
