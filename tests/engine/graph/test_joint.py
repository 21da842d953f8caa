"""Joint runs: several plans of one model in one submission, each in its own memory (vk/graph/joint.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.kernels.harness import fresh_rng
from tests.paths import MODELS
from vkocr.engine.commands import packing
from vkocr.engine.device import Device
from vkocr.engine.errors import ModelError
from vkocr.engine.graph.joint import JointRuns
from vkocr.engine.graph.model import Model
from vkocr.engine.graph.plan import Plan, StageHooks
from vkocr.engine.kernels.layout import record_copy
from vkocr.engine.kernels.reduce import record_argmax
from vkocr.engine.memory import Allocation
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

CLS = MODELS / "ch_ppocr_mobile_v2.0_cls_infer.onnx"
MOST = 3  # the largest batch of the test's plans: every member's buffers hold it


class Member:
    """One plan's own buffers: the input its prologue copies, the argmax its epilogue writes and reads back."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.source = device.pool.alloc(4 * MOST * 3 * 48 * 192, "device")
        self.labels = device.pool.alloc(4 * MOST, "device")
        self.scores = device.pool.alloc(4 * MOST, "device")
        self.labels_back = device.pool.alloc(4 * MOST, "readback")
        self.scores_back = device.pool.alloc(4 * MOST, "readback")

    @property
    def allocations(self) -> list[Allocation]:
        return [self.source, self.labels, self.scores, self.labels_back, self.scores_back]

    def hooks(self) -> StageHooks:
        def prologue(rec: Recorder, x: Tensor) -> None:
            record_copy(rec, Tensor(self.source, x.shape, np.dtype(np.float32)), x)

        def epilogue(rec: Recorder, outputs: dict[str, Tensor]) -> None:
            (probs,) = outputs.values()
            batch = probs.shape[:1]
            labels = Tensor(self.labels, batch, np.dtype(np.int32))
            scores = Tensor(self.scores, batch, np.dtype(np.float32))
            record_argmax(rec, probs, labels, scores, axis=-1)
            rec.copy(self.labels.view, self.labels_back.view)
            rec.copy(self.scores.view, self.scores_back.view)

        return StageHooks(prologue, epilogue, read_outputs=False)

    def write(self, x: np.ndarray) -> None:
        self.device.write(Tensor(self.source, x.shape, np.dtype(np.float32)), x)
        for back in (self.labels_back, self.scores_back):
            back.array(np.uint32)[:] = 0xFFFFFFFF  # poisoned: a result not written shows
            back.flush()

    def results(self, batch: int) -> tuple[np.ndarray, np.ndarray]:
        self.labels_back.invalidate()
        self.scores_back.invalidate()
        return (self.labels_back.array(np.int32)[:batch].copy(), self.scores_back.array(np.float32)[:batch].copy())

    def moves_from(self, first: Member) -> list:
        return [(theirs.view, mine.view) for theirs, mine in zip(first.allocations, self.allocations)]

    def free(self) -> None:
        for a in self.allocations:
            self.device.pool.free(a)


def test_plans_run_jointly_answer_as_they_do_alone(device: Device) -> None:
    """Three plans (two of one shape, one of another) in one submission, each in its own memory with its own
    hook buffers: bit for bit what each answers alone, on fresh inputs, with poisoned readbacks and arenas. The
    smaller plans reuse the larger one's placement, so a copy holds them only packed."""
    rng, seed = fresh_rng()
    members = [Member(device) for _ in range(3)]
    batches = (MOST, 2, 2)  # the largest first: its memory serves the others (a larger one later stales them)
    with Model.load(CLS, device) as model:
        hooks = members[0].hooks()
        plans = [model.plan((b, 3, 48, 192), hooks=hooks) for b in batches]
        assert all(isinstance(p, Plan) for p in plans) and plans[1] is plans[2]
        assert model.shared is not None
        _, need = packing(model.commands_of(plans[1]), model.shared.region("device").view, device.alignment)
        assert need < plans[1].arena_bytes  # the batch of 3's placement, spread for its larger tensors
        joint = JointRuns(model, 3, copy_limit_bytes=need)
        inputs = [rng.uniform(-1, 1, (b, 3, 48, 192)).astype(np.float32) for b in batches]
        alone = []
        for x, plan in zip(inputs, plans):  # each alone, in member 0's buffers
            members[0].write(x)
            assert isinstance(plan, Plan)
            plan.run()
            alone.append(members[0].results(len(x)))
        for member, x in zip(members, inputs):
            member.write(x)
        plans[0].fill_arena(float("nan"))
        joint.run(plans, [[]] + [m.moves_from(members[0]) for m in members[1:]])
        assert 0 < joint.nbytes <= 2 * need * 1.5
        joint.close()
        for member, x, (labels, scores) in zip(members, inputs, alone):
            got_labels, got_scores = member.results(len(x))
            assert np.array_equal(got_labels, labels) and np.array_equal(got_scores, scores), f"seed {seed}"
            assert set(got_labels) <= {0, 1}, f"seed {seed}"
    for m in members:
        m.free()


def test_joint_runs_refuse_what_they_cannot_run(device: Device) -> None:
    with Model.load(CLS, device) as model, JointRuns(model, 2, copy_limit_bytes=4096) as joint:
        host = model.plan((1, 3, 48, 192))
        assert isinstance(host, Plan)
        with pytest.raises(ModelError, match="prologue"):
            joint.run([host], [[]])
        with pytest.raises(ValueError, match="1 to 2 plans"):
            joint.run([host, host, host], [[], [], []])
        member = Member(device)
        hooked = model.plan((1, 3, 48, 192), hooks=member.hooks())
        assert isinstance(hooked, Plan) and not joint.fits(hooked)
        with pytest.raises(ModelError, match="own memory only"):  # its tensors take more than the 4 KiB copies
            joint.run([hooked, hooked], [[], member.moves_from(member)])
        member.free()


def test_a_model_without_shape_classes_cannot_give_its_plans_commands_again(device: Device) -> None:
    member = Member(device)
    with Model.load(CLS, device, shape_classes=False) as model, JointRuns(model, 2, copy_limit_bytes=64 << 20) as joint:
        plan = model.plan((1, 3, 48, 192), hooks=member.hooks())
        assert isinstance(plan, Plan)
        with pytest.raises(ModelError, match="no shape class gives this plan's recipe"):
            joint.run([plan, plan], [[], member.moves_from(member)])
    member.free()
