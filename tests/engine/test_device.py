"""Device options that only some drivers serve: asked for where they are missing, the device opens as usual."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import LAVAPIPE
from vkocr.engine.device import PIPELINE_STATS_ENV, PIPELINE_STATS_EXTENSION, Device
from vkocr.engine.kernels.elementwise import record_binary
from vkocr.engine.recorder import Recorder


def test_pipeline_statistics_are_empty_where_the_driver_offers_none(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    """VKOCR_PIPELINE_STATS=1 on a driver without VK_KHR_pipeline_executable_properties (lavapipe): the device
    opens and runs kernels as usual, lists its pipelines, and each one's statistics() is {} rather than an error."""
    monkeypatch.setenv(PIPELINE_STATS_ENV, "1")
    with Device(LAVAPIPE, cache_dir=tmp_path) as device:
        offered = PIPELINE_STATS_EXTENSION in device.info.extensions
        assert device.pipeline_stats == offered
        rng = np.random.default_rng()
        a, b = rng.uniform(-1, 1, 300).astype(np.float32), rng.uniform(-1, 1, 300).astype(np.float32)
        ta, tb, out = device.upload(a), device.upload(b), device.upload(np.full(300, np.nan, np.float32))
        with Recorder(device) as rec:
            record_binary(rec, "add", ta, tb, out)
            rec.run()
        np.testing.assert_allclose(device.download(out), a + b, rtol=1e-6)
        pipelines = device.pipelines()
        assert len(pipelines) == 1 and pipelines[0].kernel.shader.startswith("binary")
        stats = pipelines[0].statistics()
        if offered:  # a future lavapipe: the driver names its own statistics, at least one
            assert stats
        else:
            assert stats == {}
        for t in (ta, tb, out):
            device.free(t)
