"""How requests flow through the device, as the configuration says it (agent/serving/config.py) and the flow reads
it (agent/serving/flow.py): the lanes and the batching. Plain numbers: loading the configuration imports no
pipeline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only named in annotations: the pipeline is the runtime's, not the configuration's
    from vkocr.agent.ocr.pipeline import OcrPipeline


@dataclass(frozen=True)
class FlowSettings:
    """server.detect_lanes, read_lanes, batch_requests, batch_wait_ms, batch_lines and overlap (config.py): what
    the flow reads (agent/serving/flow.py)."""

    detect_lanes: int = 1
    read_lanes: int = 1
    batch_requests: int = 8
    batch_wait_s: float = 0.002
    batch_lines: int = 16
    overlap: bool = True

    @property
    def lanes(self) -> tuple[int, int]:
        """(detection, reading) lanes as they run on a GPU: one lane for both halves with the overlap off."""
        return (self.detect_lanes, self.read_lanes) if self.overlap else (1, 0)

    def shape(self, pipeline: OcrPipeline) -> None:
        """Tell the pipeline which of its streams detect and which read, and how many lines a read batches: the
        GPU's plans answer a line alike in any batch size (tests/agent/ocr/test_image_slots.py); onnxruntime keeps the
        model set's own rec_batch."""
        pipeline.read_batch = self.batch_lines if pipeline.device is not None else 0
        pipeline.stages.set_lanes(*self.lanes_for(pipeline))

    def lanes_for(self, pipeline: OcrPipeline) -> tuple[int, int]:
        """(detection, reading) lanes for this pipeline: off the GPU one lane for both halves (onnxruntime already
        runs each model on every core; two at once only contend for them)."""
        return self.lanes if pipeline.device is not None else (1, 0)
