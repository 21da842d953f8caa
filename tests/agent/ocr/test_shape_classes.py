"""Shape classes on the real models (vk/graph/shape_classes.py): a new shape of a traced class gets, by one
compiled function, exactly the recipe that describing it in full gives (placement, staging, every command's
pipeline, bindings, push constants, group counts and barriers), classes are shared by many shapes, no model
falls back to describing shape by shape, and a plan so made computes what a fresh model's plan computes."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tests.engine.kernels.harness import fresh_rng
from vkocr.agent.ocr.gpu_stages import GpuStages
from vkocr.agent.ocr.model_sets import choose_models
from vkocr.agent.ocr.rec_logits import load_rec_logits
from vkocr.engine.device import Device
from vkocr.engine.graph.memory_plan import LayoutCache
from vkocr.engine.graph.plan import Plan
from vkocr.engine.graph.plan_recipe import describe
from vkocr.engine.graph.precision import FP32

MAX_REC_CLASSES = 15  # a rec model's classes along the width for one batch size (vk/graph/shape_classes.py)
SHARED_WIDTHS = 30
LARGEST = {"det": (1, 3, 960, 960), "cls": (8, 3, 48, 192), "rec": (6, 3, 48, 1600)}


def new_shapes(role: str, rng: np.random.Generator, count: int) -> list[tuple[int, int, int, int]]:
    """Distinct shapes of the kinds the pipeline asks for: det sides in 32 px steps, cls batches, rec batches
    of any width."""
    if role == "det":
        sides = {(32 * int(rng.integers(15, 30)), 32 * int(rng.integers(15, 30))) for _ in range(4 * count)}
        return [(1, 3, h, w) for h, w in sorted(sides)[:count]]
    if role == "cls":
        return [(b, 3, 48, 192) for b in (1, 2, 4)]
    widths = {int(rng.integers(160, 1600)) for _ in range(4 * count)}
    return [(int(rng.choice([1, 2, 4, 6])), 3, 48, w) for w in sorted(widths)[:count]]


@pytest.fixture(scope="module", params=["ppocrv6-small", "ppocrv4"])
def stages(device: Device, request: pytest.FixtureRequest) -> Iterator[GpuStages]:
    """Both model generations' stages, each model's largest plan made first."""
    stages = GpuStages(device, choose_models(request.param).paths)
    for role, largest in LARGEST.items():  # det, cls, rec (the page orientation model has one shape)
        stages.models[role]._layouts = LayoutCache(keep=1)  # one placement, the largest's: a full one takes it too
        stages.prepare(role, largest)
    yield stages
    stages.close()


@pytest.mark.parametrize("role", ["det", "cls", "rec"])
def test_a_class_s_function_gives_the_recipe_a_full_description_gives(stages: GpuStages, role: str) -> None:
    rng, seed = fresh_rng()
    model = stages.models[role]
    classes = model.shape_classes
    assert classes is not None
    hooks = stages.hooks(role)
    shapes = new_shapes(role, rng, 12)
    for shape in shapes:
        stages.prepare(role, shape)
        from_class = classes.recipe(((), hooks), shape, lambda: model.shared.generation, lambda dims: None)
        assert from_class is not None, f"seed {seed}: {shape} was just planned, its class is kept"
        assert model.shared is not None and model._weights is not None
        in_full, _ = describe(stages.device, model.graph, model._weights, shape, shared=model.shared, hooks=hooks,
                              bindings=model._bindings, layouts=model._layouts)
        # A reused placement's arena is reported as the placement's own, under a trace (its bytes hold every shape
        # of the class) as in full (its slots reach that far).
        assert from_class._replace(arena_bytes=0) == in_full._replace(arena_bytes=0), f"seed {seed}: {role} {shape}"
        assert from_class.arena_bytes >= in_full.arena_bytes
    assert not classes._untraceable, f"seed {seed}: {role} fell back to describing every shape"
    if role == "rec":
        # A class spans a range of widths for one batch size, 11-15 ranges from 160 to 1600 px (narrower at the
        # small end): more widths of one batch than that, spread over the range, must share, whatever the draw.
        batch = int(rng.choice([1, 2, 4, 6]))
        widths = sorted({int(w) for w in rng.integers(160, 1600, SHARED_WIDTHS)})
        traced_before = classes.traced
        for width in widths:
            stages.prepare(role, (batch, 3, 48, width))
        assert classes.traced - traced_before <= MAX_REC_CLASSES, \
            f"seed {seed}: {len(widths)} widths of batch {batch} needed {classes.traced - traced_before} classes"


def test_a_plan_made_by_a_class_computes_what_a_fresh_model_computes(stages: GpuStages, device: Device) -> None:
    rng, seed = fresh_rng()
    model = stages.models["rec"]
    fresh, _ = load_rec_logits(stages.model_paths["rec"], device, FP32, shape_classes=False)  # as the stages load it
    try:
        for width in sorted({int(rng.integers(160, 640)) for _ in range(3)}):
            shape = (2, 3, 48, width)
            x = rng.standard_normal(shape, dtype=np.float32)
            plan = model.plan(shape)  # no hooks: the network alone, its input uploaded
            assert isinstance(plan, Plan)
            plan.fill_arena(np.nan)
            got = plan.run(x)[model.output]
            want = fresh.plan(shape).run(x)[fresh.output]
            np.testing.assert_array_equal(got, want, err_msg=f"seed {seed}, shape {shape}")
        assert model.shape_classes is not None and model.shape_classes.reused > 0
    finally:
        fresh.close()


def test_a_learnt_class_makes_the_plan_of_its_shapes_without_a_trace(stages: GpuStages) -> None:
    rng, seed = fresh_rng()
    model = stages.models["rec"]
    assert model.shape_classes is not None
    shape = (4, 3, 48, int(rng.integers(200, 1500)))
    while shape in model.cached_shapes:  # a plan the tests before made: not a new shape
        shape = (4, 3, 48, int(rng.integers(200, 1500)))
    recordings = model.recordings
    stages.learn_shape_class("rec", shape)
    assert model.recordings == recordings, "learning a class records no plan"
    assert not stages.learn_shape_class("rec", shape), f"seed {seed}: the class of {shape} is kept"
    traced = model.shape_classes.traced
    stages.prepare("rec", shape)
    assert model.shape_classes.traced == traced and model.build_kinds[-1] == "class", f"seed {seed}: {shape}"


@pytest.mark.parametrize("role", ["det", "cls", "rec"])
def test_a_traced_plan_pins_no_dimension_but_softmax_s_cache(stages: GpuStages, role: str) -> None:
    """An escape pins a value (a class of one value): the only one allowed is softmax's CACHE specialisation
    constant, a real per-length variant whose guard holds for every length of its 256-wide bracket."""
    from vkocr.engine.symbolic import Trace, tracing

    model = stages.models[role]
    assert model.shared is not None and model._weights is not None
    trace = Trace()
    dims = trace.inputs(new_shapes(role, fresh_rng()[0], 1)[0])
    with tracing(trace):
        describe(stages.device, model.graph, model._weights, dims, shared=model.shared, hooks=stages.hooks(role),
                 bindings=model._bindings, layouts=model._layouts)
    assert all("reduce.py" in escape for escape in trace.escapes), trace.escapes
