"""Requests are read together only when every option `read` uses is equal (read_key): each such option must be
marked READ on OcrOptions, or requests with different values would share a batch, silently. Here `read` runs on
stand-in stages with options that watch which of their fields are read."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from vkocr.agent.ocr.image_kernels import Crop, line_crops
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.ocr.reading import READ_OPTIONS, read_key
from vkocr.agent.ocr.request import OcrRequest
from vkocr.agent.ocr.request_halves import Detected, Laps
from vkocr.agent.ocr.stages import NoPlanStages
from vkocr.postproc.registry import PluginChain


class Watched:
    """OcrOptions that note the name of every field read from them."""

    def __init__(self, opts: OcrOptions) -> None:
        self._opts, self.seen = opts, set[str]()

    def __getattr__(self, name: str) -> Any:
        self.seen.add(name)
        return getattr(self._opts, name)


class ReadOnlyStages(NoPlanStages):
    """Stages that classify every crop as upside down and read "ab" from it."""

    backend = "stand-in"
    max_batch = 64

    def classify(self, crops: Sequence[Crop], height: int, width: int) -> np.ndarray:
        return np.tile(np.array([[0.05, 0.95]], np.float32), (len(crops), 1))

    def recognize(self, crops: Sequence[Crop], height: int, width: int, batch: int = 0
                  ) -> tuple[np.ndarray, np.ndarray]:
        steps = width // 8
        indices = np.zeros((len(crops), steps), np.int32)
        indices[:, 1], indices[:, 3] = 1, 2
        return indices, np.full((len(crops), steps), 0.99, np.float32)

    def rec_output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        return (input_shape[0], input_shape[3] // 8, 3)

    def close(self) -> None:
        pass


def test_every_option_read_uses_is_marked_read() -> None:
    for procedure in ("rapidocr-1.4.4", "rapidocr-3.10"):
        opts = OcrOptions(procedure=procedure, return_word_box=True)
        pipeline = OcrPipeline(ReadOnlyStages(), ["blank", "a", "b"], opts)  # type: ignore[arg-type]
        image = np.zeros((64, 256, 3), np.uint8)
        request = OcrRequest.of(image, opts, PluginChain(()))
        quads = [np.array([[10, 10], [200, 10], [200, 40], [10, 40]], np.float32)]
        watched = Watched(opts)
        detected = Detected(dataclasses.replace(request, options=watched), quads,  # type: ignore[arg-type]
                            line_crops(np.stack(quads), opts.rec_height, 10**6, 0), Laps(lambda: 0.0, None))
        (result,) = pipeline.read([detected])
        assert not isinstance(result, BaseException) and [line.text for line in result.lines] == ["ab"]
        assert watched.seen <= set(READ_OPTIONS), f"read uses {sorted(watched.seen - set(READ_OPTIONS))} unmarked"


def test_requests_whose_read_options_differ_are_not_read_together() -> None:
    base = OcrOptions()
    assert read_key(base) == read_key(base.replace(thresh=0.5, limit_side_len=960))  # det's own
    for name in READ_OPTIONS:
        value = getattr(base, name)
        other = (not value if isinstance(value, bool) else "rapidocr-3.10" if name == "procedure"
                 else value / 2 if isinstance(value, float) else value + 1)
        assert read_key(base) != read_key(base.replace(**{name: other})), name
