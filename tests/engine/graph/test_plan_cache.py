"""Many shapes, one model (DESIGN.md, "Shapes are cheap"): every plan of a model shares one activation arena
sized by the largest, a cached shape is never recorded again, a larger shape grows the arena and drops the plans
recorded against the old one, and a plan made among many computes what a fresh model's plan computes."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from tests.engine.graph.test_plan import const, reference, tiny_model
from tests.engine.kernels.harness import fresh_rng
from vkocr.engine.device import Device
from vkocr.engine.graph.compare import rel_err
from vkocr.engine.graph.model import Model
from vkocr.engine.graph.plan import Plan

# (N, C, H, W), the largest first: every later plan fits the arena the first one made
SHAPES = [(2, 3, 40, 56), (1, 3, 8, 8), (1, 3, 16, 24), (2, 3, 24, 16), (1, 3, 40, 8), (1, 3, 8, 40),
          (2, 3, 12, 12), (1, 3, 32, 32), (1, 3, 20, 36), (2, 3, 28, 20), (1, 3, 36, 44), (1, 3, 16, 48)]


def conv_net(rng: np.random.Generator) -> onnx.ModelProto:
    """Convolutions, a residual add, pooling and a resize: values whose sizes follow H and W differently."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Resize", ["c2", "", "scales"], ["up"], mode="nearest"),
        helper.make_node("Add", ["up", "r1"], ["sum"]),
        helper.make_node("MaxPool", ["sum"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["mp", "w3", "b3"], ["y"], kernel_shape=[1, 1]),
    ]
    inits = (const(rng, "w1", 8, 3, 3, 3), const(rng, "b1", 8), const(rng, "w2", 8, 8, 3, 3),
             ("scales", np.array([1, 1, 2, 2], np.float32)), const(rng, "w3", 4, 8, 1, 1), const(rng, "b3", 4))
    return tiny_model(nodes, ["n", 3, "h", "w"], "y", ["n", 4, "h2", "w2"], inits)


@pytest.fixture
def net(tmp_path: Path) -> tuple[Path, int]:
    rng, seed = fresh_rng()
    path = tmp_path / "conv_net.onnx"
    onnx.save(conv_net(rng), path)
    return path, seed


def run_poisoned(model: Model, x: np.ndarray) -> np.ndarray:
    plan = model.plan(x.shape)
    assert isinstance(plan, Plan)
    plan.fill_arena(np.nan)  # an element no kernel writes shows as NaN
    return plan.run(x)[model.output]


@pytest.mark.parametrize("shape_classes", [True, False])
def test_many_shapes_share_one_arena_and_are_recorded_once(device: Device, net: tuple[Path, int],
                                                          shape_classes: bool) -> None:
    path, seed = net
    rng = np.random.default_rng(seed)
    inputs = [rng.uniform(-1, 1, shape).astype(np.float32) for shape in SHAPES]
    with Model.load(path, device, shape_classes=shape_classes) as model:
        first = run_poisoned(model, inputs[0])
        in_use = device.pool.stats().in_use
        outputs = [first] + [run_poisoned(model, x) for x in inputs[1:]]
        assert device.pool.stats().in_use == in_use, "later, smaller shapes allocate no device memory"
        assert model.recordings == len(SHAPES) and model.plan_count == len(SHAPES)
        # a shape of a traced class takes the placement its class's trace took (here the first shape's)
        from_classes = model.shape_classes.reused if model.shape_classes is not None else 0
        assert model.shape_classes is None or not model.shape_classes._untraceable, "no fallback to full plans"
        assert model.layouts_reused + from_classes == len(SHAPES) - 1, "every later shape fits the first placement"
        plans = [model.plan(shape) for shape in SHAPES]
        assert model.recordings == len(SHAPES), "a cached shape is not recorded again"
        largest = max(p.arena_bytes for p in plans if isinstance(p, Plan))
        assert model.shared is not None and model.shared.bytes_of("device") == largest
        for x, out in zip(inputs, outputs, strict=True):
            ref = reference(path, x, [model.output])[model.output]
            assert rel_err(out, ref) <= 1e-5, f"shape {x.shape}; seed {seed}"
            np.testing.assert_array_equal(run_poisoned(model, x), out, err_msg=f"replay of {x.shape}; seed {seed}")
        assert model.recordings == len(SHAPES)
        assert model.plan_memory_bytes >= largest


def test_a_larger_shape_grows_the_arena_and_drops_the_plans_before_it(device: Device, net: tuple[Path, int]
                                                                      ) -> None:
    path, seed = net
    rng = np.random.default_rng(seed)
    small, large = (rng.uniform(-1, 1, s).astype(np.float32) for s in [(1, 3, 8, 8), (2, 3, 40, 56)])
    with Model.load(path, device) as model:
        expected = run_poisoned(model, small)
        stale = model.plan(small.shape)
        assert isinstance(stale, Plan)
        run_poisoned(model, large)
        assert stale.stale and model.cached_shapes == [large.shape], "plans of the old arena are dropped"
        np.testing.assert_array_equal(run_poisoned(model, small), expected)
        assert model.recordings == 3


def test_a_plan_made_among_many_matches_a_fresh_models_plan(device: Device, net: tuple[Path, int]) -> None:
    path, seed = net
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (1, 3, 28, 36)).astype(np.float32)
    with Model.load(path, device) as busy:
        for shape in SHAPES:
            run_poisoned(busy, rng.uniform(-1, 1, shape).astype(np.float32))
        among_many = run_poisoned(busy, x)
    with Model.load(path, device) as fresh:
        np.testing.assert_array_equal(among_many, run_poisoned(fresh, x), err_msg=f"seed {seed}")


def test_the_cache_is_bounded_by_the_memory_plans_hold(device: Device, net: tuple[Path, int]) -> None:
    path, _ = net
    with Model.load(path, device) as probe:
        one_plan = probe.plan(SHAPES[0])
        assert isinstance(one_plan, Plan)
        per_plan = one_plan.memory_bytes
    with Model.load(path, device, plan_cache_bytes=3 * per_plan) as model:
        for shape in SHAPES:
            model.plan(shape)
        assert 2 <= model.plan_count <= 4, "bounded by bytes, not by a count"
        assert model.cached_shapes[-1] == SHAPES[-1]


def test_a_build_that_fails_after_growing_leaves_no_stale_plan_behind(device: Device, net: tuple[Path, int]
                                                                     ) -> None:
    """The shared memory grows, then the plan cannot be recorded (here: its hooks raise): the plans recorded
    against the old memory are dropped, and asking for one again records it anew."""
    from vkocr.engine.graph.plan import StageHooks

    path, seed = net
    rng = np.random.default_rng(seed)
    small = rng.uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32)

    def failing_prologue(rec: object, x: object) -> None:
        raise RuntimeError("prologue failed")

    with Model.load(path, device) as model:
        expected = run_poisoned(model, small)
        with pytest.raises(RuntimeError, match="prologue failed"):
            model.plan((2, 3, 40, 56), hooks=StageHooks(failing_prologue))
        assert model.plan_count == 0, "the small plan named memory that was replaced"
        np.testing.assert_array_equal(run_poisoned(model, small), expected)


def test_reserving_for_the_largest_shape_records_nothing_and_no_later_plan_grows(device: Device,
                                                                               net: tuple[Path, int]) -> None:
    path, seed = net
    rng = np.random.default_rng(seed)
    with Model.load(path, device) as model:
        model.reserve(SHAPES[0])
        assert model.recordings == 0 and model.plan_count == 0
        assert model.shared is not None
        reserved, generation = model.shared.bytes_of("device"), model.shared.generation
        for shape in reversed(SHAPES):  # smallest last, largest last: none grows the memory
            run_poisoned(model, rng.uniform(-1, 1, shape).astype(np.float32))
        assert model.shared.bytes_of("device") == reserved and model.shared.generation == generation
        assert model.plan_count == len(SHAPES)


def test_a_cached_plan_leaves_the_collector_a_few_objects_not_one_per_node(device: Device, tmp_path: Path) -> None:
    """A plan keeps its command buffer, not its Python records of values, bindings and commands: a cache of
    hundreds of plans must not be hundreds of thousands of objects that every full collection walks."""
    rng, seed = fresh_rng()
    depth = 40
    nodes = [helper.make_node("Conv", [f"h{i}", f"w{i}"], [f"h{i + 1}"], kernel_shape=[1, 1]) for i in range(depth)]
    nodes[0].input[0] = "x"
    model_proto = tiny_model(nodes, ["n", 4, "h", "w"], f"h{depth}", ["n", 4, "h", "w"],
                             [const(rng, f"w{i}", 4, 4, 1, 1) for i in range(depth)])
    path = tmp_path / "conv_chain.onnx"
    onnx.save(model_proto, path)
    shapes = [(1, 4, 24, 24 - i) for i in range(10)]  # the largest first: no arena grows, no plan is dropped
    with Model.load(path, device, plan_cache_size=len(shapes)) as model:
        for shape in shapes[:2]:  # the model's memos (bindings, placements) fill on the first plans
            model.plan(shape)
        gc.collect()
        before = len(gc.get_objects())
        for shape in shapes[2:]:
            plan = model.plan(shape)
            assert isinstance(plan, Plan) and plan.dispatch_count >= depth
        gc.collect()
        per_plan = (len(gc.get_objects()) - before) / (len(shapes) - 2)
        assert model.plan_count == len(shapes)
        assert per_plan < depth, f"{per_plan:.0f} tracked objects per cached plan of {depth} nodes; seed {seed}"
        x = rng.uniform(-1, 1, shapes[-1]).astype(np.float32)
        out = run_poisoned(model, x)
        assert rel_err(out, reference(path, x, [model.output])[model.output]) <= 1e-5, f"seed {seed}"
