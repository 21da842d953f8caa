"""Whole models through Model/Plan on the real driver (and through the NumPy executor) against onnxruntime,
the plan cache, the activation arena, load-time errors and input validation."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.engine.graph.conftest import GetModel
from tests.engine.graph.test_memory_plan import check_plan
from tests.engine.kernels.harness import fresh_rng
from tests.paths import COMPAT_IMAGES, MODELS
from vkocr.engine.device import Device
from vkocr.engine.errors import LoweringError, VkocrError
from vkocr.engine.graph.compare import onnxruntime_values, rel_err
from vkocr.engine.graph.lower import is_view
from vkocr.engine.graph.model import CPU_BACKEND, Model
from vkocr.engine.graph.onnx_import import ModelError
from vkocr.engine.graph.plan import InputError, Plan, lifetimes, view_sources

DET = MODELS / "ch_PP-OCRv4_det_infer.onnx"
CLS = MODELS / "ch_ppocr_mobile_v2.0_cls_infer.onnx"
REC = MODELS / "ch_PP-OCRv4_rec_infer.onnx"
DET_LOGITS = "p2o.Add.281"  # input of det's final Sigmoid in the ONNX file
BACKENDS = ("vulkan", "numpy")
TOLERANCE = 1e-4
DET_SHAPES = [(1, 3, 736, 736), (1, 3, 544, 960)]


def reference(path: Path, x: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
    return onnxruntime_values(path, {"x": x}, names)


def image_input(name: str, shape: tuple[int, ...]) -> np.ndarray:
    """DESIGN.md preprocessing: RGB, Pillow bilinear resize to the plan's H × W, /255, mean 0.5, std 0.5, NCHW."""
    from PIL import Image

    n, _, h, w = shape
    with Image.open(COMPAT_IMAGES / name) as img:
        rgb = np.asarray(img.convert("RGB").resize((w, h), Image.Resampling.BILINEAR), np.float32)
    chw = ((rgb / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)
    return np.ascontiguousarray(np.broadcast_to(chw, (n, *chw.shape)), dtype=np.float32)


def random_input(shape: tuple[int, ...]) -> tuple[np.ndarray, int]:
    rng, seed = fresh_rng()
    return rng.uniform(-1, 1, shape).astype(np.float32), seed


def det_outputs(model: Model, x: np.ndarray) -> dict[str, np.ndarray]:
    """The probability map, and the logits when no pass fused the Sigmoid away (one plan either way)."""
    extra = [DET_LOGITS] if DET_LOGITS in model.graph.producers() else []
    return model.plan(x.shape, extra_outputs=extra).run(x)


def shape_id(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


# -- whole models against onnxruntime ---------------------------------------------------------------------------


@pytest.mark.compat
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", DET_SHAPES, ids=shape_id)
def test_det_on_a_real_image_matches_onnxruntime(models: GetModel, backend: str, shape: tuple[int, ...]) -> None:
    x = image_input("ch_en_num.jpg", shape)
    model = models(DET, backend)
    prob = det_outputs(model, x)[model.output]
    ref = reference(DET, x, [model.output])[model.output]
    assert ref.max() > 0.9, "the image should contain text"
    assert prob.shape == ref.shape
    err = rel_err(prob, ref)
    assert err <= TOLERANCE, f"det {shape} on {backend}: rel error {err:.3g}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", DET_SHAPES, ids=shape_id)
def test_det_on_random_input_matches_onnxruntime(models: GetModel, backend: str, shape: tuple[int, ...]) -> None:
    """Each probability p to 1e-5 absolute (onnxruntime's approximate sigmoid makes relative error on near-zero
    probabilities meaningless) plus what float32 drift in the logits allows: a logit off by δ moves p by up to
    p(1 − p)·δ, and sums of terms the size of the largest logit drift by about 1e-5 of it. (A flat 1e-5 failed
    where that drift is ordinary: logits up to 52, off by 8.6e-5 near p = 0.5, moved p by 1.7e-5.) The logits
    themselves to 1e-4 relative where the plan still has them."""
    x, seed = random_input(shape)
    model = models(DET, backend)
    got = det_outputs(model, x)
    ref = reference(DET, x, [model.output, DET_LOGITS])
    if DET_LOGITS in got:
        err = rel_err(got[DET_LOGITS], ref[DET_LOGITS])
        assert err <= TOLERANCE, f"det logits {shape} on {backend}: rel error {err:.3g}; seed {seed}"
    drift = 1e-5 * float(np.abs(ref[DET_LOGITS]).max())
    p = ref[model.output].astype(np.float64)
    excess = np.abs(got[model.output] - p) - (1e-5 + p * (1 - p) * drift)
    worst = int(np.argmax(excess))
    assert excess.flat[worst] <= 0, (
        f"det {shape} on {backend}: probability {got[model.output].flat[worst]:.7g} against onnxruntime's "
        f"{p.flat[worst]:.7g}, more than 1e-5 + p(1-p)·{drift:.3g} apart; seed {seed}")


def check_classes(got: np.ndarray, ref: np.ndarray, what: str, seed: int | str) -> None:
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    err = rel_err(got, ref)
    assert err <= TOLERANCE, f"{what}: rel error {err:.3g}; seed {seed}"
    differ = np.argwhere(got.argmax(-1) != ref.argmax(-1))
    assert differ.size == 0, f"{what}: argmax differs at {differ[:5].tolist()}; seed {seed}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("batch", [1, 6])
def test_cls_matches_onnxruntime(models: GetModel, backend: str, batch: int) -> None:
    x, seed = random_input((batch, 3, 48, 192))
    model = models(CLS, backend)
    check_classes(model.run(x), reference(CLS, x, [model.output])[model.output], f"cls b{batch} {backend}", seed)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("width", [320, 640])
@pytest.mark.parametrize("batch", [1, 4])
def test_rec_matches_onnxruntime_at_every_time_step(models: GetModel, backend: str, batch: int, width: int) -> None:
    x, seed = random_input((batch, 3, 48, width))
    model = models(REC, backend)
    what = f"rec b{batch} w{width} {backend}"
    check_classes(model.run(x), reference(REC, x, [model.output])[model.output], what, seed)


@pytest.mark.compat
@pytest.mark.parametrize("backend", BACKENDS)
def test_rec_on_a_real_text_line_matches_onnxruntime(models: GetModel, backend: str) -> None:
    x = image_input("text_rec.jpg", (1, 3, 48, 320))
    model = models(REC, backend)
    got, ref = model.run(x), reference(REC, x, [model.output])[model.output]
    assert (ref.argmax(-1) > 0).sum() >= 3, "the line should decode to some characters"
    check_classes(got, ref, f"rec text_rec.jpg {backend}", "text_rec.jpg")


# -- the plan itself ---------------------------------------------------------------------------------------------


def test_det_arena_is_at_most_40_percent_of_one_buffer_per_tensor(models: GetModel) -> None:
    plan = models(DET, "vulkan").plan(DET_SHAPES[0])
    assert isinstance(plan, Plan)
    assert plan.arena_bytes <= 0.4 * plan.naive_bytes, (plan.arena_bytes, plan.naive_bytes)


@pytest.mark.parametrize(("path", "shape"), [(DET, DET_SHAPES[0]), (REC, (4, 3, 48, 320))], ids=["det", "rec"])
def test_planned_regions_of_live_values_never_overlap(models: GetModel, path: Path, shape: tuple[int, ...]) -> None:
    plan = models(path, "vulkan").plan(shape)
    assert isinstance(plan, Plan)
    check_plan(lifetimes(plan.spec, plan.output_names), view_sources(plan.spec.graph.nodes), plan.memory)


def test_plan_exposes_its_recording(models: GetModel) -> None:
    model = models(DET, "vulkan")
    plan = model.plan(DET_SHAPES[0])
    assert isinstance(plan, Plan)
    assert {"conv2d", "conv2d_depthwise", "conv_transpose_pair", "excite"} <= plan.pipelines
    assert plan.dispatch_count >= sum(n.op in ("Conv", "ConvTranspose") for n in plan.spec.graph.nodes)
    assert model.weight_bytes > 4 << 20 and plan.local_constant_bytes == 0


def test_replays_on_a_poisoned_arena_write_every_element(models: GetModel) -> None:
    """NaN in every activation byte, two different inputs, then the first again: the outputs depend only on
    the input (every element written, no state left over from an earlier replay)."""
    model = models(CLS, "vulkan")
    plan = model.plan((2, 3, 48, 192))
    assert isinstance(plan, Plan)
    plan.fill_arena(np.nan)
    (a, seed), (b, _) = random_input(plan.input_shape), random_input(plan.input_shape)
    first = plan.run(a)[model.output]
    assert not np.isnan(first).any(), f"unwritten output elements; seed {seed}"
    plan.run(b)
    again = plan.run(a)[model.output]
    np.testing.assert_array_equal(first, again)


def test_profile_times_every_dispatching_node(models: GetModel) -> None:
    model = models(CLS, "vulkan")
    plan = model.plan((1, 3, 48, 192))
    assert isinstance(plan, Plan)
    x, _ = random_input(plan.input_shape)
    profile = plan.profile(x)
    labels = [t.label for t in profile.nodes]
    assert labels == [n.name for n in plan.spec.graph.nodes if n.name in set(labels)], "in execution order"
    assert {n.name for n in plan.spec.graph.nodes if not is_view(n)} <= set(labels)
    assert all(t.ms >= 0 for t in profile.nodes) and profile.upload_ms >= 0 and profile.readback_ms >= 0
    assert profile.total_ms > 0
    # the kernels each node ran: the conv's a convolution kernel, every node's at least one
    assert list(profile.node_kernels) == labels and all(profile.node_kernels.values())
    conv = next(n.name for n in plan.spec.graph.nodes if n.op == "Conv")
    assert all(k.startswith(("conv2d", "pointwise")) for k in profile.node_kernels[conv]), profile.node_kernels[conv]
    np.testing.assert_array_equal(plan.run(x)[model.output], model.run(x))


def test_run_without_copies_returns_read_only_views_of_the_mapping(device: Device) -> None:
    """copy=False: the outputs are views of the plan's readback mapping (no copy of a large map), read-only,
    and the next run rewrites them in place."""
    with Model.load(CLS, device) as model:
        plan = model.plan((2, 3, 48, 192))
        a, _ = random_input((2, 3, 48, 192))
        b, _ = random_input((2, 3, 48, 192))
        copied_a = plan.run(a)[model.output]
        view = plan.run(a, copy=False)[model.output]
        np.testing.assert_array_equal(view, copied_a)
        assert not view.flags.writeable and not view.flags.owndata
        copied_b = plan.run(b)[model.output]
        assert not np.array_equal(copied_a, copied_b)
        np.testing.assert_array_equal(view, copied_b)  # the same memory, rewritten by the later run


# -- plan cache and lifetime ------------------------------------------------------------------------------------


def test_a_repeated_shape_is_not_recorded_again(device: Device) -> None:
    with Model.load(CLS, device) as model:
        x, _ = random_input((1, 3, 48, 192))
        model.run(x)
        plan = model.plan(x.shape)
        model.run(x)
        assert model.recordings == 1 and model.plan(x.shape) is plan


def test_lru_of_one_records_a_b_a_three_times_and_frees_evicted_plans(device: Device) -> None:
    live_before, in_use_before = device.live["recorder"], device.pool.stats().in_use
    with Model.load(CLS, device, plan_cache_size=1) as model:
        a, _ = random_input((1, 3, 48, 192))
        b, _ = random_input((2, 3, 48, 192))
        plan_a = model.plan(a.shape)
        expected = model.run(a)
        model.run(b)
        assert device.live["recorder"] == live_before + 1, "the evicted plan's command buffer is freed"
        with pytest.raises(VkocrError, match="closed"):
            plan_a.run(a)
        np.testing.assert_array_equal(model.run(a), expected)
        assert model.recordings == 3 and model.cached_shapes == [a.shape]
    assert device.live["recorder"] == live_before
    assert device.pool.stats().in_use == in_use_before, "model.close() frees plans and weights"


def test_the_numpy_backend_is_explicit(models: GetModel) -> None:
    model = models(CLS, "numpy")
    assert model.backend == CPU_BACKEND and model.weight_bytes == 0
    assert models(CLS, "vulkan").backend.startswith("vulkan")


# -- errors before any GPU work -------------------------------------------------------------------------------


@pytest.mark.parametrize(("x", "message"), [
    (np.zeros((3, 48, 192), np.float32), "rank 4"),
    (np.zeros((1, 4, 48, 192), np.float32), "dimension 1 must be 3"),
    (np.zeros((1, 3, 48, 192), np.float64), "float32"),
    ([[0.0]], "numpy array"),
])
def test_bad_inputs_fail_before_any_recording(models: GetModel, x: np.ndarray, message: str) -> None:
    model = models(CLS, "vulkan")
    before = model.recordings
    with pytest.raises(InputError, match=message):
        model.run(x)
    assert model.recordings == before


def test_a_plan_refuses_an_input_of_another_shape(models: GetModel) -> None:
    plan = models(CLS, "vulkan").plan((1, 3, 48, 192))
    with pytest.raises(InputError, match=r"expected shape \(1, 3, 48, 192\)"):
        plan.run(np.zeros((2, 3, 48, 192), np.float32))


def tiny_model(nodes: list[onnx.NodeProto], x_shape: Sequence[int | str], out: str, out_shape: Sequence[int | str],
               initializers: Sequence[tuple[str, np.ndarray]] = (), opset: int = 13) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(a, n) for n, a in initializers]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)], inits)
    # ir_version 8: older onnxruntimes (1.30 on the GPU machine) refuse the newest IR
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def test_an_unknown_op_fails_at_load_naming_op_and_node(device: Device) -> None:
    proto = tiny_model([helper.make_node("Einsum", ["x", "x"], ["y"], name="my_einsum", equation="ij,ij->ij")],
                       [2, 2], "y", [2, 2])
    for dev in (device, None):
        with pytest.raises(ModelError, match=r"Einsum.*my_einsum"):
            Model.load(proto, dev)


def test_an_op_without_vulkan_lowering_fails_at_load_but_runs_on_numpy(device: Device) -> None:
    """Gather on runtime data exists in the opset (shape subgraphs use it) but has no kernel."""
    idx = np.array([1, 0], np.int64)
    proto = tiny_model([helper.make_node("Gather", ["x", "idx"], ["y"], name="pick_rows", axis=0)],
                       [2, 3], "y", [2, 3], (("idx", idx),))
    with pytest.raises(LoweringError, match=r"pick_rows \(Gather\)"):
        Model.load(proto, device)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with Model.load(proto, None) as cpu:
        np.testing.assert_array_equal(cpu.run(x), x[::-1])


def test_arguments_a_kernel_cannot_take_fail_at_plan_build_naming_the_node(device: Device) -> None:
    proto = tiny_model([helper.make_node("ReduceMean", ["x"], ["y"], name="mean_0_2", axes=[0, 2])],
                       [2, 3, 4], "y", [1, 3, 1])
    with Model.load(proto, device) as model, pytest.raises(LoweringError, match=r"mean_0_2 \(ReduceMean\)"):
        model.plan((2, 3, 4))


# -- lowering of ops the three models do not (or no longer, after fusion) contain --------------------------------


def const(rng: np.random.Generator, name: str, *shape: int) -> tuple[str, np.ndarray]:
    return name, rng.uniform(0.5, 1.5, shape).astype(np.float32)


def elementwise_graph(rng: np.random.Generator) -> tuple[onnx.ModelProto, tuple[int, ...]]:
    """Every unary op, Pow by 2 on negative bases, broadcasting binaries, Concat, Cast and Identity views."""
    unary = ["Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Exp"]
    nodes = [helper.make_node(op, ["x"], [f"u{i}"]) for i, op in enumerate(unary)]
    nodes += [
        helper.make_node("LeakyRelu", ["x"], ["leaky"], alpha=0.1),
        helper.make_node("HardSigmoid", ["x"], ["hsig"], alpha=0.3, beta=0.4),
        helper.make_node("Clip", ["x", "lo", "hi"], ["clip"]),
        helper.make_node("Pow", ["x", "two"], ["square"]),
        helper.make_node("Abs", ["x"], ["ax"]),
        helper.make_node("Add", ["ax", "one"], ["ax1"]),
        helper.make_node("Sqrt", ["ax1"], ["root"]),
        helper.make_node("Reciprocal", ["ax1"], ["recip"]),
        helper.make_node("Pow", ["ax1", "half"], ["pow_half"]),
        helper.make_node("Div", ["x", "scale"], ["div"]),
        helper.make_node("Sub", ["bias", "x"], ["sub"]),
        helper.make_node("Mul", ["x", "x"], ["mul"]),
        helper.make_node("Cast", ["mul"], ["mul_f"], to=TensorProto.FLOAT),
        helper.make_node("Identity", ["mul_f"], ["mul_id"]),
    ]
    parts = [f"u{i}" for i in range(len(unary))] + ["leaky", "hsig", "clip", "square", "root", "recip", "pow_half",
                                                   "div", "sub", "mul_id"]
    nodes.append(helper.make_node("Concat", parts, ["y"], axis=1))
    inits = (("lo", np.array(-0.5, np.float32)), ("hi", np.array(0.25, np.float32)), ("two", np.array(2.0, np.float32)),
             ("one", np.array(1.0, np.float32)), ("half", np.array([0.5], np.float32)), const(rng, "scale", 4, 1),
             const(rng, "bias", 5))
    return tiny_model(nodes, [2, 3, 4, 5], "y", [2, 3 * len(parts), 4, 5], inits), (2, 3, 4, 5)


def layernorm_graph(rng: np.random.Generator) -> tuple[onnx.ModelProto, tuple[int, ...]]:
    """The ReduceMean/Sub/Pow/Sqrt/Div chain (a pass may fuse it into LayerNorm; either way it must match)."""
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1]),
        helper.make_node("Sub", ["x", "mean"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["d2"]),
        helper.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
        helper.make_node("Add", ["var", "eps"], ["var_eps"]),
        helper.make_node("Sqrt", ["var_eps"], ["std"]),
        helper.make_node("Div", ["d", "std"], ["norm"]),
        helper.make_node("Mul", ["norm", "gamma"], ["scaled"]),
        helper.make_node("Add", ["scaled", "beta"], ["y"]),
    ]
    inits = (("two", np.array(2.0, np.float32)), ("eps", np.array(1e-5, np.float32)), const(rng, "gamma", 24),
             const(rng, "beta", 24))
    return tiny_model(nodes, [2, 7, 24], "y", [2, 7, 24], inits), (2, 7, 24)


def attention_graph(rng: np.random.Generator) -> tuple[onnx.ModelProto, tuple[int, ...]]:
    """Linear projection (2-D weights, bias, activation), reshape/transpose/slice into heads, batched matmuls with
    runtime right operands, softmax, and back."""
    shape5 = np.array([1, 6, 3, 2, 4], np.int64)
    shape3 = np.array([1, 6, 8], np.int64)
    nodes = [
        helper.make_node("MatMul", ["x", "w_qkv"], ["qkv0"]),
        helper.make_node("Add", ["qkv0", "b_qkv"], ["qkv"]),
        helper.make_node("Reshape", ["qkv", "shape5"], ["heads"]),
        helper.make_node("Transpose", ["heads"], ["hT"], perm=[2, 0, 3, 1, 4]),
        helper.make_node("Slice", ["hT", "s0", "s1", "ax0"], ["q5"]),
        helper.make_node("Slice", ["hT", "s1", "s2", "ax0"], ["k5"]),
        helper.make_node("Slice", ["hT", "s2", "s3", "ax0"], ["v5"]),
        helper.make_node("Squeeze", ["q5", "ax0"], ["q"]),
        helper.make_node("Squeeze", ["k5", "ax0"], ["k"]),
        helper.make_node("Squeeze", ["v5", "ax0"], ["v"]),
        helper.make_node("Transpose", ["k"], ["kT"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kT"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["att"], axis=-1),
        helper.make_node("MatMul", ["att", "v"], ["ctx"]),
        helper.make_node("Transpose", ["ctx"], ["ctxT"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctxT", "shape3"], ["merged"]),
        helper.make_node("MatMul", ["merged", "w_out"], ["proj0"]),
        helper.make_node("Add", ["proj0", "b_out"], ["proj1"]),
        helper.make_node("Relu", ["proj1"], ["y"]),
    ]
    one = np.array([1], np.int64)
    inits = (const(rng, "w_qkv", 8, 24), const(rng, "b_qkv", 24), ("shape5", shape5), ("shape3", shape3),
             ("s0", np.array([0], np.int64)), ("s1", one), ("s2", np.array([2], np.int64)),
             ("s3", np.array([3], np.int64)), ("ax0", np.array([0], np.int64)), const(rng, "w_out", 8, 8),
             ("b_out", rng.uniform(-1, 1, 8).astype(np.float32)))
    return tiny_model(nodes, [1, 6, 8], "y", [1, 6, 8], inits), (1, 6, 8)


def spatial_graph(rng: np.random.Generator) -> tuple[onnx.ModelProto, tuple[int, ...]]:
    """A BatchNormalization no conv can absorb, pools, grouped and depthwise convs, bilinear resize, flatten."""
    c = 4
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("BatchNormalization", ["r", "g", "b", "m", "v"], ["bn"], epsilon=1e-3),
        helper.make_node("MaxPool", ["bn"], ["mp"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["mp", "w_dw", "b_dw"], ["dw"], group=c, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["dw", "w_g"], ["gc"], group=2, kernel_shape=[1, 1]),
        helper.make_node("AveragePool", ["gc"], ["ap"], kernel_shape=[2, 2], strides=[1, 1], pads=[0, 0, 1, 1],
                         count_include_pad=1),
        helper.make_node("Resize", ["ap", "", "scales"], ["up"], mode="linear",
                         coordinate_transformation_mode="half_pixel"),
        helper.make_node("GlobalAveragePool", ["up"], ["gap"]),
        helper.make_node("Mul", ["up", "gap"], ["se"]),
        helper.make_node("Flatten", ["se"], ["y"], axis=1),
    ]
    inits = (const(rng, "g", c), ("b", rng.uniform(-1, 1, c).astype(np.float32)), const(rng, "m", c),
             const(rng, "v", c), const(rng, "w_dw", c, 1, 3, 3), const(rng, "b_dw", c), const(rng, "w_g", 6, 2, 1, 1),
             ("scales", np.array([1, 1, 2, 1.5], np.float32)))
    return tiny_model(nodes, [1, c, 9, 11], "y", [1, 6 * 10 * 9], inits), (1, c, 9, 11)


def batchnorm_1d_graph(rng: np.random.Generator) -> tuple[onnx.ModelProto, tuple[int, ...]]:
    """BatchNormalization of an (N, C, L) input: the lowering views it as (N, C, 1, L)."""
    c = 3
    nodes = [helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["y"])]
    inits = (const(rng, "g", c), ("b", rng.uniform(-1, 1, c).astype(np.float32)), const(rng, "m", c),
             const(rng, "v", c))
    return tiny_model(nodes, [2, c, 50], "y", [2, c, 50], inits), (2, c, 50)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("build", [elementwise_graph, layernorm_graph, attention_graph, spatial_graph,
                                   batchnorm_1d_graph],
                         ids=lambda f: f.__name__.removesuffix("_graph"))
def test_small_graphs_match_onnxruntime(device: Device, tmp_path: Path, backend: str,
                                        build: Callable[[np.random.Generator], tuple[onnx.ModelProto, tuple[int, ...]]]
                                        ) -> None:
    rng, seed = fresh_rng()
    proto, shape = build(rng)
    path = tmp_path / "tiny.onnx"
    onnx.save(proto, path)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    with Model.load(path, device if backend == "vulkan" else None) as model:
        if isinstance(plan := model.plan(shape), Plan):
            plan.fill_arena(np.nan)
        got = plan.run(x)[model.output]
    ref = reference(path, x, [model.output])[model.output]
    assert got.shape == ref.shape
    err = rel_err(got, ref)
    assert err <= 1e-5, f"{build.__name__} on {backend}: rel error {err:.3g}; seed {seed}"


def test_a_constant_that_depends_on_the_shape_is_uploaded_by_its_plan(device: Device) -> None:
    """y = x / width: the divisor is folded per plan, so it cannot be in the weights uploaded at load."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "last"], ["width"], axis=0),
             helper.make_node("Cast", ["width"], ["width_f"], to=TensorProto.FLOAT),
             helper.make_node("Div", ["x", "width_f"], ["y"])]
    proto = tiny_model(nodes, [1, "w"], "y", [1, "w"], (("last", np.array(1, np.int64)),))
    with Model.load(proto, device) as model:
        assert model.weight_bytes == 0
        for width in (4, 8):
            plan = model.plan((1, width))
            assert isinstance(plan, Plan) and plan.local_constant_bytes == 4
            x = np.arange(1, width + 1, dtype=np.float32).reshape(1, width)
            np.testing.assert_allclose(plan.run(x)["y"], x / width, rtol=1e-6)


def test_a_shape_beyond_the_devices_binding_limit_is_refused_before_memory_grows(device: Device) -> None:
    """y = relu(x) + 1 on an input one row larger than maxStorageBufferRange allows (128 MiB on lavapipe):
    BindingTooLarge, naming the value and the limit, with the shared memory as it was; a shape within the
    limit still plans and runs."""
    from vkocr.engine.errors import BindingTooLarge

    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "one"], ["y"])]
    proto = tiny_model(nodes, [1, "h", 1024], "y", [1, "h", 1024], (("one", np.array(1.0, np.float32)),))
    limit = device.info.max_storage_buffer_range
    rows = limit // (1024 * 4) + 1
    with Model.load(proto, device) as model:
        x = np.random.default_rng().standard_normal((1, 3, 1024)).astype(np.float32)
        np.testing.assert_allclose(model.run(x), np.maximum(x, 0) + 1, rtol=1e-6)
        before = model.plan_memory_bytes
        with pytest.raises(BindingTooLarge, match=r"maxStorageBufferRange") as refused:
            model.plan((1, rows, 1024))
        assert f"({limit / 2**20:.0f} MiB" in str(refused.value)
        assert model.plan_memory_bytes == before and model.cached_shapes == [(1, 3, 1024)]
