"""Stage hooks: GPU work before and after the network in the plan's one command buffer."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from tests.paths import MODELS
from vkocr.engine.device import Device
from vkocr.engine.graph.model import Model
from vkocr.engine.graph.plan import Plan, StageHooks
from vkocr.engine.kernels.layout import record_copy
from vkocr.engine.kernels.reduce import record_argmax
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

CLS = MODELS / "ch_ppocr_mobile_v2.0_cls_infer.onnx"


def test_prologue_fills_the_input_and_epilogue_reads_only_the_argmax(device: Device) -> None:
    batch = 3
    source = device.tensor((batch, 3, 48, 192))  # the application's own buffer, rewritten per request
    labels = device.upload(np.full((batch,), -1, np.int32))
    scores = device.tensor((batch,))
    labels_back = device.pool.alloc(labels.nbytes, "readback")
    scores_back = device.pool.alloc(scores.nbytes, "readback")

    def prologue(rec: Recorder, x: Tensor) -> None:
        record_copy(rec, source, x)

    def epilogue(rec: Recorder, outputs: dict[str, Tensor]) -> None:
        (probs,) = outputs.values()
        record_argmax(rec, probs, labels, scores, axis=-1)
        rec.copy(labels.view, labels_back.view)
        rec.copy(scores.view, scores_back.view)

    hooks = StageHooks(prologue, epilogue, read_outputs=False)
    session = ort.InferenceSession(str(CLS), providers=["CPUExecutionProvider"])
    with Model.load(CLS, device) as model:
        plan = model.plan((batch, 3, 48, 192), hooks=hooks)
        assert isinstance(plan, Plan)
        assert model.plan((batch, 3, 48, 192), hooks=hooks) is plan and model.recordings == 1
        for _ in range(3):  # one recording, new data each replay
            x = np.random.default_rng().uniform(-1, 1, (batch, 3, 48, 192)).astype(np.float32)
            device.write(source, x)
            assert plan.run() == {}  # nothing but the epilogue's own readback comes back
            labels_back.invalidate()
            scores_back.invalidate()
            got_labels, got_scores = labels_back.array(np.int32), scores_back.array(np.float32)
            ref = session.run(None, {"x": x})[0]
            np.testing.assert_array_equal(got_labels, ref.argmax(axis=1))
            np.testing.assert_allclose(got_scores, ref.max(axis=1), rtol=1e-4)
        profile = plan.profile()
        assert profile.upload_ms >= 0 and len(profile.nodes) > 10
    device.pool.free(labels_back)
    device.pool.free(scores_back)
    for t in (source, labels, scores):
        device.free(t)
