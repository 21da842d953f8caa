"""What a pipeline opens for the lanes that drive it (agent/serving/flow.py): plain numbers, so that the agent's
configuration can say them without importing the pipeline."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LaneResources:
    """What a pipeline opens for the lanes that will drive it: a stream each (vk/streams.py), the device queues
    those streams share (a device with fewer has its streams share its own), and image slots (images held on the
    device at once)."""

    streams: int = 1
    image_slots: int = 1
    queues: int = 1
