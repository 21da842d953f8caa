"""vkocr.engine.ops NumPy references vs onnxruntime (CPU) on single-node ONNX graphs with fresh random inputs."""

from __future__ import annotations

import itertools

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from vkocr.engine.ops import (
    ACTIVATIONS,
    BINARY_OPS,
    UNARY_OPS,
    apply_activation,
    argmax_with_max,
    average_pool2d,
    binary,
    broadcast_shape,
    concat,
    conv2d,
    conv_transpose2d,
    gemm,
    global_average_pool,
    layer_norm,
    matmul,
    max_pool2d,
    reduce_mean,
    resize,
    slice_,
    softmax,
    transpose,
    unary,
)

rng = np.random.default_rng()  # deliberately unseeded: every run sees fresh data
TOL = 1e-5
INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)


def rand(*shape: int, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def run_ort(nodes: list, feeds: dict[str, np.ndarray], outputs: list[str], *,
            inits: dict[str, np.ndarray] | None = None, opset: int = 13,
            out_types: dict[str, int] | None = None) -> list[np.ndarray]:
    """Build a graph from ``nodes`` (feeds become graph inputs, inits initializers) and run it in ORT."""
    out_types = out_types or {}
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in feeds.items()],
        [helper.make_tensor_value_info(o, out_types.get(o, TensorProto.FLOAT), None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(outputs, feeds)


def check(out: np.ndarray, ref: np.ndarray, tol: float = TOL) -> None:
    out, ref = np.asarray(out), np.asarray(ref)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    assert out.dtype == ref.dtype, (out.dtype, ref.dtype)
    diff = np.linalg.norm((out.astype(np.float64) - ref).ravel())
    den = np.linalg.norm(ref.astype(np.float64).ravel()) or 1.0
    assert diff / den <= tol, f"relative L2 error {diff / den:.3g}"


# ----------------------------------------------------------------------------------------- activations
ACT_CASES = [("none", 0.0, 0.0), ("relu", 0.0, 0.0), ("clip", 0.0, 6.0), ("clip", -0.5, 0.7),
             ("hardsigmoid", 0.2, 0.5), ("hardsigmoid", 1 / 6, 0.5), ("hardswish", 1 / 6, 0.5),
             ("hardswish", 0.2, 0.4), ("sigmoid", 0.0, 0.0), ("leakyrelu", 0.1, 0.0), ("gelu", 0.0, 0.0),
             ("silu", 0.0, 0.0)]


def act_nodes(kind: str, alpha: float, beta: float, src: str, dst: str) -> tuple[list, dict]:
    """ONNX node(s) computing apply_activation(src) into dst, plus initializers they need."""
    if kind == "none":
        return [helper.make_node("Identity", [src], [dst])], {}
    if kind == "relu":
        return [helper.make_node("Relu", [src], [dst])], {}
    if kind == "clip":
        return ([helper.make_node("Clip", [src, "cmin", "cmax"], [dst])],
                {"cmin": np.float32(alpha), "cmax": np.float32(beta)})
    if kind == "hardsigmoid":
        return [helper.make_node("HardSigmoid", [src], [dst], alpha=alpha, beta=beta)], {}
    if kind == "hardswish" and (alpha, beta) == (1 / 6, 0.5):
        return [helper.make_node("HardSwish", [src], [dst])], {}
    if kind == "hardswish":
        return [helper.make_node("HardSigmoid", [src], ["hs"], alpha=alpha, beta=beta),
                helper.make_node("Mul", [src, "hs"], [dst])], {}
    if kind == "sigmoid":
        return [helper.make_node("Sigmoid", [src], [dst])], {}
    if kind == "leakyrelu":
        return [helper.make_node("LeakyRelu", [src], [dst], alpha=alpha)], {}
    if kind == "silu":  # as Paddle2ONNX exports swish: x · Sigmoid(x)
        return [helper.make_node("Sigmoid", [src], ["ss"]), helper.make_node("Mul", [src, "ss"], [dst])], {}
    if kind == "gelu":  # as Paddle2ONNX exports it (opset 11)
        return [helper.make_node("Div", [src, "sqrt2"], ["gs"]), helper.make_node("Erf", ["gs"], ["ge"]),
                helper.make_node("Add", ["ge", "gone"], ["g1"]), helper.make_node("Mul", [src, "g1"], ["gm"]),
                helper.make_node("Mul", ["gm", "ghalf"], [dst])], \
            {"sqrt2": np.float32(np.sqrt(2)), "gone": np.float32(1), "ghalf": np.float32(0.5)}
    raise AssertionError(kind)


def test_activation_cases_cover_all_kinds() -> None:
    assert {c[0] for c in ACT_CASES} == set(ACTIVATIONS)
    with pytest.raises(ValueError):
        apply_activation(rand(3), "mish")


@pytest.mark.parametrize("kind,alpha,beta", ACT_CASES)
def test_apply_activation(kind: str, alpha: float, beta: float) -> None:
    x = rand(3, 4, 50, lo=-8, hi=8)
    nodes, inits = act_nodes(kind, alpha, beta, "x", "y")
    (ref,) = run_ort(nodes, {"x": x}, ["y"], inits=inits, opset=14)
    check(apply_activation(x, kind, alpha, beta), ref)


# ----------------------------------------------------------------------------------------------- conv
# (N, Cin, H, W, Cout, kernel, strides, pads (t, l, b, r), dilations, group, bias)
CONV_CASES = [
    (1, 3, 17, 19, 8, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True),
    (2, 4, 15, 12, 6, (3, 3), (2, 2), (0, 1, 1, 0), (1, 1), 2, True),
    (1, 8, 13, 11, 8, (5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 8, True),  # depthwise
    (1, 16, 20, 21, 16, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 16, False),  # depthwise, stride 2
    (1, 6, 14, 16, 4, (3, 3), (1, 1), (2, 1, 2, 3), (2, 2), 1, True),  # dilation 2
    (2, 12, 7, 9, 24, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),  # pointwise
    (1, 12, 9, 25, 8, (3, 1), (2, 1), (1, 0, 1, 0), (1, 1), 4, True),  # grouped, Cout/group=2
    (1, 4, 11, 10, 6, (2, 3), (1, 2), (0, 2, 1, 1), (2, 1), 2, False),
    (1, 5, 23, 17, 7, (7, 7), (3, 3), (3, 3, 3, 3), (1, 1), 1, True),
]


def _conv_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, strides: tuple, pads: tuple, dil: tuple,
              group: int, kind: str = "none", alpha: float = 0.0, beta: float = 0.0) -> np.ndarray:
    ins = ["x", "w"] + (["b"] if b is not None else [])
    feeds = {"x": x, "w": w} | ({"b": b} if b is not None else {})
    node = helper.make_node("Conv", ins, ["c"], strides=list(strides), pads=list(pads),
                            dilations=list(dil), group=group, kernel_shape=list(w.shape[2:]))
    an, inits = act_nodes(kind, alpha, beta, "c", "y")
    return run_ort([node, *an], feeds, ["y"], inits=inits, opset=14)[0]


@pytest.mark.parametrize("case", CONV_CASES, ids=[f"conv{i}" for i in range(len(CONV_CASES))])
def test_conv2d(case: tuple) -> None:
    n, cin, h, w_, cout, k, s, p, d, g, has_b = case
    x, w = rand(n, cin, h, w_), rand(cout, cin // g, *k)
    b = rand(cout) if has_b else None
    ref = _conv_ref(x, w, b, s, p, d, g)
    check(conv2d(x, w, b, strides=s, pads=p, dilations=d, group=g), ref)


@pytest.mark.parametrize("kind,alpha,beta", ACT_CASES)
@pytest.mark.parametrize("ci", [1, 3])
def test_conv2d_fused_activation(ci: int, kind: str, alpha: float, beta: float) -> None:
    n, cin, h, w_, cout, k, s, p, d, g, _ = CONV_CASES[ci]
    x, w, b = rand(n, cin, h, w_, lo=-3, hi=3), rand(cout, cin // g, *k), rand(cout)
    ref = _conv_ref(x, w, b, s, p, d, g, kind, alpha, beta)
    check(conv2d(x, w, b, strides=s, pads=p, dilations=d, group=g, activation=kind, alpha=alpha, beta=beta),
          ref)


# (N, Cin, H, W, Cout, kernel, strides, pads, dilations, group, output_padding, bias)
CONVT_CASES = [
    (1, 4, 7, 9, 6, (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), 1, (0, 0), True),
    (2, 6, 5, 6, 4, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 2, (1, 1), True),
    (1, 8, 6, 5, 8, (4, 4), (2, 2), (1, 0, 2, 1), (1, 1), 4, (1, 0), False),
    (1, 8, 6, 7, 8, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 8, (1, 1), True),  # depthwise
    (1, 3, 5, 5, 3, (3, 3), (1, 1), (0, 0, 0, 0), (2, 2), 1, (0, 0), True),
    (1, 6, 4, 7, 9, (3, 2), (3, 2), (2, 0, 0, 1), (1, 2), 3, (2, 1), True),
]


@pytest.mark.parametrize("case", CONVT_CASES, ids=[f"convT{i}" for i in range(len(CONVT_CASES))])
def test_conv_transpose2d(case: tuple) -> None:
    n, cin, h, w_, cout, k, s, p, d, g, op, has_b = case
    x, w = rand(n, cin, h, w_), rand(cin, cout // g, *k)
    b = rand(cout) if has_b else None
    feeds = {"x": x, "w": w} | ({"b": b} if has_b else {})
    node = helper.make_node("ConvTranspose", list(feeds), ["y"], strides=list(s), pads=list(p),
                            dilations=list(d), group=g, output_padding=list(op), kernel_shape=list(k))
    (ref,) = run_ort([node], feeds, ["y"])
    check(conv_transpose2d(x, w, b, strides=s, pads=p, dilations=d, group=g, output_padding=op), ref)


# ----------------------------------------------------------------------------------------------- pool
# (shape, kernel, strides, pads)
POOL_CASES = [
    ((1, 3, 11, 13), (3, 3), (2, 2), (0, 0, 0, 0)),
    ((2, 4, 10, 9), (2, 2), (2, 2), (0, 0, 0, 0)),
    ((1, 2, 12, 15), (3, 3), (2, 2), (1, 1, 1, 1)),
    ((1, 2, 9, 8), (3, 2), (2, 1), (1, 0, 0, 1)),
    ((1, 1, 7, 7), (2, 2), (3, 3), (1, 1, 1, 1)),  # ceil: last window would start in the padding
    ((1, 3, 8, 32), (2, 2), (2, 2), (0, 0, 0, 0)),
    ((2, 2, 6, 13), (3, 5), (1, 3), (1, 2, 2, 1)),
]


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("case", POOL_CASES, ids=[f"pool{i}" for i in range(len(POOL_CASES))])
def test_max_pool2d(case: tuple, ceil_mode: bool) -> None:
    shape, k, s, p = case
    x = rand(*shape, lo=-3, hi=-1)  # all negative: a zero-padded max would be wrong
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=list(k), strides=list(s), pads=list(p),
                            ceil_mode=int(ceil_mode))
    (ref,) = run_ort([node], {"x": x}, ["y"])
    check(max_pool2d(x, kernel=k, strides=s, pads=p, ceil_mode=ceil_mode), ref)


@pytest.mark.parametrize("count_include_pad", [False, True])
@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("case", POOL_CASES, ids=[f"pool{i}" for i in range(len(POOL_CASES))])
def test_average_pool2d(case: tuple, ceil_mode: bool, count_include_pad: bool) -> None:
    shape, k, s, p = case
    x = rand(*shape, lo=0.5, hi=2)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=list(k), strides=list(s),
                            pads=list(p), ceil_mode=int(ceil_mode), count_include_pad=int(count_include_pad))
    (ref,) = run_ort([node], {"x": x}, ["y"])
    check(average_pool2d(x, kernel=k, strides=s, pads=p, ceil_mode=ceil_mode,
                         count_include_pad=count_include_pad), ref)


@pytest.mark.parametrize("shape", [(1, 3, 7, 9), (2, 16, 1, 1), (2, 5, 32, 3)])
def test_global_average_pool(shape: tuple) -> None:
    x = rand(*shape, lo=-1, hi=3)
    (ref,) = run_ort([helper.make_node("GlobalAveragePool", ["x"], ["y"])], {"x": x}, ["y"])
    check(global_average_pool(x), ref)


# ---------------------------------------------------------------------------------------- elementwise
BCAST_CASES = [((2, 3, 4, 5), (2, 3, 4, 5)), ((2, 3, 4, 5), (5,)), ((2, 3, 4, 5), (1, 3, 1, 1)),
               ((1, 3, 1, 5), (2, 1, 4, 1)), ((4, 5), (2, 3, 4, 5)), ((2, 1, 4, 1), (3, 1, 5)),
               ((), (2, 3)), ((7,), (1,)), ((6, 1), (1,))]


@pytest.mark.parametrize("op", BINARY_OPS)
@pytest.mark.parametrize("shapes", BCAST_CASES, ids=[f"{a}x{b}" for a, b in BCAST_CASES])
def test_binary(op: str, shapes: tuple) -> None:
    sa, sb = shapes
    if op == "pow":
        a, b = rand(*sa, lo=0.5, hi=2), rand(*sb, lo=-2, hi=2)
    else:
        a = rand(*sa, lo=-2, hi=2)
        b = rand(*sb, lo=0.5, hi=2) * rng.choice(np.float32([-1, 1]), size=sb)
    (ref,) = run_ort([helper.make_node(op.capitalize(), ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    check(binary(op, a, b), ref)
    assert broadcast_shape(sa, sb) == ref.shape


def test_broadcast_shape_error() -> None:
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4,\)"):
        broadcast_shape((2, 3), (4,))
    with pytest.raises(ValueError):
        binary("add", rand(2, 3), rand(2, 4))
    q = binary("div", np.int64([7, -7, 7, -7, 6]), np.int64([2, 2, -2, -2, -3]))
    assert q.tolist() == [3, -3, -3, 3, -2]  # integer Div truncates toward zero


UNARY_CASES = [
    ("sqrt", 0.0, 0.0), ("sigmoid", 0.0, 0.0), ("hardsigmoid", 0.2, 0.5), ("hardsigmoid", 1 / 6, 0.5),
    ("relu", 0.0, 0.0), ("clip", -1.0, 2.5), ("exp", 0.0, 0.0), ("tanh", 0.0, 0.0), ("neg", 0.0, 0.0),
    ("abs", 0.0, 0.0), ("reciprocal", 0.0, 0.0), ("leakyrelu", 0.01, 0.0), ("leakyrelu", 0.3, 0.0),
    ("hardswish", 1 / 6, 0.5), ("erf", 0.0, 0.0), ("gelu", 0.0, 0.0), ("silu", 0.0, 0.0),
]


@pytest.mark.parametrize("op,alpha,beta", UNARY_CASES)
def test_unary(op: str, alpha: float, beta: float) -> None:
    assert op in UNARY_OPS
    x = rand(4, 5, 60, lo=0.05, hi=4) if op in ("sqrt", "reciprocal") else rand(4, 5, 60, lo=-5, hi=5)
    if op in ("clip", "hardsigmoid", "hardswish", "leakyrelu", "relu", "sigmoid", "gelu", "silu"):
        nodes, inits = act_nodes(op, alpha, beta, "x", "y")
    else:
        name = {"sqrt": "Sqrt", "exp": "Exp", "tanh": "Tanh", "neg": "Neg", "abs": "Abs",
                "reciprocal": "Reciprocal", "erf": "Erf"}[op]
        nodes, inits = [helper.make_node(name, ["x"], ["y"])], {}
    (ref,) = run_ort(nodes, {"x": x}, ["y"], inits=inits, opset=14)
    check(unary(op, x, alpha, beta), ref)


def test_unary_covers_all_ops() -> None:
    assert {c[0] for c in UNARY_CASES} == set(UNARY_OPS)
    with pytest.raises(ValueError):
        unary("log", rand(3))


# --------------------------------------------------------------------------------------------- resize
# (input shape, "scales"|"sizes", values for all 4 axes). These avoid the cases where onnxruntime departs
# from the ONNX reference (see RESIZE_ORT_DIVERGENT below).
RESIZE_CASES = [
    ((1, 2, 5, 7), "scales", (1, 1, 2, 2)),
    ((2, 3, 4, 6), "scales", (1, 1, 1.5, 3)),
    ((1, 2, 12, 8), "scales", (1, 1, 0.5, 0.25)),
    ((1, 2, 4, 8), "scales", (1, 1, 1.25, 0.75)),
    ((1, 1, 8, 6), "scales", (1, 1, 0.375, 2.5)),
    ((1, 2, 5, 7), "sizes", (1, 2, 9, 14)),
    ((1, 2, 8, 11), "sizes", (1, 2, 3, 5)),
    ((1, 1, 4, 9), "sizes", (1, 1, 7, 3)),
    ((1, 1, 6, 3), "sizes", (1, 1, 6, 1)),
]
# onnxruntime computes in float32 and uses the integer output length for align_corners; the ONNX reference
# (which vkocr.engine.ops.resize follows) uses float64 and the float length in * scale. They differ when in * scale is
# not an integer (output size 6 vs 7 for 10 * 0.7; align_corners) or when a nearest source coordinate is an
# exact .5 tie only in float32 arithmetic (scale 2.3). These are checked against onnx.reference only.
RESIZE_ORT_DIVERGENT = [
    ((1, 1, 9, 10), "scales", (1, 1, 0.5, 0.7)),
    ((1, 2, 5, 7), "scales", (1, 1, 1.7, 2.3)),
]
RESIZE_MODES = [("nearest", nm) for nm in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")] + [
    ("linear", "round_prefer_floor")]
CTMS = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel")


def _resize_graph(case: tuple, mode: str, nearest_mode: str, ctm: str) -> tuple[list, dict]:
    _, kind, vals = case
    if kind == "scales":
        inputs, inits = ["x", "", "scales"], {"scales": np.float32(vals)}
    else:
        inputs, inits = ["x", "", "", "sizes"], {"sizes": np.int64(vals)}
    node = helper.make_node("Resize", inputs, ["y"], mode=mode, coordinate_transformation_mode=ctm,
                            nearest_mode=nearest_mode)
    return [node], inits


def _resize_ids(cases: list) -> list[str]:
    return [f"{c[1]}{c[0][2:]}->{c[2][2:]}" for c in cases]


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("mode,nearest_mode", RESIZE_MODES)
@pytest.mark.parametrize("case", RESIZE_CASES, ids=_resize_ids(RESIZE_CASES))
def test_resize(case: tuple, mode: str, nearest_mode: str, ctm: str) -> None:
    shape, kind, vals = case
    x = rand(*shape)
    nodes, inits = _resize_graph(case, mode, nearest_mode, ctm)
    (ref,) = run_ort(nodes, {"x": x}, ["y"], inits=inits)
    out = resize(x, **{kind: vals}, mode=mode, coordinate_transformation_mode=ctm, nearest_mode=nearest_mode)
    check(out, ref)


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("mode,nearest_mode", RESIZE_MODES)
@pytest.mark.parametrize("case", RESIZE_CASES + RESIZE_ORT_DIVERGENT,
                         ids=_resize_ids(RESIZE_CASES + RESIZE_ORT_DIVERGENT))
def test_resize_matches_onnx_reference_bitwise(case: tuple, mode: str, nearest_mode: str, ctm: str) -> None:
    shape, kind, vals = case
    x = rand(*shape)
    nodes, inits = _resize_graph(case, mode, nearest_mode, ctm)
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    (ref,) = ReferenceEvaluator(model).run(None, {"x": x})
    out = resize(x, **{kind: vals}, mode=mode, coordinate_transformation_mode=ctm, nearest_mode=nearest_mode)
    np.testing.assert_array_equal(out, ref)


# --------------------------------------------------------------------------------------------- layout
@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_concat(axis: int) -> None:
    base = [2, 3, 4, 5]
    xs = []
    for extra in (1, 3, 2):
        shp = list(base)
        shp[axis] = extra
        xs.append(rand(*shp))
    feeds = {f"x{i}": t for i, t in enumerate(xs)}
    (ref,) = run_ort([helper.make_node("Concat", list(feeds), ["y"], axis=axis)], feeds, ["y"])
    check(concat(xs, axis), ref)


def _slice_cases() -> list[tuple]:
    fixed = [
        ((10,), [2], [8], None, None), ((10,), [-3], [INT64_MAX], None, None), ((10,), [8], [2], None, [-2]),
        ((10,), [INT64_MAX], [INT64_MIN], None, [-1]), ((10,), [-1], [-100], [0], [-3]),
        ((10,), [100], [-100], None, [-1]), ((10,), [-100], [100], None, [4]),
        ((10,), [5], [5], None, None), ((10,), [3], [2**31 - 1], None, [-1]),
        ((4, 6, 5), [1, -1], [INT64_MAX, 0], [2, 1], [1, -1]),
        ((4, 6, 5), [0, 3], [-1, 1000], [-3, -1], None),
    ]
    g = np.random.default_rng(1234)  # seeded sweep of parameter combinations
    picks = [-12, -7, -5, -1, 0, 1, 2, 3, 4, 6, 9, 50, INT64_MAX, INT64_MIN]
    for _ in range(30):
        shape = tuple(int(v) for v in g.integers(1, 8, size=int(g.integers(1, 5))))
        axes = [int(a) for a in g.permutation(len(shape))[: int(g.integers(1, len(shape) + 1))]]
        axes = [a - len(shape) if g.random() < 0.3 else a for a in axes]
        starts = [int(g.choice(picks)) for _ in axes]
        ends = [int(g.choice(picks)) for _ in axes]
        steps = [int(g.choice([-3, -2, -1, 1, 2, 3])) for _ in axes]
        fixed.append((shape, starts, ends, axes, steps))
    return fixed


@pytest.mark.parametrize("case", _slice_cases())
def test_slice(case: tuple) -> None:
    shape, starts, ends, axes, steps = case
    x = rand(*shape)
    inits = {"s": np.int64(starts), "e": np.int64(ends)}
    ins = ["x", "s", "e"]
    if axes is not None or steps is not None:
        inits["a"] = np.int64(axes if axes is not None else range(len(starts)))
        ins.append("a")
    if steps is not None:
        inits["st"] = np.int64(steps)
        ins.append("st")
    (ref,) = run_ort([helper.make_node("Slice", ins, ["y"])], {"x": x}, ["y"], inits=inits)
    check(slice_(x, starts, ends, axes, steps), ref)


def _perms() -> list[tuple | None]:
    g = np.random.default_rng(99)
    return [None] + [tuple(int(p) for p in g.permutation(r)) for r in (1, 2, 3, 3, 4, 4, 4, 5, 5, 6)]


@pytest.mark.parametrize("perm", _perms())
def test_transpose(perm: tuple | None) -> None:
    x = rand(*[2, 3, 4, 5, 1, 3][: (4 if perm is None else len(perm))])
    attrs = {} if perm is None else {"perm": list(perm)}
    (ref,) = run_ort([helper.make_node("Transpose", ["x"], ["y"], **attrs)], {"x": x}, ["y"])
    check(transpose(x, perm), ref)


# --------------------------------------------------------------------------------------------- matmul
MATMUL_SHAPES = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 6)), ((4,), (4, 5)),
                 ((3, 4), (4,)), ((4,), (4,)), ((1, 3, 4), (2, 4, 5)), ((6, 1, 7, 16), (1, 3, 16, 2))]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul(sa: tuple, sb: tuple) -> None:
    a, b = rand(*sa), rand(*sb)
    (ref,) = run_ort([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    check(matmul(a, b), ref)


@pytest.mark.parametrize("c_shape", [None, (), (7,), (1, 7), (5, 1), (5, 7)])
@pytest.mark.parametrize("trans_a,trans_b", list(itertools.product([False, True], repeat=2)))
def test_gemm(trans_a: bool, trans_b: bool, c_shape: tuple | None) -> None:
    m, k, n = 5, 9, 7
    a = rand(*((k, m) if trans_a else (m, k)))
    b = rand(*((n, k) if trans_b else (k, n)))
    feeds = {"a": a, "b": b} | ({"c": rand(*c_shape)} if c_shape is not None else {})
    alpha, beta = (0.7, 1.3) if trans_a else (1.0, 1.0)
    node = helper.make_node("Gemm", list(feeds), ["y"], alpha=alpha, beta=beta, transA=int(trans_a),
                            transB=int(trans_b))
    (ref,) = run_ort([node], feeds, ["y"])
    check(gemm(a, b, feeds.get("c"), alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b), ref)


@pytest.mark.parametrize("kind,alpha,beta", [c for c in ACT_CASES if c[0] != "none"])
def test_gemm_fused_activation(kind: str, alpha: float, beta: float) -> None:
    a, b, c = rand(6, 10, lo=-2, hi=2), rand(8, 10), rand(8)
    nodes, inits = act_nodes(kind, alpha, beta, "g", "y")
    node = helper.make_node("Gemm", ["a", "b", "c"], ["g"], transB=1)
    (ref,) = run_ort([node, *nodes], {"a": a, "b": b, "c": c}, ["y"], inits=inits, opset=14)
    check(gemm(a, b, c, trans_b=True, activation=kind, act_alpha=alpha, act_beta=beta), ref)


# ------------------------------------------------------------------------------------------ normalize
@pytest.mark.parametrize("axis", [-1, 0, 1, 2, -2])
@pytest.mark.parametrize("scale", [1.0, 60.0])
def test_softmax(axis: int, scale: float) -> None:
    x = rand(2, 3, 4, 25) * np.float32(scale)
    (ref,) = run_ort([helper.make_node("Softmax", ["x"], ["y"], axis=axis)], {"x": x}, ["y"])
    check(softmax(x, axis), ref)


@pytest.mark.parametrize("shape,axis,with_bias,eps", [
    ((2, 5, 16), -1, True, 1e-5), ((2, 5, 16), -1, False, 1e-5), ((2, 3, 4, 5), 2, True, 1e-3),
    ((2, 3, 4, 5), 1, True, 1e-5), ((3, 40, 96), -1, True, 1e-6), ((2, 3, 4, 5), -3, False, 1e-5)])
def test_layer_norm(shape: tuple, axis: int, with_bias: bool, eps: float) -> None:
    x = rand(*shape, lo=-3, hi=5)
    scale, bias = rand(*shape[axis:]), rand(*shape[axis:])
    feeds = {"x": x, "s": scale} | ({"b": bias} if with_bias else {})
    node = helper.make_node("LayerNormalization", list(feeds), ["y"], axis=axis, epsilon=eps)
    (ref,) = run_ort([node], feeds, ["y"], opset=17)
    check(layer_norm(x, scale, bias if with_bias else None, axis=axis, epsilon=eps), ref)


@pytest.mark.parametrize("keepdims", [True, False])
@pytest.mark.parametrize("axes", [None, [1], [2, 3], [-1], [0, 2], [0, 1, 2, 3]])
def test_reduce_mean(axes: list | None, keepdims: bool) -> None:
    x = rand(2, 3, 7, 11, lo=-1, hi=3)  # mean well away from 0, where relative error is ill-conditioned
    attrs = {"keepdims": int(keepdims)} | ({"axes": axes} if axes is not None else {})
    (ref,) = run_ort([helper.make_node("ReduceMean", ["x"], ["y"], **attrs)], {"x": x}, ["y"])
    check(reduce_mean(x, axes, keepdims), ref)


# --------------------------------------------------------------------------------------------- argmax
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("ties", [False, True])
def test_argmax_with_max(axis: int, keepdims: bool, ties: bool) -> None:
    x = rand(4, 30, 97)
    if ties:  # few distinct values -> many ties; ONNX picks the first occurrence
        x = np.round(x * 2).astype(np.float32)
    node = helper.make_node("ArgMax", ["x"], ["i"], axis=axis, keepdims=int(keepdims))
    (ref,) = run_ort([node], {"x": x}, ["i"], out_types={"i": TensorProto.INT64})
    idx, val = argmax_with_max(x, axis, keepdims)
    assert idx.dtype == np.int32 and idx.shape == ref.shape
    np.testing.assert_array_equal(idx, ref)
    ref_val = np.take_along_axis(x, ref if keepdims else np.expand_dims(ref, axis), axis=axis)
    np.testing.assert_array_equal(val, ref_val if keepdims else np.squeeze(ref_val, axis))
