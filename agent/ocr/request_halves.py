"""A request between its two halves (agent/ocr/detection.py `detect`, agent/ocr/reading.py `read`): what detection
found, and the time its stages took so far."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np

from vkocr.agent.errors import RequestStopped, StopWho
from vkocr.agent.ocr.image_kernels import Crop
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.ocr.prep import Prepared
from vkocr.agent.ocr.request import OcrRequest

StopCheck = Callable[[], StopWho | None]  # who no longer wants the answer, None while it is still wanted


class Laps:
    """A request's time per stage (ms) and, on Vulkan, the part of it the host spent waiting for the GPU: `lap`
    closes the stage that ran since the last lap. ``stop`` is asked at each lap but the last: when it names who
    no longer wants the answer, RequestStopped names the stage that just ran."""

    def __init__(self, waited: Callable[[], float], stop: StopCheck | None) -> None:
        self.timings: dict[str, float] = {}
        self.waits: dict[str, float] = {}
        self.stop = stop
        self.restart(waited)

    def restart(self, waited: Callable[[], float]) -> None:
        """Time from now on, with the wait clock of the stream that runs the next stages."""
        self._waited = waited
        self._clock, self._wait = time.perf_counter(), waited()

    def lap(self, name: str, *, last: bool = False) -> None:
        now, wait = time.perf_counter(), self._waited()
        self.timings[name] = self.timings.get(name, 0.0) + (now - self._clock) * 1e3
        self.waits[name] = self.waits.get(name, 0.0) + (wait - self._wait) * 1e3
        self._clock, self._wait = now, wait
        if not last and self.stop is not None and (who := self.stop()) is not None:
            raise RequestStopped(who, name)


@dataclasses.dataclass
class Detected:
    """One request between `detect` and `read`: the request, the quads DB found (in reading order) and their
    crops, each naming the image slot it is cut from (which must hold the image until `read` has run), and its
    stage times so far. A page the orientation stage turned upright is read as `request` (the page upright);
    `page_angle` and `input_size` (height, width) map its answer back into the input image's frame."""

    request: OcrRequest
    quads: list[np.ndarray]
    crops: list[Crop]
    laps: Laps
    page_angle: int | None = None  # None: the orientation stage did not run
    input_size: tuple[int, int] = (0, 0)

    @property
    def opts(self) -> OcrOptions:
        return self.request.options

    @property
    def prep(self) -> Prepared:
        return self.request.geometry.prep
