"""The plan shapes a warm-up records or learns before a pipeline serves (agent/serving/plans.py), worked out as the
request path works them out: det for each image size, cls for every batch size it rounds to, rec for the common
line widths at every batch size `read` rounds to, and the shapes whose memory is reserved first."""

from __future__ import annotations

import math
from collections.abc import Sequence

from vkocr.agent.ocr.image_kernels import padded_batch
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.ocr.orientation import INPUT_SIZE as ORIENTATION_INPUT
from vkocr.agent.ocr.request import RequestGeometry


def warm_plan_shapes(image_sizes: Sequence[tuple[int, int]], opts: OcrOptions, max_batch: int, read_batch: int = 0
                     ) -> list[tuple[str, tuple[int, ...]]]:
    """(role, input shape) of the plans a request on images of these (width, height) sizes is likely to need,
    for recording before the first request: det for each size as the request path computes it, cls for every
    batch size it rounds to, rec for the common line widths at every batch size `read` rounds to (`read_batch`:
    its cap, 0 for rec_batch)."""
    shapes: list[tuple[str, tuple[int, ...]]] = []
    if opts.use_doc_orientation:  # the page orientation model, and det on pages it turns a quarter
        shapes.append(("ori", (1, 3, ORIENTATION_INPUT, ORIENTATION_INPUT)))
        image_sizes = [*image_sizes, *((h, w) for w, h in image_sizes)]
    for w, h in image_sizes:
        geometry = RequestGeometry.of(h, w, opts)
        det = ("det", (1, 3, *geometry.det_size))
        if geometry.detects and det not in shapes:
            shapes.append(det)
    if opts.use_cls:
        batch = 1
        while batch <= max_batch:
            shapes.append(("cls", (batch, 3, opts.cls_height, opts.cls_width)))
            batch *= 2
    if opts.use_rec:
        shapes += [("rec", shape) for shape in rec_warm_shapes(opts, read_batch)]
    return shapes


def reserve_shapes(opts: OcrOptions) -> list[tuple[str, tuple[int, ...]]]:
    """(role, input shape) whose memory a warm-up reserves without recording a plan: det's largest input (the
    longest side allowed, at the widest aspect before a letterbox, resized as a request would be), so that the
    det plans' shared memory is sized once: a region that grows later drops every plan recorded before it."""
    if not opts.use_det:
        return []
    w = opts.max_side_len
    h = max(1, math.ceil(w / opts.width_height_ratio))
    geometry = RequestGeometry.of(h, w, opts)
    return [("det", (1, 3, *geometry.det_size))] if geometry.detects else []


REC_WARM_MAX_WIDTH = 960  # px at rec_height 48: a line 20 times as wide as it is tall
REC_RESERVE_WIDTH = 1600  # the widest rec batch recorded at warm-up: its memory serves every narrower one


def rec_tensor_width(width: int, opts: OcrOptions) -> int:
    """The rec input width of a batch RapidOCR runs at `width`: rounded up to the bucket."""
    return -(-width // opts.rec_width_bucket) * opts.rec_width_bucket


def rec_warm_shapes(opts: OcrOptions, read_batch: int = 0) -> list[tuple[int, ...]]:
    """The rec input shapes most lines land in, at every batch size the GPU stages round to: RapidOCR's
    narrowest batch width (most lines), and with width buckets every bucket up to REC_WARM_MAX_WIDTH; first a
    full batch at REC_RESERVE_WIDTH, so that the plans' shared memory rarely grows (growing re-records them)."""
    first = rec_tensor_width(opts.rec_width, opts)
    widths = [first] if opts.rec_width_bucket == 1 else range(first, max(first, REC_WARM_MAX_WIDTH) + 1,
                                                              opts.rec_width_bucket)
    sizes = rec_batch_sizes(opts, read_batch)
    reserve = (max(sizes), 3, opts.rec_height, rec_tensor_width(max(first, REC_RESERVE_WIDTH), opts))
    return [reserve, *((batch, 3, opts.rec_height, w) for w in widths for batch in sizes)]


def rec_batch_sizes(opts: OcrOptions, read_batch: int = 0) -> list[int]:
    """The rec batch sizes the GPU stages round lines to: powers of two up to `read_batch` (the most crops of
    one submission in `read`; 0: rec_batch), and the cap itself."""
    cap = read_batch or opts.rec_batch
    return sorted({padded_batch(n, cap) for n in range(1, cap + 1)})


REC_CLASS_STEP = 8  # px between the rec widths whose shape classes a warm-up learns


def rec_class_shapes(opts: OcrOptions, read_batch: int = 0) -> list[tuple[int, ...]]:
    """Rec shapes across the width range at every batch size, for a warm-up to learn their shape classes
    (vk/graph/shape_classes.py; no plan is recorded): a rec model's classes split along the width where a GEMM
    changes tile, about ten per batch size, and a line width the warm-up did not learn would trace on the request
    path."""
    first = rec_tensor_width(opts.rec_width, opts)
    last = rec_tensor_width(max(first, REC_RESERVE_WIDTH), opts)
    step = max(REC_CLASS_STEP, opts.rec_width_bucket)
    return [(batch, 3, opts.rec_height, rec_tensor_width(w, opts)) for batch in rec_batch_sizes(opts, read_batch)
            for w in range(first, last + 1, step)]
