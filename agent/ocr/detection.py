"""A request's first half (DESIGN.md, "One request, end to end", steps 3 to 5): the page upright when asked, its
image into an image slot, detection, DB's boxes (agent/postproc, as RapidOCR calls them) and their crops. One
function drives it and calls out to the stages, the orientation and postproc, none of which calls back; the
crops come back as `Detected`, for agent/ocr/reading.py to classify and recognise, alone or with other
requests'. The orchestration mirrors RapidOCR step by step, so that our boxes are its boxes."""

from __future__ import annotations

import numpy as np

from vkocr.agent.ocr.image_kernels import Crop, line_crops
from vkocr.agent.ocr.orientation import UPRIGHT_TURNS, page_probabilities, turned_upright
from vkocr.agent.ocr.procedures import PROCEDURES
from vkocr.agent.ocr.request import OcrRequest
from vkocr.agent.ocr.request_halves import Detected, Laps, StopCheck
from vkocr.agent.ocr.stages import Stages
from vkocr.postproc.db import db_boxes
from vkocr.postproc.order import sort_boxes, sort_boxes_in_lines


def whole_image_quad(h: int, w: int) -> np.ndarray:
    """The quad that samples the whole image unchanged (the line of a request without detection)."""
    return np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float32)


def detect(stages: Stages, request: OcrRequest, *, stop: StopCheck | None = None, slot: int = 0) -> Detected:
    """A request's first half on these stages (one stream's): its image into image slot `slot`, detection and
    DB's boxes, in reading order, and their crops. ``stop`` is asked after each stage (RequestStopped when it
    names who no longer wants the answer); it is kept for the read."""
    laps = Laps(stages.wait_seconds, stop)
    source, angle = request.image, None
    if request.options.use_doc_orientation:  # the page upright before anything reads it
        request, angle = turned_upright(request, page_probabilities(stages.orient, source))
        laps.lap("ori")
    opts, geometry = request.options, request.geometry
    stages.load(source, geometry.prep, slot, UPRIGHT_TURNS[angle or 0])
    laps.lap("decode")
    h, w = geometry.prep.shape
    if not opts.use_det:
        quads = [whole_image_quad(h, w)]
        crops = [Crop(np.eye(3), w, h, False, False, 1, slot)]  # RapidOCR passes the image itself on
    elif not geometry.detects:
        quads, crops = [], []
    else:
        det_h, det_w = geometry.det_size
        prob = stages.detect(det_h, det_w, opts.thresh, opts.use_dilation)
        laps.lap("det")
        boxes, _scores = db_boxes(prob, w, h, thresh=opts.thresh, box_thresh=opts.box_thresh,
                                  max_candidates=opts.max_candidates, unclip_ratio=opts.unclip_ratio,
                                  use_dilation=opts.use_dilation, score_mode=opts.score_mode,
                                  bitmap=stages.db_bitmap(), row_spans=stages.db_row_spans())
        laps.lap("db")
        order = sort_boxes_in_lines if PROCEDURES[opts.procedure].box_order == "lines" else sort_boxes
        quads = [np.asarray(b, np.float32) for b in order(list(boxes))]
        crops = line_crops(np.stack(quads), opts.rec_height, 10**6, slot) if quads else []
    return Detected(request, quads, crops, laps, angle, (source.shape[0], source.shape[1]))
