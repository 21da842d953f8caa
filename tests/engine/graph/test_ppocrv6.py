"""PP-OCRv6 small (the det and rec of rapidocr 3.10.0's wheel) through the engine: the blocks it adds beyond
PP-OCRv4 as small graphs, what the graph passes make of the two models, and both whole models on the real
driver and on the NumPy executor against onnxruntime, at small shapes, on fresh random inputs.

The model files come from the set-up (scripts/fetch_models.py, as ./test.sh runs it); without them the
model tests skip and say so.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.engine.graph.conftest import GetModel
from tests.engine.kernels.harness import fresh_rng
from tests.paths import MODELS
from vkocr.agent.ocr.model_files import PPOCRV6_SMALL, missing_or_bad
from vkocr.engine.device import Device
from vkocr.engine.graph.compare import onnxruntime_values, rel_err
from vkocr.engine.graph.model import Model
from vkocr.engine.graph.onnx_import import from_onnx, load_onnx
from vkocr.engine.graph.passes import describe, finalize, optimize
from vkocr.engine.graph.plan import Plan
from vkocr.engine.graph.specialize import specialize

DET_FILE, REC_FILE = PPOCRV6_SMALL.file("det"), PPOCRV6_SMALL.file("rec")
DET, REC = MODELS / DET_FILE.filename, MODELS / REC_FILE.filename
needs_models = pytest.mark.skipif(
    bool(missing_or_bad(MODELS, (DET_FILE, REC_FILE))),
    reason=f"PP-OCRv6 small det/rec absent from {MODELS} or damaged: scripts/fetch_models.py fetches them "
           f"({PPOCRV6_SMALL.wheel})")
BACKENDS = ("vulkan", "numpy")
TOLERANCE = 1e-4
DET_SHAPES = [(1, 3, 64, 64), (1, 3, 64, 96)]
REC_SHAPES = [(1, 3, 48, 80), (2, 3, 48, 120)]
CLASSES = 18_710


def shape_id(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


def random_input(shape: tuple[int, ...]) -> tuple[np.ndarray, int]:
    rng, seed = fresh_rng()
    return rng.uniform(-1, 1, shape).astype(np.float32), seed


def run_poisoned(model: Model, x: np.ndarray) -> dict[str, np.ndarray]:
    """One run of the plan for x's shape with every activation byte NaN first: an unwritten element shows."""
    plan = model.plan(x.shape)
    if isinstance(plan, Plan):
        plan.fill_arena(np.nan)
    return plan.run(x)


# -- the blocks, as small graphs -------------------------------------------------------------------------------


def tiny(nodes: list[onnx.NodeProto], shape: tuple[int, ...], inits: dict[str, np.ndarray]) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "v6", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=8)


def gelu_nodes(x: str, y: str) -> list[onnx.NodeProto]:
    """GELU as Paddle2ONNX writes it, an Identity in the middle as in the v6 files (constants: GELU_CONSTS)."""
    return [helper.make_node("Identity", [x], [f"{y}.i"]), helper.make_node("Div", [f"{y}.i", "sqrt2"], [f"{y}.s"]),
            helper.make_node("Erf", [f"{y}.s"], [f"{y}.e"]), helper.make_node("Add", [f"{y}.e", "one"], [f"{y}.a"]),
            helper.make_node("Mul", [f"{y}.i", f"{y}.a"], [f"{y}.m"]), helper.make_node("Mul", [f"{y}.m", "half"], [y])]


GELU_CONSTS = {"sqrt2": np.array(np.sqrt(2), np.float32), "one": np.array(1, np.float32),
               "half": np.array(0.5, np.float32)}


def stem_graph(rng: np.random.Generator) -> tuple[onnx.ModelProto, tuple[int, ...]]:
    """det/rec's stem and blocks: 2x2 convs and a 2x2 MaxPool at stride 1 with SAME_UPPER, a 7x7 depthwise
    conv, GELU fused into a conv, GELU of an Add (a standalone Gelu kernel), a lone Erf, the rec's 3x2
    AveragePool."""
    c = 6

    def w(*shape: int) -> np.ndarray:
        return rng.uniform(-0.5, 0.5, shape).astype(np.float32)

    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], kernel_shape=[2, 2], auto_pad="SAME_UPPER"),
        helper.make_node("Relu", ["c0"], ["r0"]),
        helper.make_node("MaxPool", ["r0"], ["mp"], kernel_shape=[2, 2], strides=[1, 1], auto_pad="SAME_UPPER"),
        helper.make_node("Conv", ["mp", "w_dw", "b_dw"], ["dw"], kernel_shape=[7, 7], pads=[3, 3, 3, 3], group=c),
        helper.make_node("Identity", ["dw"], ["dw.i"]),
        helper.make_node("Conv", ["dw.i", "w1", "b1"], ["pw"], kernel_shape=[1, 1]),
        *gelu_nodes("pw", "g0"),
        helper.make_node("Add", ["g0", "mp"], ["res"]),
        *gelu_nodes("res", "g1"),
        helper.make_node("Erf", ["g1"], ["erf"]),
        helper.make_node("AveragePool", ["erf"], ["y"], kernel_shape=[3, 2], strides=[3, 2]),
    ]
    inits = {"w0": w(c, 3, 2, 2), "b0": w(c), "w_dw": w(c, 1, 7, 7), "b_dw": w(c), "w1": w(c, c, 1, 1),
             "b1": w(c), **GELU_CONSTS}
    return tiny(nodes, (1, 3, 13, 17), inits), (1, 3, 13, 17)


def attention_graph(rng: np.random.Generator) -> tuple[onnx.ModelProto, tuple[int, ...]]:
    """One LightSVTR block as the v6 rec writes it (heads by Reshape, 5-D Transpose, Slice and Squeeze; q scaled
    by a Mul and an Add of 0; Softmax on axis 3; a GELU MLP) and the classifier: a MatMul to many classes and a
    Softmax over them (axis 2)."""
    t, d, heads, classes = 7, 24, 4, 3000

    def w(*shape: int) -> np.ndarray:
        return rng.uniform(-0.3, 0.3, shape).astype(np.float32)

    def ints(*v: int) -> np.ndarray:
        return np.array(v, np.int64)

    nodes = [
        helper.make_node("MatMul", ["x", "w_qkv"], ["qkv0"]), helper.make_node("Add", ["qkv0", "b_qkv"], ["qkv"]),
        helper.make_node("Reshape", ["qkv", "shape5"], ["h5"]),
        helper.make_node("Transpose", ["h5"], ["hT"], perm=[2, 0, 3, 1, 4]),
        *[helper.make_node("Slice", ["hT", f"s{i}", f"s{i + 1}", "ax0", "one_i"], [f"{n}5"])
          for i, n in enumerate("qkv")],
        *[helper.make_node("Squeeze", [f"{n}5"], [n], axes=[0]) for n in "qkv"],
        helper.make_node("Mul", ["q", "scale"], ["qs"]), helper.make_node("Add", ["qs", "zero"], ["q1"]),
        helper.make_node("Transpose", ["k"], ["kT"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q1", "kT"], ["att0"]), helper.make_node("Softmax", ["att0"], ["att"], axis=3),
        helper.make_node("MatMul", ["att", "v"], ["ctx"]),
        helper.make_node("Transpose", ["ctx"], ["ctxT"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctxT", "shape3"], ["merged"]),
        helper.make_node("MatMul", ["merged", "w_o"], ["o0"]), helper.make_node("Add", ["o0", "b_o"], ["o"]),
        helper.make_node("Add", ["x", "o"], ["r1"]),
        helper.make_node("MatMul", ["r1", "w_fc1"], ["f0"]), helper.make_node("Add", ["f0", "b_fc1"], ["f1"]),
        *gelu_nodes("f1", "f2"),
        helper.make_node("MatMul", ["f2", "w_fc2"], ["f3"]), helper.make_node("Add", ["f3", "b_fc2"], ["f4"]),
        helper.make_node("Add", ["r1", "f4"], ["r2"]),
        helper.make_node("MatMul", ["r2", "w_cls"], ["logits0"]),
        helper.make_node("Add", ["logits0", "b_cls"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["y"], axis=2),
    ]
    inits = {"w_qkv": w(d, 3 * d), "b_qkv": w(3 * d), "shape5": ints(0, -1, 3, heads, d // heads),
             "s0": ints(0), "s1": ints(1), "s2": ints(2), "s3": ints(3), "ax0": ints(0), "one_i": ints(1),
             "scale": np.array([(d // heads) ** -0.5], np.float32), "zero": np.array(0, np.float32),
             "shape3": ints(0, -1, d), "w_o": w(d, d), "b_o": w(d), "w_fc1": w(d, 2 * d), "b_fc1": w(2 * d),
             "w_fc2": w(2 * d, d), "b_fc2": w(d), "w_cls": w(d, classes) * 8, "b_cls": w(classes), **GELU_CONSTS}
    return tiny(nodes, (2, t, d), inits), (2, t, d)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("build", [stem_graph, attention_graph], ids=lambda f: f.__name__.removesuffix("_graph"))
def test_v6_blocks_match_onnxruntime(device: Device, tmp_path: Path, backend: str,
                                     build: Callable[[np.random.Generator], tuple[onnx.ModelProto, tuple[int, ...]]]
                                     ) -> None:
    rng, seed = fresh_rng()
    proto, shape = build(rng)
    path = tmp_path / "block.onnx"
    onnx.save(proto, path)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    with Model.load(path, device if backend == "vulkan" else None) as model:
        got = run_poisoned(model, x)["y"]
    ref = onnxruntime_values(path, {"x": x}, ["y"])["y"]
    assert got.shape == ref.shape
    err = rel_err(got, ref)
    assert err <= 1e-5, f"{build.__name__} on {backend}: rel error {err:.3g}; seed {seed}"


def test_stem_graph_fuses_what_it_can() -> None:
    """The GELU after a conv goes into its epilogue; the GELU of an Add stays a Gelu node (its own kernel); the
    lone Erf stays."""
    proto, _ = stem_graph(np.random.default_rng(0))
    g = optimize(from_onnx(proto))
    assert describe(g)["fused"] == {"Conv+gelu": 1, "Conv+relu": 1}
    assert {op: n for op, n in g.op_counts().items() if op in ("Gelu", "Erf", "Identity")} == {"Erf": 1, "Gelu": 1}


# -- the two models -------------------------------------------------------------------------------------------


@needs_models
@pytest.mark.parametrize("path", [DET, REC], ids=["det", "rec"])
def test_passes_leave_no_erf_and_no_identity(path: Path) -> None:
    g = load_onnx(path)
    before, opt = g.op_counts(), optimize(g)
    after, fused = opt.op_counts(), describe(opt)["fused"]
    assert before["Erf"] == 13 and before["Identity"] > 100
    assert not {"Erf", "Gelu", "Identity", "Div", "BatchNormalization", "HardSigmoid", "Relu"} & set(after)
    assert fused["Conv+gelu"] == 13
    if path == REC:
        assert after["LayerNorm"] == 5 and not {"Pow", "Sqrt", "Sub"} & set(after)
        # 9 projections with their biases in the GEMM epilogue; q·kᵀ and attention·v twice
        assert sum(len(n.inputs) == 3 for n in opt.nodes if n.op == "MatMul") == 9 and after["MatMul"] == 13
    spec = finalize(specialize(opt, {"x": DET_SHAPES[0] if path == DET else REC_SHAPES[0]}))
    assert not {"Reshape", "Squeeze", "Unsqueeze", "Shape", "Identity"} & set(spec.graph.op_counts())


def logits_model(tmp_dir: Path) -> tuple[Path, str]:
    """det without its final Sigmoid (its input, the logits, as the output): onnxruntime's approximate sigmoid
    makes relative error meaningless on the near-zero probabilities random input gives, and the engine fuses
    the Sigmoid into the last ConvTranspose, so the logits exist only in a model that ends before it."""
    path = tmp_dir / "det_logits.onnx"
    model = onnx.load(str(DET))
    sigmoid = next(n for n in model.graph.node if n.output[0] == model.graph.output[0].name)
    assert sigmoid.op_type == "Sigmoid"
    model.graph.node.remove(sigmoid)
    model.graph.output[0].name = sigmoid.input[0]
    if not path.exists():
        onnx.save(model, path)
    return path, sigmoid.input[0]


@pytest.fixture(scope="module")
def det_logits(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return logits_model(tmp_path_factory.mktemp("v6"))


@needs_models
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", DET_SHAPES, ids=shape_id)
def test_det_logits_match_onnxruntime(models: GetModel, det_logits: tuple[Path, str],
                                      backend: str, shape: tuple[int, ...]) -> None:
    path, name = det_logits
    x, seed = random_input(shape)
    got = run_poisoned(models(path, backend), x)[name]
    ref = onnxruntime_values(path, {"x": x}, [name])[name]
    assert got.shape == ref.shape == (shape[0], 1, *shape[2:])
    err = rel_err(got, ref)
    assert err <= TOLERANCE, f"v6 det logits {shape} on {backend}: rel error {err:.3g}; seed {seed}"


@needs_models
@pytest.mark.parametrize("backend", BACKENDS)
def test_det_probabilities_match_onnxruntime(models: GetModel, backend: str) -> None:
    """The whole file (Sigmoid fused into the last ConvTranspose): each probability within 1e-5 of
    onnxruntime's, whose sigmoid is approximate (a relative measure means nothing near 0)."""
    model = models(DET, backend)
    x, seed = random_input(DET_SHAPES[0])
    got = run_poisoned(model, x)[model.output]
    ref = onnxruntime_values(DET, {"x": x}, [model.output])[model.output]
    assert got.shape == ref.shape
    worst = float(np.abs(got - ref).max())
    assert worst <= 1e-5, f"v6 det on {backend}: probability off by {worst:.3g}; seed {seed}"


@needs_models
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", REC_SHAPES, ids=shape_id)
def test_rec_matches_onnxruntime_at_every_time_step(models: GetModel, backend: str,
                                                     shape: tuple[int, ...]) -> None:
    model = models(REC, backend)
    x, seed = random_input(shape)
    got = run_poisoned(model, x)[model.output]
    ref = onnxruntime_values(REC, {"x": x}, [model.output])[model.output]
    assert got.shape == ref.shape == (shape[0], shape[3] // 8, CLASSES)
    err = rel_err(got, ref)
    assert err <= TOLERANCE, f"v6 rec {shape} on {backend}: rel error {err:.3g}; seed {seed}"
    differ = np.argwhere(got.argmax(-1) != ref.argmax(-1))
    assert differ.size == 0, f"v6 rec {shape} on {backend}: argmax differs at {differ[:5].tolist()}; seed {seed}"
