"""A request's second half (DESIGN.md, "One request, end to end", steps 6 and 7): classification and recognition
of the crops of every request ready to be read, in as few submissions as the stages take, then CTC and each
request's lines in its original pixels. `read` drives it and calls out to the stages and postproc, none of which
calls back. The orchestration mirrors RapidOCR step by step (its batching by aspect ratio, its crop rules, its
filters), so that our lines match its lines, whoever a line shares a batch with."""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from vkocr.agent.errors import RequestStopped
from vkocr.agent.ocr.image_kernels import Crop
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.ocr.orientation import result_in_input_frame
from vkocr.agent.ocr.plan_shapes import rec_tensor_width
from vkocr.agent.ocr.prep import Prepared
from vkocr.agent.ocr.procedures import PROCEDURES
from vkocr.agent.ocr.request_halves import Detected
from vkocr.agent.ocr.stages import RecBatch, Stages
from vkocr.postproc.ctc import CtcText, ctc_decode
from vkocr.postproc.result import CharBox, OcrLine, OcrResult
from vkocr.postproc.wordboxes import char_boxes
from vkocr.postproc.wordboxes_310 import word_boxes

RecSteps = Callable[[int, int], int]  # (height, width) → the recogniser's time steps

READ_OPTIONS: Final = tuple(f.name for f in dataclasses.fields(OcrOptions) if f.metadata.get("read"))
_read_values = operator.attrgetter(*READ_OPTIONS)


def read_key(opts: OcrOptions) -> tuple[Any, ...]:
    """What requests must share to be classified and recognised together: every option `read` uses (the fields
    marked READ in agent/ocr/options.py)."""
    return tuple(_read_values(opts))


def read(stages: Stages, requests: Sequence[Detected], charset: list[str], read_batch: int, rec_steps: RecSteps
         ) -> list[OcrResult | RequestStopped]:
    """The second half of these requests (agent/ocr/detection.py's output) on these stages (one stream's):
    classification and recognition of every crop, with the crops of all of them in as few submissions as the
    stages take, then CTC and each request's lines. Answers in request order; a request whose ``stop`` names who
    no longer wants it (asked after cls and after rec) gets RequestStopped instead. A rec submission holds at
    most `read_batch` crops (0: the requests' rec_batch); only crops of one width share one, so each line is
    read at its RapidOCR batch width exactly, whoever it shares the batch with."""
    results: list[OcrResult | RequestStopped | None] = [None] * len(requests)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, request in enumerate(requests):
        request.laps.restart(stages.wait_seconds)
        if not request.crops:
            results[i] = OcrResult(timings_ms=request.laps.timings, gpu_wait_ms=request.laps.waits)
        else:
            groups.setdefault(read_key(request.opts), []).append(i)
    for members in groups.values():
        group = [requests[i] for i in members]
        batch = read_batch or group[0].opts.rec_batch
        for i, outcome in zip(members, read_group(stages, group, charset, batch, rec_steps)):
            results[i] = outcome
    for i, request in enumerate(requests):  # a page read upright answers in its input's frame
        result = results[i]
        if request.page_angle is not None and isinstance(result, OcrResult):
            results[i] = result_in_input_frame(result, request.page_angle, *request.input_size)
    return [r for r in results if r is not None]


def ratio_batches(ratios: Sequence[float], batch: int) -> list[list[int]]:
    """Indices grouped as RapidOCR groups them: sorted by width/height ratio (np.argsort), `batch` at a time."""
    order = np.argsort(np.array(ratios, dtype=np.float64))
    return [order[i:i + batch].tolist() for i in range(0, len(order), batch)]


def crop_ratio(slot: Crop) -> float:
    """Width/height of the crop as the model sees it (after the 90° turn): RapidOCR's sort key."""
    width, height = slot.model_size
    return width / height


@dataclass
class Reading:
    """One request while it is read: its crops (turned 180° where cls says so), their angles and cls verdicts,
    their texts and the ratio each one's RapidOCR batch was padded to, and why it stopped, if it did."""

    detected: Detected
    crops: list[Crop]
    angles: list[int]
    verdicts: list[tuple[str, float]] = field(default_factory=list)
    texts: list[CtcText] | None = None
    ratios: list[float] = field(default_factory=list)
    stopped: RequestStopped | None = None

    @classmethod
    def of(cls, detected: Detected) -> Reading:
        return cls(detected, list(detected.crops), [0] * len(detected.crops))

    def lap(self, name: str) -> None:
        """Close stage `name` of this request, unless it stopped; note why it stops now, if it does."""
        if self.stopped is None:
            try:
                self.detected.laps.lap(name)
            except RequestStopped as exc:
                self.stopped = exc


def read_group(stages: Stages, group: Sequence[Detected], charset: list[str], batch: int, rec_steps: RecSteps
               ) -> list[OcrResult | RequestStopped]:
    """The second half of requests whose options read alike (read_key): each request's answer, or
    RequestStopped when it stopped after cls or a rec submission. A rec submission holds at most `batch` crops."""
    opts = group[0].opts
    readings = [Reading.of(d) for d in group]
    if opts.use_cls:
        classify(stages, readings, opts)
        for r in readings:
            r.lap("cls")
    live = [r for r in readings if r.stopped is None]
    if opts.use_rec and live:

        def wanted() -> set[int]:  # after each rec submission: which of `live` are still wanted
            for r in live:
                r.lap("rec")
            return {k for k, r in enumerate(live) if r.stopped is None}

        recognize(stages, live, opts, batch, charset, rec_steps, wanted)
    return [r.stopped if r.stopped is not None else answer(r, opts) for r in readings]


def answer(reading: Reading, opts: OcrOptions) -> OcrResult:
    """A read request's lines, in original-image pixels, with its stage times."""
    request = reading.detected
    chars: list[tuple[CharBox, ...] | None] = [None] * len(reading.crops)
    found = reading.texts
    if found is not None and opts.return_word_box and opts.use_det:
        words = PROCEDURES[opts.procedure].word_boxes == "words"
        chars = [line_chars(t, q, s, r, request.prep, words)
                 for t, q, s, r in zip(found, request.quads, reading.crops, reading.ratios)]
    result = assemble(request.prep, request.quads, reading.angles, found, chars, reading.verdicts, opts)
    request.laps.lap("postproc", last=True)  # done: an answer nobody waits for costs nothing more
    result.timings_ms, result.gpu_wait_ms = request.laps.timings, request.laps.waits
    return result


def classify(stages: Stages, readings: Sequence[Reading], opts: OcrOptions) -> None:
    """Every crop of every request through the classifier; flagged crops turn 180° (their `crops`, `angles`).
    Every crop is padded to the classifier's fixed width, so grouping cannot change a verdict: all crops go in as
    few submissions as the stage allows, instead of RapidOCR's groups of cls_batch."""
    every = [(r, k) for r in readings for k in range(len(r.crops))]
    for r in readings:
        r.verdicts = [("0", 0.0)] * len(r.crops)
    step = stages.max_batch
    for start in range(0, len(every), step):
        group = every[start:start + step]
        batch = [r.crops[k].fitted(opts.cls_height, opts.cls_width) for r, k in group]
        probs = stages.classify(batch, opts.cls_height, opts.cls_width)
        for (r, k), label, score in zip(group, probs.argmax(axis=1).tolist(), probs.max(axis=1).tolist()):
            r.verdicts[k] = (("0", "180")[label], score)
            if label == 1 and score > opts.cls_thresh:
                r.crops[k] = dataclasses.replace(r.crops[k], rotate180=True)
                r.angles[k] = 180


def recognize(stages: Stages, readings: Sequence[Reading], opts: OcrOptions, batch: int, charset: list[str],
              rec_steps: RecSteps, wanted: Callable[[], set[int]]) -> None:
    """Decoded text of every crop of every request (their `texts`), and the width/height ratio its RapidOCR
    batch was padded to (`ratios`).

    Each request's lines are grouped as RapidOCR groups them (ratio_batches of rec_batch); a group runs at
    RapidOCR's batch width rounded up to opts.rec_width_bucket, and the groups of one tensor width, of every
    request, share submissions of at most `batch` crops (the warp zero-fills the spare columns and slots; no
    line sees another): a few plans serve every batch. The crops are fitted exactly as RapidOCR fits them.
    `wanted()` is asked after each submission (and once if there is none): the requests still wanted, whose
    crops the later submissions hold (a submission with none is skipped)."""
    requests = [reading.crops for reading in readings]
    by_width: dict[int, list[tuple[int, int, int, Crop]]] = {}  # tensor width → (request, line, width, crop)
    ratios: list[list[float]] = [[0.0] * len(crops) for crops in requests]
    for r, crops in enumerate(requests):
        for group in ratio_batches([crop_ratio(c) for c in crops], opts.rec_batch):
            max_ratio = max([opts.rec_width / opts.rec_height, *(crop_ratio(crops[i]) for i in group)])
            width = int(opts.rec_height * max_ratio)  # RapidOCR's batch width, exactly
            for i in group:
                ratios[r][i] = max_ratio
                by_width.setdefault(rec_tensor_width(width, opts), []).append(
                    (r, i, width, crops[i].fitted(opts.rec_height, width)))
    # every submission first, decoded after the last (shorter idle gaps between submissions); up to
    # joint_batches of them share one (different widths side by side: vk/graph/joint.py)
    outputs = []
    live = set(range(len(requests)))
    queue = list(by_width.items())
    while queue:
        chunks: list[tuple[int, list[tuple[int, int, int, Crop]]]] = []
        while queue and len(chunks) < max(1, stages.joint_batches):
            tensor_width, pending = queue.pop(0)
            pending = [c for c in pending if c[0] in live]  # a stopped request's crops leave the rest
            if pending[batch:]:
                queue.insert(0, (tensor_width, pending[batch:]))
            if pending:
                chunks.append((tensor_width, pending[:batch]))
        if chunks:
            found = stages.recognize_many([RecBatch([c[3] for c in chunk], opts.rec_height, tensor_width, batch)
                                           for tensor_width, chunk in chunks])
            outputs += [(chunk, result) for (_, chunk), result in zip(chunks, found)]
            live = wanted()
    if not outputs:
        wanted()
    texts: list[list[CtcText]] = [[CtcText("", 0.0, (), (), 0)] * len(crops) for crops in requests]
    decimals = PROCEDURES[opts.procedure].score_decimals
    for chunk, (indices, scores) in outputs:
        for (r, i, width, _), decoded in zip(chunk, ctc_decode(indices, scores, charset, decimals)):
            # word boxes scale time steps by RapidOCR's width: its step count, not the padded tensor's
            steps = rec_steps(opts.rec_height, width) if opts.return_word_box else 0
            texts[r][i] = dataclasses.replace(decoded, steps=steps) if steps else decoded
    for reading, request_texts, request_ratios in zip(readings, texts, ratios):
        reading.texts, reading.ratios = request_texts, request_ratios


def line_chars(text: CtcText, quad: np.ndarray, slot: Crop, batch_ratio: float, prep: Prepared,
               words: bool) -> tuple[CharBox, ...]:
    """Word results in original-image pixels, truncated to integers as RapidOCR does: 3.10's (``words``)
    or 1.4.4's per-character boxes."""
    crop_w, crop_h = slot.model_size
    if words:  # 3.10 maps the line box back first and lays the cells out in original pixels
        return tuple(word_boxes(text, to_original(quad, prep), crop_w, crop_h, batch_ratio,
                                ratio_w=prep.ratio_w, ratio_h=prep.ratio_h))
    boxes = char_boxes(text, quad, crop_w, crop_h, batch_ratio)
    if not boxes:
        return ()
    mapped = to_original(np.array([b.box for b in boxes], np.float32), prep).astype(np.int32)
    return tuple(CharBox(b.text, m.astype(float).tolist(), b.score) for b, m in zip(boxes, mapped))


def assemble(prep: Prepared, quads: list[np.ndarray], angles: list[int], texts: list[CtcText] | None,
             chars: list[tuple[CharBox, ...] | None], verdicts: list[tuple[str, float]], opts: OcrOptions
             ) -> OcrResult:
    """A request's lines in original-image pixels, filtered by score as RapidOCR filters them."""
    boxes = to_original(np.stack(quads), prep) if quads else np.zeros((0, 4, 2), np.float32)
    # RapidOCR 3.10 drops lines that read as nothing but whitespace, when it detected them
    drop_blank = PROCEDURES[opts.procedure].drop_blank_text and opts.use_det
    lines = []
    for i, box in enumerate(boxes):
        if texts is None:  # detection (and classification) only: boxes without text
            score = verdicts[i][1] if verdicts else 1.0
            lines.append(OcrLine("", score, box.tolist(), angles[i]))
            continue
        text, score = texts[i].text, texts[i].score
        if drop_blank and not text.strip():
            continue
        if score >= opts.text_score:
            lines.append(OcrLine(text, score, box.tolist(), angles[i], chars[i]))
    return OcrResult(lines)


def to_original(points: np.ndarray, prep: Prepared) -> np.ndarray:
    """Points (…, 2) in prepared-image pixels → original-image pixels, clipped to the image (RapidOCR's
    _get_origin_points): the way back from the preparation (agent/ocr/prep.py)."""
    pts = np.array(points, dtype=np.float32)
    pts[..., 1] -= prep.pad_top
    pts[..., 0] *= prep.ratio_w
    pts[..., 1] *= prep.ratio_h
    pts = np.where(pts < 0, 0, pts)
    pts[..., 0] = np.minimum(pts[..., 0], prep.raw_w)
    pts[..., 1] = np.minimum(pts[..., 1], prep.raw_h)
    return pts
