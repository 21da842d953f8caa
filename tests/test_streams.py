"""Streams (vk/streams.py): several threads record and submit on one device at once, each on its own stream, and
get what one thread alone gets; a model on another stream shares its weights and nothing else. Real Vulkan
(lavapipe, named: its one queue is shared by every stream), a real model (the classifier), fresh random inputs."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest

from vkocr.agent.ocr.pipeline import ppocrv4_paths
from vkocr.engine.device import Device
from vkocr.engine.errors import ModelError
from vkocr.engine.graph.model import Model
from vkocr.engine.streams import BusyClock

SHAPE = (2, 3, 48, 192)


@pytest.fixture(scope="module")
def device() -> Iterator[Device]:
    with Device("llvmpipe", queues=4) as dev:
        yield dev


def test_streams_beyond_the_family_share_its_queues(device: Device) -> None:
    assert device.queue_count == 1  # lavapipe's compute family has one queue
    streams = [device.stream(i) for i in range(3)]
    assert device.default_stream is streams[0] and [s.index for s in streams] == [0, 1, 2]
    assert len({id(s.queue_lock) for s in streams}) == 1 and len({id(s.pool_lock) for s in streams}) == 3
    assert device.stream(1) is streams[1]  # made once


def test_threads_on_their_own_streams_get_what_one_thread_gets(device: Device) -> None:
    rng = np.random.default_rng()
    model = Model.load(ppocrv4_paths()["cls"], device)
    sibling = model.on_stream(device.stream(1))
    try:
        assert sibling._weights is model._weights and sibling.shared is not model.shared
        inputs = [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(4)]
        alone = [model.run(x) for x in inputs]
        got: dict[tuple[int, int], np.ndarray] = {}

        def run(which: Model, k: int) -> None:
            for i in range(len(inputs)):  # each thread its own order: the two interleave differently
                j = (i + k) % len(inputs)
                got[(k, j)] = which.run(inputs[j])

        threads = [threading.Thread(target=run, args=(m, k)) for k, m in enumerate((model, sibling))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for (_, j), out in got.items():
            np.testing.assert_array_equal(out, alone[j])
        assert len(got) == 2 * len(inputs)
        assert model.plan_count == sibling.plan_count == 1  # each stream its own plan of the shape
    finally:
        sibling.close()
        model.close()
    with pytest.raises(ModelError, match="a stream of the model's own device"):
        Model.load(ppocrv4_paths()["cls"], None).on_stream(device.stream(0))


def test_busy_time_counts_overlapping_spans_once() -> None:
    clock = BusyClock()
    clock.add(0, 1_000_000)  # 1 ms
    clock.add(500_000, 1_500_000)  # half of it overlaps the first
    clock.add(1_200_000, 1_400_000)  # inside what is counted already
    clock.add(3_000_000, 4_000_000)  # after a gap
    assert clock.seconds == pytest.approx(2.5e-3)
