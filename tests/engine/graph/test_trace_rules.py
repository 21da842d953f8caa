"""Every lowering rule keeps its launch arithmetic under the shape-class trace, in every storage precision.

A kernel's launch (group counts, push constants, bindings) must be a function of shapes, attributes and dtype
that the trace can follow (vk/symbolic.py: `dim()` and `pack()`, never `int()` on a size). An escape pins a
dimension to the traced value: nothing fails, but every new shape becomes a class of its own. So for each rule,
a one-node graph is planned for three random shapes, in fp32 and fp16 storage: no trace may escape, and each
plan must compute what the NumPy executor does. (A guard may still split classes where a kernel really branches,
a vec4 path for sizes divisible by 4, say: that is not an escape.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from tests.engine.kernels.harness import TOLERANCES, fresh_rng
from vkocr.engine.device import Device
from vkocr.engine.graph import passes
from vkocr.engine.graph.calibration import value_ranges
from vkocr.engine.graph.ir import Graph, Node
from vkocr.engine.graph.lower import RULES
from vkocr.engine.graph.lower_registry import STORAGE_CAST
from vkocr.engine.graph.model import Model
from vkocr.engine.graph.numpy_executor import run_numpy
from vkocr.engine.graph.plan_recipe import specialize_for
from vkocr.engine.graph.precision import PrecisionPlan
from vkocr.engine.graph.specialize import Specialized, specialize

Build = Callable[[np.random.Generator], tuple[list[Node], dict[str, np.ndarray]]]


@dataclass(frozen=True)
class Case:
    """One rule's graph: nodes from input "x" to output "y", its constants, and the input shape for (h, w)."""

    ops: tuple[str, ...]
    build: Build
    shape: Callable[[int, int], tuple[int, ...]]


def nchw(c: int) -> Callable[[int, int], tuple[int, ...]]:
    return lambda h, w: (1, c, h, w)


def tokens(c: int) -> Callable[[int, int], tuple[int, ...]]:
    return lambda h, w: (1, h + w, c)


def one(op: str, extra: dict[str, np.ndarray] | None = None, **attrs: object) -> Build:
    """A node `op(x, *extra) -> y`; the extra inputs are constants made by the generator given."""
    def build(rng: np.random.Generator) -> tuple[list[Node], dict[str, np.ndarray]]:
        consts = {k: np.asarray(v) for k, v in (extra or {}).items()}
        return [Node(op, "n", ["x", *consts], ["y"], dict(attrs))], consts
    return build


def weights(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def after(first: Node, build: Build) -> Build:
    """`first` (x -> t) then the node `build` makes, reading t."""
    def chained(rng: np.random.Generator) -> tuple[list[Node], dict[str, np.ndarray]]:
        nodes, consts = build(rng)
        nodes[0].inputs[0] = "t"
        return [first, *nodes], consts
    return chained


CASES = {
    "conv": Case(("Conv",), one("Conv", {"w": weights(8, 4, 3, 3), "b": weights(8)}, pads=[1, 1, 1, 1],
                                strides=[1, 1]), nchw(4)),
    "conv_pointwise_relu": Case(("Conv",), one("Conv", {"w": weights(16, 8, 1, 1)}, activation="relu"), nchw(8)),
    # a pointwise conv on a 1×1 map (gemv.comp), the batch traced
    "conv_on_a_1x1_map": Case(("Conv",), one("Conv", {"w": weights(16, 40, 1, 1), "b": weights(16)},
                                             activation="hardsigmoid", act_alpha=0.2, act_beta=0.5),
                              lambda h, w: (h, 40, 1, 1)),
    "depthwise": Case(("Conv",), one("Conv", {"w": weights(6, 1, 3, 3), "b": weights(6)}, group=6,
                                     pads=[1, 1, 1, 1], strides=[2, 2]), nchw(6)),
    "conv_transpose": Case(("ConvTranspose",), one("ConvTranspose", {"w": weights(4, 3, 2, 2), "b": weights(3)},
                                                   strides=[2, 2]), nchw(4)),
    "batchnorm": Case(("BatchNormalization",), one(
        "BatchNormalization", {"g": weights(5) + 2, "be": weights(5), "m": weights(5), "v": weights(5) + 2}), nchw(5)),
    "max_pool": Case(("MaxPool",), one("MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), nchw(3)),
    "average_pool": Case(("AveragePool",), one("AveragePool", kernel_shape=[2, 2], strides=[2, 2]), nchw(3)),
    "global_average_pool": Case(("GlobalAveragePool",), one("GlobalAveragePool"), nchw(7)),
    "add_broadcast": Case(("Add", "Sub", "Mul", "Div"), one("Add", {"c": weights(1, 5, 1, 1)}), nchw(5)),
    "mul_same": Case(("Mul",), one("Mul", {"c": weights(1, 3, 1, 1) + 2}), nchw(3)),
    "gated_add": Case(("GatedAdd",), one("GatedAdd", {"s": weights(1, 3, 1, 1)}), nchw(3)),
    "pow_square": Case(("Pow",), one("Pow", {"p": np.array(2.0, np.float32)}), nchw(3)),
    "unary": Case(("Relu", "Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu", "Sqrt", "Exp", "Tanh", "Neg", "Abs",
                   "Reciprocal", "Erf", "Gelu", "Silu"), one("Sigmoid"), nchw(3)),
    "silu": Case(("Silu",), one("Silu"), nchw(3)),
    "clip": Case(("Clip",), one("Clip", {"lo": np.array(-0.5, np.float32), "hi": np.array(0.5, np.float32)}),
                 nchw(3)),
    "transpose": Case(("Transpose",), one("Transpose", perm=[0, 2, 3, 1]), nchw(5)),
    "concat": Case(("Concat",), one("Concat", {"c": weights(1, 2, 1, 1)}, axis=1), lambda h, w: (1, 3, 1, 1)),
    "slice": Case(("Slice",), one("Slice", {"s": np.array([1]), "e": np.array([3]), "a": np.array([1])}), nchw(4)),
    "resize": Case(("Resize",), one("Resize", {"roi": np.zeros(0, np.float32),
                                               "scales": np.array([1, 1, 2, 2], np.float32)}, mode="nearest"), nchw(3)),
    # passes.fuse_resize_add: the nearest upsample takes the linear one's output as its addend
    "resize_add": Case(("Resize", "Add"), lambda rng: ([
        Node("Resize", "up_linear", ["x", "roi", "scales"], ["a"], {"mode": "linear"}),
        Node("Resize", "up", ["x", "roi", "scales"], ["u"], {"mode": "nearest", "nearest_mode": "floor",
                                                              "coordinate_transformation_mode": "asymmetric"}),
        Node("Add", "add", ["u", "a"], ["y"])],
        {"roi": np.zeros(0, np.float32), "scales": np.array([1, 1, 2, 2], np.float32)}), nchw(3)),
    "matmul_weights": Case(("MatMul",), one("MatMul", {"w": weights(8, 6)}), tokens(8)),
    "matmul_one_column": Case(("MatMul",), one("MatMul", {"w": weights(8, 1)}), tokens(8)),  # gemv.comp
    # shape_fusion.fuse_residual: the skip connection's Add in the GEMM's epilogue
    "matmul_residual": Case(("MatMul", "Add"), lambda rng: ([
        Node("MatMul", "proj", ["x", "w", "b"], ["p"], {"activation": "gelu"}),
        Node("Add", "skip", ["p", "x"], ["s"]),
        Node("Relu", "after", ["s"], ["y"])],  # (the output's producer stores fp32)
        {"w": weights(8, 8), "b": weights(8)}), tokens(8)),
    "softmax": Case(("Softmax",), one("Softmax", axis=-1), tokens(12)),
    "reduce_mean": Case(("ReduceMean",), one("ReduceMean", axes=[-1], keepdims=1), tokens(12)),
    "layernorm": Case(("LayerNorm",), one("LayerNorm", {"g": weights(12) + 1, "b": weights(12)}, axis=-1,
                                          epsilon=1e-5), tokens(12)),
    # shape_fusion.fuse_excite: an SE block's two 1×1 convolutions and its Mul as one Excite
    "excite": Case(("Excite",), lambda rng: ([
        Node("GlobalAveragePool", "pool", ["x"], ["p"]),
        Node("Conv", "fc1", ["p", "w1", "b1"], ["h"], {"activation": "relu"}),
        Node("Conv", "fc2", ["h", "w2"], ["g"], {"activation": "hardsigmoid", "act_alpha": 0.2, "act_beta": 0.5}),
        Node("Mul", "scale", ["x", "g"], ["m"]),
        Node("Relu", "after", ["m"], ["y"])],  # (the producer of the output stores fp32: the block would not fuse)
        {"w1": weights(3, 12, 1, 1), "b1": weights(3), "w2": weights(12, 3, 1, 1)}), nchw(12)),
    # map_fusion.fuse_conv_transpose_pair: DB's head, its map upsampled twice, as one dispatch
    "conv_transpose_pair": Case(("ConvTransposePair",), lambda rng: (db_head_upsampling(), {
        "w1": weights(4, 6, 2, 2), "b1": weights(6), "w2": weights(6, 1, 2, 2, seed=1), "b2": weights(1)}), nchw(4)),
    # map_fusion.fuse_pool_concat: a stem's Concat(MaxPool(a), b), the pooled map never stored
    "pool_concat": Case(("Concat",), lambda rng: (stem_pool_concat(), {"w": weights(3, 3, 1, 1)}), nchw(3)),
    # map_fusion.fuse_stem_concat: the pooled Concat and its two 2×2 convolutions as one dispatch (fp32)
    "stem_concat": Case(("StemConcat",), lambda rng: (stem_block(), STEM_WEIGHTS), nchw(3)),
    # map_fusion.fuse_upsample_concat: a nearest upsampling gathered by the Concat, a linear one stays
    "upsample_concat": Case(("Concat",), lambda rng: ([
        Node("Relu", "r", ["x"], ["t"]),
        Node("Resize", "up_near", ["t", "roi", "scales"], ["a"], {"mode": "nearest"}),
        Node("Resize", "up_lin", ["x", "roi", "scales"], ["b"], {"mode": "linear"}),
        Node("Concat", "cat", ["b", "a"], ["s"], {"axis": 1}),
        Node("Relu", "after", ["s"], ["y"])],  # (the Concat makes no output: an output's producer stores fp32)
        {"roi": np.zeros(0, np.float32), "scales": np.array([1, 1, 2, 2], np.float32)}), nchw(3)),
    # map_fusion.fuse_excite_upsample_add: an FPN's upsample-and-add computed by the Excite making its addend
    "excite_upsample_add": Case(("Excite",), lambda rng: fpn_excite_add(), nchw(6)),
    # shape_fusion.fuse_attention: SVTR's eleven attention nodes as one (T traced from h + w)
    "attention": Case(("Attention",), lambda rng: svtr_attention(heads=2, d=6), tokens(36)),
    "views": Case(("Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "View", "Cast"),
                  after(Node("Flatten", "f", ["x"], ["t"], {"axis": 1}), one("Relu")), nchw(3)),
}

# Rules this file does not build a graph for, and why.
NOT_BUILT = {STORAGE_CAST: "inserted by the precision pass: every fp16 case above plans its casts"}


def test_every_rule_has_a_case() -> None:
    covered = {op for case in CASES.values() for op in case.ops} | set(NOT_BUILT)
    assert sorted(set(RULES) - covered) == []


def graph_of(case: Case, rng: np.random.Generator) -> Graph:
    nodes, consts = case.build(rng)
    return Graph(nodes, ["x"], ["y"], dict(consts), name=f"trace_{nodes[-1].op}")


def same_branch_shapes(rng: np.random.Generator) -> list[tuple[int, int]]:
    """Three (h, w) near each other: large enough to be real, small enough for lavapipe."""
    sides = rng.choice(np.arange(9, 31), size=(3, 2), replace=False)
    return [(int(h), int(w)) for h, w in sides]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_rule_s_launch_never_escapes_the_trace(device: Device, name: str, precision: str) -> None:
    rng, seed = fresh_rng()
    case = CASES[name]
    graph = graph_of(case, rng)
    with Model(graph, device, precision=PrecisionPlan(precision, frozenset())) as model:
        classes = model.shape_classes
        assert classes is not None
        for h, w in same_branch_shapes(rng):
            shape = case.shape(h, w)
            x = rng.uniform(-1, 1, shape).astype(np.float32)
            got = model.run(x)
            want = run_numpy(specialize_for(model.graph, shape, precision=False), {"x": x})["y"]
            err = np.linalg.norm(got - want) / max(float(np.linalg.norm(want)), 1e-30)
            tol = TOLERANCES[np.dtype(np.float16 if precision == "fp16" else np.float32)] * 4
            assert err <= tol, f"{name} {precision} {shape}: rel error {err:.3g}; seed {seed}"
        assert classes.traced >= 1, f"{name} {precision}: no plan came from a shape class"
        assert classes.escapes == [], f"{name} {precision}: the trace escaped at {classes.escapes}; seed {seed}"


def test_an_fp16_plan_casts_only_where_precisions_meet(device: Device) -> None:
    """Between fp16 nodes no cast; one into the first (the input arrives as fp32) and one before the node that
    makes the output (outputs leave as fp32, so their producer stores fp32)."""
    rng, _ = fresh_rng()
    nodes = [Node("Conv", "a", ["x", "w1"], ["t"], {"pads": [1, 1, 1, 1]}),
             Node("Conv", "b", ["t", "w2"], ["u"], {}),
             Node("Conv", "c", ["u", "w3"], ["y"], {})]
    graph = Graph(nodes, ["x"], ["y"], {"w1": weights(4, 3, 3, 3), "w2": weights(5, 4, 1, 1),
                                        "w3": weights(2, 5, 1, 1)})
    with Model(graph, device, precision=PrecisionPlan("fp16")) as model:
        spec = model.plan((1, 3, 10, 12)).spec
        assert [n.op for n in spec.graph.nodes] == ["StorageCast", "Conv", "Conv", "StorageCast", "Conv"]
        b = spec.graph.nodes[2]
        assert b.inputs[0] == "t", "fp16 into fp16: no cast"
        assert [spec.dtype(v).name for v in ("x", "t", "u", "y")] == ["float32", "float16", "float16", "float32"]
        x = rng.uniform(-1, 1, (1, 3, 10, 12)).astype(np.float32)
        want = run_numpy(specialize_for(model.graph, x.shape, precision=False), {"x": x})["y"]
        got = model.run(x)
        assert np.linalg.norm(got - want) / np.linalg.norm(want) < 4e-3


def test_a_residual_add_joins_its_conv_only_where_it_is_the_conv_s_own(device: Device) -> None:
    """Add(conv(x), r) becomes the conv's epilogue when shapes match and the conv feeds the Add alone; a
    broadcasting Add, or a conv read elsewhere too, keeps its own Add. The fused plan computes the same."""
    nodes = [Node("Conv", "skip", ["x", "w1"], ["s"], {"pads": [1, 1, 1, 1]}),
             Node("Conv", "body", ["s", "w2"], ["b"], {"activation": "relu"}),
             Node("Add", "res", ["b", "s"], ["r"]),  # fuses into body
             Node("GlobalAveragePool", "gap", ["s"], ["c"]),
             Node("Conv", "head", ["r", "w2"], ["h"], {}),
             Node("Add", "bias_like", ["h", "c"], ["y"])]  # broadcasts (1, 4, 1, 1) over h: stays
    graph = Graph(nodes, ["x"], ["y"], {"w1": weights(4, 3, 3, 3), "w2": weights(4, 4, 1, 1)})

    def fused(spec: Specialized) -> None:
        body = next(n for n in spec.graph.nodes if n.name == "body")
        assert body.inputs[3].startswith("s") and body.outputs == ["r"]

    check_fusion(device, graph, (1, 3, 9, 11), [("Conv", "skip"), ("Conv", "body"), ("GlobalAveragePool", "gap"),
                                                 ("Conv", "head"), ("Add", "bias_like")], fused)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_a_residual_made_after_its_conv_joins_it_where_the_add_ran(device: Device, precision: str) -> None:
    """Add(conv(x), r) with r made after the conv (SVTR's last skip connection): in fp32 the conv moves to the
    Add's place and takes r into its epilogue, bit for bit; in fp16, where the conv would add r to its unrounded
    sum, the Add stays, and the answer is the one the sameness gate measured."""
    rng, seed = fresh_rng()
    nodes = [Node("Conv", "conv", ["x", "w"], ["p"], {"activation": "relu"}),
             Node("Transpose", "late", ["x"], ["t"], {"perm": [0, 1, 3, 2]}),
             Node("Sigmoid", "r", ["t"], ["u"]),
             Node("Transpose", "back", ["u"], ["r"], {"perm": [0, 1, 3, 2]}),
             Node("Add", "res", ["p", "r"], ["s"]),
             Node("Relu", "after", ["s"], ["y"])]  # (the output's producer stores fp32)
    graph = Graph(nodes, ["x"], ["y"], {"w": weights(4, 4, 1, 1)})
    x = rng.uniform(-2, 2, (1, 4, 7, 9)).astype(np.float32)
    with Model(graph, device) as model:
        order = [n.name for n in model.graph.nodes]
        assert order.index("conv") < order.index("back"), order  # r is made after the conv: the case under test
    (fused_ops, fused), (unfused_ops, unfused) = with_and_without(device, graph, precision, "fuse_residual", x)
    assert unfused_ops.count("Add") == 1
    if precision == "fp32":
        assert "Add" not in fused_ops and fused_ops[-2:] == ["Conv", "Relu"], fused_ops
        assert np.array_equal(fused, unfused), f"not bit for bit; seed {seed}"
    else:
        assert fused_ops == unfused_ops, fused_ops


def test_a_skip_connection_joins_a_matmul_with_constant_weights(device: Device) -> None:
    """Add(MatMul(x, W), r) for a 2-D constant W becomes the GEMM's epilogue (SVTR's projections); a MatMul of two
    computed values keeps its Add. The fused plan computes the same."""
    nodes = [Node("MatMul", "proj", ["x", "w"], ["p"]),
             Node("Add", "skip", ["p", "x"], ["s"]),  # fuses into proj
             Node("Transpose", "t", ["s"], ["st"], {"perm": [0, 2, 1]}),
             Node("MatMul", "gram", ["s", "st"], ["g"]),
             Node("Add", "stays", ["g", "c"], ["y"])]  # gram's B is computed: the Add stays
    graph = Graph(nodes, ["x"], ["y"], {"w": weights(8, 8), "c": weights(1, 6, 6)})

    def fused(spec: Specialized) -> None:
        proj = next(n for n in spec.graph.nodes if n.name == "proj")
        assert proj.inputs[2:] == ["", "x"] or proj.inputs[3].startswith("x"), proj.inputs
        assert proj.outputs == ["s"]

    check_fusion(device, graph, (1, 6, 8), [("MatMul", "proj"), ("Transpose", "t"), ("MatMul", "gram"),
                                            ("Add", "stays")], fused)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_a_matmul_s_skip_connection_fused_answers_as_the_two_nodes_did(device: Device, precision: str) -> None:
    """The GEMM rounds its product to the storage type before adding the skip connection, as the MatMul stored
    it, so the fused plan's answer is the unfused one's bit for bit, in fp16 storage too (an SVTR block's
    projection and MLP, activations and biases included)."""
    rng, seed = fresh_rng()
    nodes = [Node("MatMul", "fc1", ["x", "w1", "b1"], ["h"], {"activation": "gelu"}),
             Node("MatMul", "fc2", ["h", "w2", "b2"], ["o"]),
             Node("Add", "skip", ["o", "x"], ["s"]),
             Node("Relu", "after", ["s"], ["y"])]  # (the output's producer stores fp32)
    graph = Graph(nodes, ["x"], ["y"], {"w1": weights(24, 48), "b1": weights(48), "w2": weights(48, 24, seed=1),
                                        "b2": weights(24, seed=2)})
    x = rng.uniform(-3, 3, (2, 40, 24)).astype(np.float32)
    (fused_ops, fused), (unfused_ops, unfused) = with_and_without(device, graph, precision, "fuse_residual", x)
    assert fused_ops == ["MatMul", "MatMul", "Relu"] and unfused_ops == ["MatMul", "MatMul", "Add", "Relu"]
    assert np.array_equal(fused, unfused), f"{precision}: not bit for bit; seed {seed}"


def with_and_without(device: Device, graph: Graph, precision: str, fusion: str, x: np.ndarray
                     ) -> list[tuple[list[str], np.ndarray]]:
    """(the plan's ops apart from casts, its answer) with the per-shape pass `fusion` of vk/graph/passes.py, then
    without it."""
    out = []
    for fuse in (True, False):
        with pytest.MonkeyPatch.context() as patch:
            if not fuse:
                patch.setattr(passes, fusion, lambda spec: spec)
            with Model(graph, device, precision=PrecisionPlan(precision)) as model:
                ops = [n.op for n in model.plan(x.shape).spec.graph.nodes if n.op != "StorageCast"]
                out.append((ops, model.run(x)))
    return out


def test_an_se_block_s_gate_and_residual_become_one_pass(device: Device) -> None:
    """x + x·s (s from the pooled x) → GatedAdd(x, s), computing what the two nodes computed, bit for bit in
    fp32; a Mul read elsewhere too keeps its Add."""
    rng, seed = fresh_rng()
    nodes = [Node("Conv", "body", ["x", "w"], ["b"], {"pads": [1, 1, 1, 1]}),
             Node("GlobalAveragePool", "pool", ["b"], ["p"]),
             Node("Conv", "excite", ["p", "w1"], ["s"], {"activation": "hardsigmoid", "act_alpha": 0.2,
                                                        "act_beta": 0.5}),
             Node("Mul", "scale", ["b", "s"], ["m"]),
             Node("Add", "gate", ["b", "m"], ["g"]),
             Node("Mul", "kept", ["g", "s"], ["k"]),
             Node("Add", "stays", ["k", "k"], ["y"])]
    graph = Graph(nodes, ["x"], ["y"], {"w": weights(4, 3, 3, 3), "w1": weights(4, 4, 1, 1)})
    with Model(graph, device) as model:
        spec = model.plan((1, 3, 9, 11)).spec
        assert [n.op for n in spec.graph.nodes] == ["Conv", "GlobalAveragePool", "Conv", "GatedAdd", "Mul", "Add"]
        x = rng.uniform(-1, 1, (1, 3, 9, 11)).astype(np.float32)
        unfused = Graph(list(nodes), ["x"], ["y"], dict(graph.constants))
        want = run_numpy(specialize_for(model.graph, x.shape, precision=False), {"x": x})["y"]
        assert np.array_equal(want, run_numpy(specialize(unfused, {"x": x.shape}), {"x": x})["y"])  # no fusion
        got = model.run(x)
        assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-5, seed


def test_an_upsample_and_its_add_become_one_pass(device: Device) -> None:
    """Add(Resize(x), a), nearest, shapes equal, the Resize read by the Add alone: one Resize with a as its
    addend, bit for bit the unfused answer in fp32 (det's FPN). A linear Resize, one read elsewhere too and a
    broadcasting Add keep their Adds."""
    roi, scales = np.zeros(0, np.float32), np.array([1, 1, 2, 2], np.float32)
    near = {"mode": "nearest", "nearest_mode": "floor", "coordinate_transformation_mode": "asymmetric"}
    nodes = [Node("Conv", "c4", ["x", "w4"], ["p4"], {"pads": [1, 1, 1, 1]}),
             Node("Conv", "c5", ["p4", "w5"], ["p5"], {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
             Node("Resize", "up5", ["p5", "roi", "scales"], ["u5"], near),
             Node("Add", "fpn", ["p4", "u5"], ["f"]),                       # fused
             Node("Resize", "up_lin", ["p5", "roi", "scales"], ["l5"], {"mode": "linear"}),
             Node("Add", "lin", ["l5", "f"], ["g"]),                         # linear: stays
             Node("Resize", "up_kept", ["p5", "roi", "scales"], ["k5"], near),
             Node("Add", "kept", ["k5", "g"], ["h"]),                        # k5 also read below: stays
             Node("Mul", "reader", ["k5", "h"], ["m"]),
             Node("Add", "bias_like", ["m", "c"], ["y"])]                     # broadcasts: stays
    graph = Graph(nodes, ["x"], ["y"], {"w4": weights(4, 3, 3, 3), "w5": weights(4, 4, 3, 3), "roi": roi,
                                        "scales": scales, "c": weights(1, 4, 1, 1)})

    def fused(spec: Specialized) -> None:
        up5 = next(n for n in spec.graph.nodes if n.name == "up5")
        assert up5.inputs[4].startswith("p4") and up5.outputs == ["f"]

    check_fusion(device, graph, (1, 3, 12, 14), [("Conv", "c4"), ("Conv", "c5"), ("Resize", "up5"),
                                                  ("Resize", "up_lin"), ("Add", "lin"), ("Resize", "up_kept"),
                                                  ("Add", "kept"), ("Mul", "reader"), ("Add", "bias_like")], fused)


def check_fusion(device: Device, graph: Graph, shape: tuple[int, ...], ops: list[tuple[str, str]],
                 fused: Callable[[Specialized], None]) -> None:
    """In both precisions: the plan's nodes (op, name) apart from casts are `ops`, `fused` accepts its graph, and
    it computes the unfused graph's answer on fresh inputs (in fp32 the fused NumPy graph bit for bit)."""
    rng, seed = fresh_rng()
    for precision in ("fp32", "fp16"):
        with Model(graph, device, precision=PrecisionPlan(precision)) as model:
            spec = model.plan(shape).spec
            got_ops = [(n.op, n.name) for n in spec.graph.nodes if n.op != "StorageCast"]
            assert got_ops == ops, got_ops
            fused(spec)
            x = rng.uniform(-1, 1, shape).astype(np.float32)
            unfused = Graph(list(graph.nodes), ["x"], ["y"], dict(graph.constants))
            want = run_numpy(specialize(unfused, {"x": x.shape}), {"x": x})["y"]  # no per-shape pass: no fusion
            got = model.run(x)
            if precision == "fp32":
                plain = run_numpy(specialize_for(model.graph, x.shape, precision=False), {"x": x})["y"]
                assert np.array_equal(plain, want), f"the fused NumPy graph differs from the unfused; seed {seed}"
            err = np.linalg.norm(got - want) / np.linalg.norm(want)
            assert err < (4e-3 if precision == "fp16" else 1e-5), f"{precision}: {err}; seed {seed}"


def se_block(tag: str, source: str, x: str, out: str, *, gated: bool = False) -> list[Node]:
    """An SE block's excitation of x from the pooled `source`: fc (relu), fc (hardsigmoid), then x·g (the gate
    first, as Paddle2ONNX never writes it) or, `gated`, x + x·g."""
    nodes = [Node("Conv", f"{tag}1", [source, f"w{tag}1", f"b{tag}1"], [f"{tag}h"], {"activation": "relu"}),
             Node("Conv", f"{tag}2", [f"{tag}h", f"w{tag}2", f"b{tag}2"], [f"{tag}g"],
                  {"activation": "hardsigmoid", "act_alpha": 0.2, "act_beta": 0.5})]
    if gated:
        return [*nodes, Node("Mul", f"{tag}_mul", [x, f"{tag}g"], [f"{tag}m"]), Node("Add", tag, [x, f"{tag}m"], [out])]
    return [*nodes, Node("Mul", tag, [f"{tag}g", x], [out])]


def se_weights(tag: str, c: int, c1: int) -> dict[str, np.ndarray]:
    return {f"w{tag}1": weights(c1, c, 1, 1), f"b{tag}1": weights(c1), f"w{tag}2": weights(c, c1, 1, 1),
            f"b{tag}2": weights(c)}


def test_an_se_block_s_excitation_becomes_one_dispatch(device: Device) -> None:
    """fc, fc and the product (a Mul, or the GatedAdd fuse_gate made) → one Excite node, bit for bit the unfused
    answer; a block whose gate is read elsewhere too keeps its nodes."""
    nodes = [Node("Conv", "body", ["x", "w"], ["b"], {"pads": [1, 1, 1, 1]}),
             Node("GlobalAveragePool", "pool", ["b"], ["p"]),
             *se_block("sa", "p", "b", "ya"),
             *se_block("sb", "p", "ya", "yb", gated=True),
             *se_block("sc", "p", "yb", "yc"),
             Node("Add", "reads_gate", ["yc", "scg"], ["y"])]  # sc's gate read twice: sc stays apart
    graph = Graph(nodes, ["x"], ["y"], {"w": weights(8, 3, 3, 3), **se_weights("sa", 8, 2), **se_weights("sb", 8, 3),
                                        **se_weights("sc", 8, 2)})

    def fused(spec: Specialized) -> None:
        excites = {n.name: n for n in spec.graph.nodes if n.op == "Excite"}
        assert excites["sa"].inputs[:3] == ["b", "p", "wsa1"] and not excites["sa"].attrs["gated_add"]
        assert excites["sb"].inputs[0] == "ya" and excites["sb"].attrs["gated_add"]

    check_fusion(device, graph, (2, 3, 12, 14), [("Conv", "body"), ("GlobalAveragePool", "pool"), ("Excite", "sa"),
                                                  ("Conv", "sc1"), ("Excite", "sb"), ("Conv", "sc2"), ("Mul", "sc"),
                                                  ("Add", "reads_gate")], fused)


def test_an_se_block_stays_apart_where_fusing_would_change_or_slow_it(device: Device) -> None:
    """Too many weights per product for every workgroup to repeat (vk/kernels/excite.py MAX_FUSED_WEIGHTS), or
    nodes of the block in different precisions: the three nodes stay."""
    nodes = [Node("GlobalAveragePool", "pool", ["x"], ["p"]), *se_block("big", "p", "x", "y1"),
             Node("GlobalAveragePool", "pool2", ["y1"], ["p2"]), *se_block("mixed", "p2", "y1", "y")]
    graph = Graph(nodes, ["x"], ["y"], {**se_weights("big", 97, 96), **se_weights("mixed", 97, 4)})
    with Model(graph, device, precision=PrecisionPlan("fp16", frozenset({"mixed1"}))) as model:
        ops = [n.op for n in model.plan((1, 97, 5, 6)).spec.graph.nodes if n.op != "StorageCast"]
    assert ops == ["GlobalAveragePool", "Conv", "Conv", "Mul", "GlobalAveragePool", "Conv", "Conv", "Mul"]
    with Model(graph, device) as model:  # one precision: the small block fuses
        ops = [n.op for n in model.plan((1, 97, 5, 6)).spec.graph.nodes]
    assert ops == ["GlobalAveragePool", "Conv", "Conv", "Mul", "GlobalAveragePool", "Excite"]


def db_head_upsampling(k1: tuple[int, int] = (2, 2), **second: object) -> list[Node]:
    """DB's head after its 3×3 conv: ConvTranspose (kernel = stride, relu), ConvTranspose (kernel = stride,
    sigmoid), then a Relu (so that the pair makes no output: an output's producer stores fp32). `second`: more
    attributes of the second ConvTranspose."""
    return [Node("ConvTranspose", "up1", ["x", "w1", "b1"], ["m"], {"strides": list(k1), "activation": "relu"}),
            Node("ConvTranspose", "up2", ["m", "w2", "b2"], ["s"], {"strides": [2, 2], "activation": "sigmoid",
                                                                   **second}),
            Node("Relu", "after", ["s"], ["y"])]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_db_head_s_two_upsamplings_become_one_dispatch(device: Device, precision: str) -> None:
    """ConvTranspose, ConvTranspose (kernels equal to strides) → one ConvTransposePair, which computes the two
    nodes' answer bit for bit, in both precisions."""
    rng, seed = fresh_rng()
    graph = Graph(db_head_upsampling(), ["x"], ["y"], {"w1": weights(8, 24, 2, 2), "b1": weights(24),
                                                       "w2": weights(24, 1, 2, 2, seed=1), "b2": weights(1)})
    x = rng.uniform(-2, 2, (1, 8, 11, 13)).astype(np.float32)
    (fused_ops, fused), (unfused_ops, unfused) = with_and_without(device, graph, precision,
                                                                  "fuse_conv_transpose_pair", x)
    assert fused_ops == ["ConvTransposePair", "Relu"], fused_ops
    assert unfused_ops == ["ConvTranspose", "ConvTranspose", "Relu"], unfused_ops
    assert np.array_equal(fused, unfused), f"{precision}: not bit for bit; seed {seed}"


def test_db_head_s_upsamplings_fuse_in_fp32_where_the_second_makes_the_output(device: Device) -> None:
    """In an fp16 plan DB's map, the output, stores fp32 and its first upsampling fp16: the pair takes the second's
    precision, after a cast of its input, and computes the fp32 pair's answer on that input (its middle map no
    longer rounded to fp16)."""
    rng, seed = fresh_rng()
    nodes = [Node("Conv", "head", ["x", "w0"], ["h"], {"pads": [1, 1, 1, 1], "activation": "relu"}),
             *db_head_upsampling()[:2]]
    nodes[1].inputs[0], nodes[-1].outputs[0] = "h", "y"
    consts = {"w0": weights(8, 3, 3, 3), "w1": weights(8, 24, 2, 2), "b1": weights(24),
              "w2": weights(24, 1, 2, 2, seed=1), "b2": weights(1)}
    graph = Graph(nodes, ["x"], ["y"], consts)
    x = rng.uniform(-2, 2, (1, 3, 11, 13)).astype(np.float32)
    with Model(graph, device, precision=PrecisionPlan("fp16")) as model:
        spec = model.plan(x.shape).spec
        ops = [(n.op, str(spec.dtype(n.outputs[0]))) for n in spec.graph.nodes]
        got = model.run(x)
        h = model.graph.nodes[0]
    assert ops == [("StorageCast", "float16"), ("Conv", "float16"), ("StorageCast", "float32"),
                   ("ConvTransposePair", "float32")], ops
    # the fp32 pair on the conv's fp16 map: the conv in fp16 (a Relu after it, which changes nothing, makes the
    # output in fp32), then the two upsamplings in fp32
    with Model(Graph([h, Node("Relu", "same", ["h"], ["r"])], ["x"], ["r"], consts), device,
               precision=PrecisionPlan("fp16")) as conv:
        mid = conv.run(x)
    with Model(Graph(db_head_upsampling()[:2], ["x"], ["s"], consts), device) as pair:
        want = pair.run(mid)
    assert np.array_equal(got, want), f"not the fp32 pair's answer on the fp16 map; seed {seed}"


@pytest.mark.parametrize(("why", "k1", "second", "middle"), [
    ("the middle map read elsewhere too", (2, 2), {}, 6),
    ("a kernel larger than its stride", (2, 2), {"pads": [1, 1, 1, 1], "kernel_shape": [4, 4]}, 6),
    ("padded", (2, 2), {"pads": [0, 0, 1, 1]}, 6),
    ("more middle channels than registers hold", (2, 2), {}, 65),
])
def test_db_head_s_upsamplings_stay_apart_where_the_pair_cannot_take_them(
        device: Device, why: str, k1: tuple[int, int], second: dict[str, object], middle: int) -> None:
    nodes = db_head_upsampling(k1, **second)
    outputs = ["y", "m"] if why.startswith("the middle map read") else ["y"]
    k2 = [int(v) for v in second.get("kernel_shape", [2, 2])]  # type: ignore[attr-defined]
    graph = Graph(nodes, ["x"], outputs, {"w1": weights(3, middle, *k1), "b1": weights(middle),
                                          "w2": weights(middle, 2, *k2), "b2": weights(2)})
    with Model(graph, device) as model:
        ops = [n.op for n in model.plan((1, 3, 5, 6)).spec.graph.nodes]
    assert ops == ["ConvTranspose", "ConvTranspose", "Relu"], (why, ops)


def stem_pool_concat(**pool: object) -> list[Node]:
    """PP-HGNet's stem after its first conv: Concat(MaxPool(x) (2×2, stride 1, SAME_UPPER), conv(x)), then a
    Relu (so that the Concat makes no output: an output's producer stores fp32). `pool`: other MaxPool
    attributes."""
    attrs = {"kernel_shape": [2, 2], "strides": [1, 1], "auto_pad": "SAME_UPPER", **pool}
    return [Node("MaxPool", "pool", ["x"], ["m"], attrs),
            Node("Conv", "conv", ["x", "w"], ["c"], {}),
            Node("Concat", "cat", ["m", "c"], ["s"], {"axis": 1}),
            Node("Relu", "after", ["s"], ["y"])]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_a_stem_s_pool_and_concat_become_one_dispatch(device: Device, precision: str) -> None:
    """Concat(MaxPool(a), b) → one Concat that pools a on the way, bit for bit the two nodes' answer."""
    rng, seed = fresh_rng()
    graph = Graph(stem_pool_concat(), ["x"], ["y"], {"w": weights(5, 3, 1, 1)})
    x = rng.uniform(-2, 2, (2, 3, 9, 14)).astype(np.float32)
    (fused_ops, fused), (unfused_ops, unfused) = with_and_without(device, graph, precision, "fuse_pool_concat", x)
    assert fused_ops == ["Conv", "Concat", "Relu"] and "MaxPool" in unfused_ops, (fused_ops, unfused_ops)
    assert np.array_equal(fused, unfused), f"{precision}: not bit for bit; seed {seed}"


@pytest.mark.parametrize(("why", "pool", "outputs"), [
    ("the pooled map read elsewhere too", {}, ["y", "m"]),
    ("a strided pool", {"strides": [2, 2], "auto_pad": "NOTSET"}, ["y"]),
    ("pads that shrink the map", {"auto_pad": "NOTSET", "pads": [0, 0, 0, 0]}, ["y"]),
])
def test_a_pool_stays_apart_where_the_concat_cannot_take_it(device: Device, why: str, pool: dict[str, object],
                                                            outputs: list[str]) -> None:
    nodes = stem_pool_concat(**pool)
    if "strides" in pool or "pads" in pool:  # the conv's map must match the smaller pooled one
        nodes[1] = Node("MaxPool", "conv", ["x"], ["c"], {"kernel_shape": [2, 2], **pool})
    graph = Graph(nodes, ["x"], outputs, {"w": weights(3, 3, 1, 1)})
    with Model(graph, device) as model:
        nodes_planned = model.plan((1, 3, 8, 10)).spec.graph.nodes
    names = [n.name for n in nodes_planned]
    assert "pool" in names and "pool_first" not in nodes_planned[names.index("cat")].attrs, (why, names)


def stem_block() -> list[Node]:
    """PP-HGNetV2's stem after its first conv: Concat(MaxPool(x), Conv(Conv(x))), the pool and both convolutions
    2×2 at stride 1, SAME_UPPER, then a Relu (so that the Concat makes no output: an output's producer stores
    fp32)."""
    same = {"kernel_shape": [2, 2], "strides": [1, 1], "auto_pad": "SAME_UPPER"}
    return [Node("Conv", "stem2a", ["x", "w1", "b1"], ["a"], {**same, "activation": "relu"}),
            Node("Conv", "stem2b", ["a", "w2", "b2"], ["b"], {**same, "activation": "relu"}),
            Node("MaxPool", "pool", ["x"], ["m"], same),
            Node("Concat", "cat", ["m", "b"], ["s"], {"axis": 1}),
            Node("Relu", "after", ["s"], ["y"])]


STEM_WEIGHTS = {"w1": weights(2, 3, 2, 2), "b1": weights(2), "w2": weights(3, 2, 2, 2, seed=1), "b2": weights(3)}


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_a_stem_s_convolutions_join_its_pooled_concat_in_fp32(device: Device, precision: str) -> None:
    """Concat(MaxPool(a), Conv(Conv(a))) → one StemConcat in fp32, bit for bit the direct kernel's and the pooled
    Concat's answer (a map large enough that the direct kernel takes the convolutions apart); in fp16 a device
    with cooperative matrices runs those tap by tap, so they stay apart."""
    rng, seed = fresh_rng()
    graph = Graph(stem_block(), ["x"], ["y"], dict(STEM_WEIGHTS))
    x = np.maximum(rng.uniform(-2, 2, (1, 3, 64, 128)), 0).astype(np.float32)
    (fused_ops, fused), (unfused_ops, unfused) = with_and_without(device, graph, precision, "fuse_stem_concat", x)
    assert unfused_ops == ["Conv", "Conv", "Concat", "Relu"], unfused_ops
    assert fused_ops == (["StemConcat", "Relu"] if precision == "fp32" else unfused_ops), fused_ops
    assert np.array_equal(fused, unfused), f"{precision}: not bit for bit; seed {seed}"


def test_a_stem_s_convolutions_stay_apart_where_the_middle_map_is_read_elsewhere(device: Device) -> None:
    graph = Graph(stem_block(), ["x"], ["y", "a"], dict(STEM_WEIGHTS))
    with Model(graph, device) as model:
        ops = [n.op for n in model.plan((1, 3, 16, 20)).spec.graph.nodes]
    assert "StemConcat" not in ops and ops.count("Conv") == 2, ops


NEAREST_FLOOR = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}


def fpn_concat(near: dict[str, object] | None = None) -> tuple[list[Node], dict[str, np.ndarray]]:
    """DB's neck in small: three levels of x (strides 1, 2, 4), the coarser two upsampled to the finest by
    nearest Resizes (Paddle2ONNX's modes; `near`: the ×4 one's instead) and joined on channels, then a Relu."""
    nodes = [Node("Conv", "f0", ["x", "w0"], ["p0"], {"pads": [1, 1, 1, 1]}),
             Node("Conv", "f1", ["x", "w1"], ["p1"], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
             Node("Conv", "f2", ["p1", "w2"], ["p2"], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
             Node("Resize", "up4", ["p2", "roi", "s4"], ["u2"], dict(NEAREST_FLOOR if near is None else near)),
             Node("Resize", "up2", ["p1", "roi", "s2"], ["u1"], {"mode": "nearest"}),  # half_pixel, round: also ⌊y/2⌋
             Node("Concat", "cat", ["u2", "u1", "p0"], ["s"], {"axis": 1}),
             Node("Relu", "after", ["s"], ["y"])]
    consts = {"w0": weights(2, 3, 3, 3), "w1": weights(3, 3, 3, 3, seed=1), "w2": weights(4, 3, 3, 3, seed=2),
              "roi": np.zeros(0, np.float32), "s4": np.array([1, 1, 4, 4], np.float32),
              "s2": np.array([1, 1, 2, 2], np.float32)}
    return nodes, consts


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_an_fpn_s_upsamplings_and_concat_become_one_dispatch(device: Device, precision: str) -> None:
    """Concat(Resize(a), Resize(b), c), nearest by integer factors → one Concat that gathers a and b on the way,
    bit for bit the three nodes' answer."""
    rng, seed = fresh_rng()
    nodes, consts = fpn_concat()
    graph = Graph(nodes, ["x"], ["y"], consts)
    x = rng.uniform(-2, 2, (1, 3, 12, 20)).astype(np.float32)
    (fused_ops, fused), (unfused_ops, unfused) = with_and_without(device, graph, precision, "fuse_upsample_concat",
                                                                  x)
    assert fused_ops == ["Conv", "Conv", "Conv", "Concat", "Relu"], fused_ops
    assert unfused_ops.count("Resize") == 2, unfused_ops
    assert np.array_equal(fused, unfused), f"{precision}: not bit for bit; seed {seed}"


@pytest.mark.parametrize(("why", "near", "outputs"), [
    ("the upsampled map read elsewhere too", None, ["y", "u2"]),
    ("rounding that does not land on floor(y / 4)", {**NEAREST_FLOOR, "nearest_mode": "round_prefer_ceil"}, ["y"]),
    ("linear", {"mode": "linear"}, ["y"]),
])
def test_an_upsampling_stays_apart_where_the_concat_cannot_gather_it(device: Device, why: str,
                                                                     near: dict[str, object] | None,
                                                                     outputs: list[str]) -> None:
    nodes, consts = fpn_concat(near)
    with Model(Graph(nodes, ["x"], outputs, consts), device) as model:
        planned = model.plan((1, 3, 8, 12)).spec.graph.nodes
    names = [n.name for n in planned]
    assert "up4" in names and "up2" not in names, (why, names)
    assert planned[names.index("cat")].attrs["upsample"] == [1, 2, 1], (why, names)


def fpn_excite_add(near: dict[str, object] | None = None) -> tuple[list[Node], dict[str, np.ndarray]]:
    """An FPN's top-down step in small: the lateral map l (x upsampled 2× by a linear Resize) excited by an SE
    block, plus the coarser level x upsampled 2× by a nearest Resize (Paddle2ONNX's modes; `near`: others), then a
    Relu (so that the sum makes no output: an output's producer stores fp32)."""
    nodes = [Node("Resize", "lateral", ["x", "roi", "s2"], ["l"], {"mode": "linear"}),
             Node("GlobalAveragePool", "pool", ["l"], ["p"]),
             *se_block("se", "p", "l", "e"),
             Node("Resize", "up", ["x", "roi", "s2"], ["u"], dict(NEAREST_FLOOR if near is None else near)),
             Node("Add", "sum", ["u", "e"], ["s"]),
             Node("Relu", "after", ["s"], ["y"])]
    return nodes, {"roi": np.zeros(0, np.float32), "s2": np.array([1, 1, 2, 2], np.float32), **se_weights("se", 6, 2)}


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_an_fpn_s_upsample_and_add_joins_the_excitation_of_its_lateral_map(device: Device, precision: str) -> None:
    """Resize(x) + Excite(l), the Resize nearest by an integer factor → the Excite adding x upsampled, bit for bit
    the two dispatches' answer."""
    rng, seed = fresh_rng()
    nodes, consts = fpn_excite_add()
    graph = Graph(nodes, ["x"], ["y"], consts)
    x = rng.uniform(-2, 2, (2, 6, 7, 11)).astype(np.float32)
    (fused_ops, fused), (unfused_ops, unfused) = with_and_without(device, graph, precision,
                                                                  "fuse_excite_upsample_add", x)
    assert fused_ops == ["Resize", "GlobalAveragePool", "Excite", "Relu"], fused_ops
    assert unfused_ops == ["Resize", "GlobalAveragePool", "Excite", "Resize", "Relu"], unfused_ops
    assert np.array_equal(fused, unfused), f"{precision}: not bit for bit; seed {seed}"


@pytest.mark.parametrize(("why", "near", "outputs"), [
    ("the excitation read elsewhere too", None, ["y", "e"]),
    ("rounding that does not land on floor(y / 2)", {**NEAREST_FLOOR, "nearest_mode": "round_prefer_ceil"}, ["y"]),
])
def test_an_upsample_and_add_stays_apart_where_the_excitation_cannot_take_it(device: Device, why: str,
                                                                             near: dict[str, object] | None,
                                                                             outputs: list[str]) -> None:
    nodes, consts = fpn_excite_add(near)
    with Model(Graph(nodes, ["x"], outputs, consts), device) as model:
        planned = model.plan((1, 6, 5, 8)).spec.graph.nodes
    ops = [(n.op, n.name) for n in planned]
    assert ("Resize", "up") in ops and "upsample" not in planned[ops.index(("Excite", "se"))].attrs, (why, ops)


def svtr_attention(heads: int, d: int, *, add: bool = True, tag: str = "") -> tuple[list[Node], dict[str, np.ndarray]]:
    """SVTR's attention as Paddle2ONNX exports it, from x (N, T, 3·heads·d) to y (N, T, heads·d), then a
    projection (so that the attention's last node makes no output: an output's producer stores fp32)."""
    i64 = np.int64
    nodes = [Node("Reshape", f"{tag}split_view", ["x", f"{tag}qkv_shape"], [f"{tag}qkv5"]),
             Node("Transpose", f"{tag}split", [f"{tag}qkv5"], [f"{tag}qkvT"], {"perm": [2, 0, 3, 1, 4]})]
    for i, part in enumerate("qkv"):
        nodes += [Node("Slice", f"{tag}cut_{part}", [f"{tag}qkvT", f"{tag}s{i}", f"{tag}e{i}", f"{tag}axis0"],
                       [f"{tag}{part}5"]),
                  Node("Squeeze", f"{tag}squeeze_{part}", [f"{tag}{part}5", f"{tag}axis0"], [f"{tag}{part}"])]
    nodes += [Node("Mul", f"{tag}scale", [f"{tag}q", f"{tag}c_scale"], [f"{tag}qs"])]
    q = f"{tag}qs"
    if add:
        nodes += [Node("Add", f"{tag}offset", [f"{tag}qs", f"{tag}c_add"], [f"{tag}qa"])]
        q = f"{tag}qa"
    nodes += [Node("Transpose", f"{tag}kt", [f"{tag}k"], [f"{tag}kT"], {"perm": [0, 1, 3, 2]}),
              Node("MatMul", f"{tag}scores", [q, f"{tag}kT"], [f"{tag}s"]),
              Node("Softmax", f"{tag}weights", [f"{tag}s"], [f"{tag}p"], {"axis": 3}),
              Node("MatMul", f"{tag}mix", [f"{tag}p", f"{tag}v"], [f"{tag}o"]),
              Node("Transpose", f"{tag}back", [f"{tag}o"], [f"{tag}oT"], {"perm": [0, 2, 1, 3]}),
              Node("Reshape", f"{tag}merge", [f"{tag}oT", f"{tag}merged_shape"], [f"{tag}m"]),
              Node("MatMul", f"{tag}proj", [f"{tag}m", f"{tag}w_proj"], ["y"])]
    consts = {f"{tag}qkv_shape": np.array([0, 0, 3, heads, d], i64), f"{tag}merged_shape": np.array([0, 0, -1], i64),
              f"{tag}axis0": np.array([0], i64), f"{tag}c_scale": np.array([d ** -0.5], np.float32),
              f"{tag}c_add": np.array(0.0, np.float32), f"{tag}w_proj": weights(heads * d, 8)}
    for i in range(3):
        consts[f"{tag}s{i}"], consts[f"{tag}e{i}"] = np.array([i], i64), np.array([i + 1], i64)
    return nodes, consts


def test_svtr_attention_becomes_one_dispatch(device: Device) -> None:
    """The eleven nodes of SVTR's attention → one Attention node, which computes their answer bit for bit on
    the device, in both precisions, where the second product's tile is whole (T = 40) and sliced (T = 200); at
    T = 1, where the products ran on gemv.comp, the nodes stay."""
    rng, seed = fresh_rng()
    nodes, consts = svtr_attention(heads=4, d=15)
    graph = Graph(nodes, ["x"], ["y"], consts)
    for precision in ("fp32", "fp16"):
        for t in (40, 200, 1):
            x = rng.uniform(-2, 2, (2 if t < 100 else 1, t, 3 * 4 * 15)).astype(np.float32)
            (ops, fused), (_, unfused) = with_and_without(device, graph, precision, "fuse_attention", x)
            joined = t > 1
            assert ("Attention" in ops) == joined and ops.count("MatMul") == (1 if joined else 3), (t, ops)
            assert np.array_equal(fused, unfused), f"{precision} T={t}: not bit for bit; seed {seed}"
    with Model(graph, device) as model:  # and the fused NumPy graph is the unfused one's, bit for bit
        x = rng.uniform(-2, 2, (2, 40, 180)).astype(np.float32)
        unfused = Graph(list(graph.nodes), ["x"], ["y"], dict(graph.constants))
        want = run_numpy(specialize(unfused, {"x": x.shape}), {"x": x})["y"]
        assert np.array_equal(run_numpy(specialize_for(model.graph, x.shape, precision=False), {"x": x})["y"], want)


def test_attention_stays_apart_where_a_part_is_read_elsewhere(device: Device) -> None:
    """The softmax's weights read by another node too (here a second output): the eleven nodes stay."""
    nodes, consts = svtr_attention(heads=2, d=8, add=False)
    graph = Graph(nodes, ["x"], ["y", "p"], consts)
    with Model(graph, device) as model:
        assert "Attention" not in [n.op for n in model.plan((1, 10, 48)).spec.graph.nodes]


def test_a_value_asked_for_is_never_fused_away(device: Device) -> None:
    """An SE block's gate read back (as a calibration reads every node's value) keeps its nodes, and the ranges of
    a calibration cover the nodes a plan would fuse, on the device and on the NumPy executor."""
    rng, seed = fresh_rng()
    nodes = [Node("GlobalAveragePool", "pool", ["x"], ["p"]), *se_block("sa", "p", "x", "m"),
             Node("Relu", "after", ["m"], ["y"])]
    graph = Graph(nodes, ["x"], ["y"], se_weights("sa", 8, 2))
    x = rng.uniform(-1, 1, (1, 8, 9, 10)).astype(np.float32)
    want = run_numpy(specialize(graph, {"x": x.shape}), {"x": x}, keep=lambda name: name == "sag")["sag"]
    with Model(graph, device) as model:
        assert "Excite" in [n.op for n in model.plan(x.shape).spec.graph.nodes]
        plan = model.plan(x.shape, extra_outputs=["sag"])
        assert [n.op for n in plan.spec.graph.nodes] == ["GlobalAveragePool", "Conv", "Conv", "Mul", "Relu"]
        got = plan.run(x)["sag"]
        assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-5, seed
        on_device = value_ranges(model, [x])
    with Model(graph, None) as model:
        on_numpy = value_ranges(model, [x])
    for ranges in (on_device, on_numpy):
        assert set(ranges) == {"pool", "sa1", "sa2", "sa", "after"}, sorted(ranges)
        assert abs(ranges["sa2"].max_abs - float(np.abs(want).max())) <= 1e-6, seed
