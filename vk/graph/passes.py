"""Graph passes, each a small named function from Graph to Graph (or Specialized to Specialized).

`optimize()` runs the passes that need no shapes, once per model; `finalize()` runs those that need the
shapes of one plan, after `specialize()`. No pass mutates its input: each works on `graph.copy()`.

A pattern pass is a rule `(graph, uses, node) -> bool` tried on every node; a rule that matches rewrites the
copy in place and the sweep goes on with fresh use lists, until a whole sweep matches nothing. A fused node
takes over the output name of the last node it replaces, so consumers and graph outputs keep their names and
the node order stays topological. A value that is a graph output, or that anything outside the pattern reads,
is never fused away (`Uses.private`, `Uses.sole_consumer`). The machinery is in rewrite.py; the patterns of
decomposed ops (HardSwish, SiLU, GELU, LayerNorm) are in decomposed.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from vkocr.engine.graph.decomposed import fuse_gelu as fuse_gelu  # re-exported: the passes are all here
from vkocr.engine.graph.decomposed import fuse_hardswish as fuse_hardswish
from vkocr.engine.graph.decomposed import fuse_layernorm as fuse_layernorm
from vkocr.engine.graph.decomposed import fuse_silu as fuse_silu
from vkocr.engine.graph.ir import Graph, Node
from vkocr.engine.graph.map_fusion import fuse_conv_transpose_pair as fuse_conv_transpose_pair  # re-exported
from vkocr.engine.graph.map_fusion import fuse_excite_upsample_add as fuse_excite_upsample_add
from vkocr.engine.graph.map_fusion import fuse_pool_concat as fuse_pool_concat
from vkocr.engine.graph.map_fusion import fuse_stem_concat as fuse_stem_concat
from vkocr.engine.graph.map_fusion import fuse_upsample_concat as fuse_upsample_concat
from vkocr.engine.graph.opset import OPS
from vkocr.engine.graph.opset_elementwise import unary_params
from vkocr.engine.graph.opset_layout import VIEW_OPS
from vkocr.engine.graph.rewrite import (
    Uses,
    add_const,
    constants_of,
    drop_nodes,
    last_axis_vector,
    need,
    operands,
    rewrite,
)
from vkocr.engine.graph.schedule import schedule_late as schedule_late  # re-exported: the passes are all here
from vkocr.engine.graph.shape_fusion import fuse_attention as fuse_attention  # re-exported: the passes are all here
from vkocr.engine.graph.shape_fusion import fuse_excite as fuse_excite
from vkocr.engine.graph.shape_fusion import fuse_gate as fuse_gate
from vkocr.engine.graph.shape_fusion import fuse_residual as fuse_residual
from vkocr.engine.graph.shape_fusion import fuse_resize_add as fuse_resize_add
from vkocr.engine.graph.specialize import Specialized

CONV_OPS = ("Conv", "ConvTranspose")
ACTIVATION_PRODUCERS = ("Conv", "ConvTranspose", "MatMul")
FUSABLE_ACTIVATIONS = {"Relu": "relu", "Clip": "clip", "HardSigmoid": "hardsigmoid", "HardSwish": "hardswish",
                       "Sigmoid": "sigmoid", "LeakyRelu": "leakyrelu",
                       "Gelu": "gelu", "Silu": "silu"}  # op -> fused `activation` attribute


# -- constant folding ----------------------------------------------------------------------------------------


def fold_constants(graph: Graph) -> Graph:
    """Nodes whose inputs are all constants (Paddle2ONNX's Reshape of a conv bias to (1, C, 1, 1), say) →
    constants, computed once with the NumPy ops, so the patterns below see constant operands. specialize()
    would fold them too, but only after optimize() has looked for patterns."""
    g = graph.copy()
    kept = []
    for node in g.nodes:
        present = [name for name in node.inputs if name]
        if not present or not all(name in g.constants for name in present):
            kept.append(node)
            continue
        values = [g.constants[name] if name else None for name in node.inputs]
        for out, value in zip(node.outputs, OPS[node.op].run(node, values)):  # type: ignore[arg-type]  # None: an omitted optional input
            g.constants[out] = np.asarray(value)
    g.nodes = kept
    return g


# -- Identity ------------------------------------------------------------------------------------------------


def remove_identities(graph: Graph) -> Graph:
    """Identity nodes → gone, their readers reading the Identity's input. Paddle2ONNX puts one after most nodes of
    PP-OCRv6 (147 in det, 135 in rec): between a conv and its activation they would hide every pattern below.
    An Identity whose output is a graph output stays (as_views makes it a view)."""
    g = graph.copy()
    outputs = set(g.outputs)
    source: dict[str, str] = {}
    kept = []
    for node in g.nodes:
        node.inputs = [source.get(name, name) for name in node.inputs]
        if node.op == "Identity" and node.outputs[0] not in outputs:
            source[node.outputs[0]] = node.inputs[0]
        else:
            kept.append(node)
    g.nodes = kept
    return g


# -- folding per-channel affine maps into convolutions -------------------------------------------------------


def _foldable_conv(g: Graph, uses: Uses, name: str) -> Node | None:
    """The Conv/ConvTranspose computing `name` if its weights (and bias) are constants, no activation is fused
    into it, and nothing but the node being folded reads `name`."""
    conv = uses.producer(name, *CONV_OPS)
    if conv is None or uses.sole_consumer(name) is None or conv.attrs.get("activation", "none") != "none":
        return None
    bias = conv.inputs[2] if len(conv.inputs) > 2 else ""
    if conv.inputs[1] not in g.constants or (bias and bias not in g.constants):
        return None
    return conv


def _out_channels(g: Graph, conv: Node) -> int:
    w = g.constants[conv.inputs[1]]
    return int(w.shape[0]) if conv.op == "Conv" else int(w.shape[1]) * int(conv.attrs.get("group", 1))


def _channel_vector(value: np.ndarray, channels: int, rank: int) -> np.ndarray | None:
    """`value` as a (C,) vector when it broadcasts per channel over an (N, C, spatial...) tensor of `rank`:
    one element, or shape (C, 1, ...) / (1, C, 1, ...)."""
    if value.ndim > rank:
        return None
    if value.size == 1:
        return np.full((channels,), value.reshape(-1)[0], dtype=np.float64)
    padded = (1,) * (rank - value.ndim) + value.shape
    if padded != (1, channels) + (1,) * (rank - 2):
        return None
    return value.reshape(channels).astype(np.float64)


def _fold_into_conv(g: Graph, conv: Node, scale: np.ndarray, shift: np.ndarray, folded: Node) -> None:
    """Make `conv` compute scale[c] * conv(x)[c] + shift[c] and take over `folded`'s output, which `folded`
    computed from it; `folded` is removed. New weights get fresh constant names (originals may be shared)."""
    w = g.constants[conv.inputs[1]].astype(np.float64)
    cout, spatial = scale.shape[0], (1,) * (w.ndim - 2)
    if conv.op == "Conv":
        w = w * scale.reshape(cout, 1, *spatial)
    else:  # ConvTranspose weights are (Cin, Cout/group, k...); output channel g * Cout/group + j
        group = int(conv.attrs.get("group", 1))
        cin, cog = w.shape[0], w.shape[1]
        grouped = w.reshape(group, cin // group, cog, *w.shape[2:])
        w = (grouped * scale.reshape(group, 1, cog, *spatial)).reshape(w.shape)
    bias_name = conv.inputs[2] if len(conv.inputs) > 2 else ""
    bias = g.constants[bias_name].astype(np.float64) if bias_name else np.zeros(cout)
    dtype = g.constants[conv.inputs[1]].dtype
    w_name = add_const(g, f"{conv.name}.w_folded", w.astype(dtype))
    b_name = add_const(g, f"{conv.name}.b_folded", (bias * scale + shift).astype(dtype))
    conv.inputs = [conv.inputs[0], w_name, b_name]
    conv.outputs = [folded.outputs[0]]
    drop_nodes(g, folded)


def _fold_batchnorm_rule(g: Graph, uses: Uses, node: Node) -> bool:
    if node.op != "BatchNormalization":
        return False
    need(not node.attrs.get("training_mode", 0) and len(node.inputs) >= 5)
    need(not any(out and (out in uses.consumers or out in uses.outputs) for out in node.outputs[1:]))
    conv = need(_foldable_conv(g, uses, node.inputs[0]))
    need(all(name in g.constants for name in node.inputs[1:5]))
    scale, beta, mean, var = (g.constants[name].astype(np.float64).reshape(-1) for name in node.inputs[1:5])
    need(all(v.shape == (_out_channels(g, conv),) for v in (scale, beta, mean, var)))
    k = scale / np.sqrt(var + float(node.attrs.get("epsilon", 1e-5)))
    node.outputs = node.outputs[:1]
    _fold_into_conv(g, conv, k, beta - mean * k, node)
    return True


def fold_batchnorm(graph: Graph) -> Graph:
    """BatchNormalization (inference mode, constant statistics) right after a Conv/ConvTranspose that nothing
    else reads → folded into the conv's weights and bias: one pass over the data instead of two. A
    BatchNormalization of anything else stays."""
    return rewrite(graph, _fold_batchnorm_rule)


def _fold_affine_rule(g: Graph, uses: Uses, node: Node) -> bool:
    if node.op not in ("Mul", "Add") or len(node.inputs) != 2:
        return False
    for data, const in operands(node):
        conv = _foldable_conv(g, uses, data)
        if conv is None or const not in g.constants:
            continue
        vec = _channel_vector(g.constants[const], _out_channels(g, conv), g.constants[conv.inputs[1]].ndim)
        if vec is None:
            continue
        if node.op == "Mul":
            _fold_into_conv(g, conv, vec, np.zeros_like(vec), node)
        else:
            _fold_into_conv(g, conv, np.ones_like(vec), vec, node)
        return True
    return False


def fold_conv_affine(graph: Graph) -> Graph:
    """Mul or Add by a constant that is one element or per channel ((C,1,1) / (1,C,1,1)), right after a
    Conv/ConvTranspose that nothing else reads → folded into its weights and bias. PP-LCNetV3 (det, rec) puts
    a learnable scale and offset after every conv, cls adds conv biases with a separate Add, and det adds
    ConvTranspose biases that way before a BatchNormalization; folding them lets that BatchNormalization and
    the activation after it fuse too."""
    return rewrite(graph, _fold_affine_rule)


# -- MatMul bias ---------------------------------------------------------------------------------------------


def _matmul_bias_rule(g: Graph, uses: Uses, node: Node) -> bool:
    if node.op != "Add" or len(node.inputs) != 2:
        return False
    for data, const in operands(node):
        mm = uses.producer(data, "MatMul")
        if mm is None or const not in g.constants or len(mm.inputs) != 2 or mm.inputs[1] not in g.constants:
            continue
        if mm.attrs.get("activation", "none") != "none" or uses.sole_consumer(data) is None:
            continue
        w = g.constants[mm.inputs[1]]
        if w.ndim < 2:
            continue
        bias = last_axis_vector(g.constants[const], int(w.shape[-1]), max_rank=w.ndim)
        if bias is None:
            continue
        b_name = const if g.constants[const].shape == bias.shape else add_const(g, f"{mm.name}.bias", bias)
        mm.inputs = [*mm.inputs, b_name]
        mm.outputs = [node.outputs[0]]
        drop_nodes(g, node)
        return True
    return False


def fuse_matmul_bias(graph: Graph) -> Graph:
    """MatMul(x, constant W) then Add of a constant broadcasting along the last axis only → MatMul with the
    bias as a third input (shape (N,)), so the bias add happens in the matmul's epilogue (and an activation
    after it can fuse next). The bias may not raise the rank beyond W's (x is taken to have rank >= 2)."""
    return rewrite(graph, _matmul_bias_rule)


# -- activations ---------------------------------------------------------------------------------------------


def _activation_rule(g: Graph, uses: Uses, node: Node) -> bool:
    if node.op not in FUSABLE_ACTIVATIONS or node.attrs.get("approximate", "none") != "none":  # Gelu's tanh form
        return False
    producer = uses.producer(node.inputs[0], *ACTIVATION_PRODUCERS)
    consts = constants_of(g, node)
    if producer is None or consts is None or producer.attrs.get("activation", "none") != "none":
        return False
    if uses.sole_consumer(node.inputs[0]) is not node:
        return False
    _, alpha, beta = unary_params(node, consts)
    producer.attrs.update(activation=FUSABLE_ACTIVATIONS[node.op], act_alpha=alpha, act_beta=beta)
    producer.outputs = [node.outputs[0]]
    drop_nodes(g, node)
    return True


def fuse_activations(graph: Graph) -> Graph:
    """Relu, Clip (constant bounds), HardSigmoid, HardSwish, Sigmoid, LeakyRelu, Gelu or Silu of a Conv/ConvTranspose/
    MatMul output that nothing else reads → the producer's `activation`/`act_alpha`/`act_beta` attributes
    (clip: min/max; hardsigmoid/hardswish: ONNX alpha/beta; leakyrelu: alpha), applied in its epilogue: one
    fewer pass over the data. At most one activation per producer."""
    return rewrite(graph, _activation_rule)


def _post_affine_rule(g: Graph, uses: Uses, node: Node) -> bool:
    if node.op not in ("Mul", "Add") or len(node.inputs) != 2:
        return False
    for x, k in operands(node):
        conv = uses.producer(x, "Conv")
        value = g.constants.get(k)
        if conv is None or value is None or value.size != 1 or value.dtype.kind != "f" or value.ndim > 4:
            continue
        if uses.sole_consumer(x) is not node:
            continue
        attrs = conv.attrs
        # the epilogue is act(y) · scale + shift: a Mul after a shift, or a second Mul, does not fit it
        if "post_shift" in attrs or (node.op == "Mul" and "post_scale" in attrs):
            return False
        attrs["post_scale" if node.op == "Mul" else "post_shift"] = float(value.reshape(-1)[0])
        conv.outputs = [node.outputs[0]]
        drop_nodes(g, node)
        return True
    return False


def fuse_post_affine(graph: Graph) -> Graph:
    """A Conv output (after its fused activation) multiplied by a one-element constant, then plus one, and read
    by nothing else → the Conv's `post_scale` / `post_shift` attributes, applied in its epilogue (PP-LCNetV3's
    learnable affine blocks: a third of the detector's nodes, each a pass over the data and a dispatch to
    record per plan)."""
    return rewrite(graph, _post_affine_rule)


# -- dead code, views ----------------------------------------------------------------------------------------


def remove_dead(graph: Graph) -> Graph:
    """Drop nodes whose outputs no graph output depends on, and constants nothing reads."""
    g = graph.shallow_copy()
    needed = set(g.outputs)
    kept = []
    for node in reversed(g.nodes):  # runs per plan (finalize): a loop, not a generator per node
        for out in node.outputs:
            if out in needed:
                kept.append(node)
                needed.update(node.inputs)
                break
    needed.discard("")  # an absent optional input
    g.nodes = kept[::-1]
    g.constants = {k: v for k, v in g.constants.items() if k in needed}
    return g


def as_views(spec: Specialized) -> Specialized:
    """Reshape/Squeeze/Unsqueeze/Flatten/Identity → "View" with the specialised output shape as attribute and
    only the data input: the data is not moved, so a plan can alias the storage instead of copying. The shape
    operands (now unread constants) are left for remove_dead."""
    g = spec.graph.shallow_copy()
    g.nodes = [Node("View", n.name, [n.inputs[0]], [n.outputs[0]], {"shape": spec.shapes[n.outputs[0]]})
               if n.op in VIEW_OPS else n for n in g.nodes]  # spec.shapes holds int tuples already
    return Specialized(g, dict(spec.shapes))


# -- pipelines -----------------------------------------------------------------------------------------------

# remove_identities first: Paddle2ONNX's Identity nodes sit inside every pattern; fold_constants next so Reshape'd
# biases are constants; fold_conv_affine before fold_batchnorm for det's ConvTranspose -> Add bias ->
# BatchNormalization; fusions that end in an activation before fuse_activations; schedule_late last, on the
# nodes that will run (the per-shape fusions keep its order: each fused node takes its last node's place).
OPTIMIZE_PASSES: Sequence[Callable[[Graph], Graph]] = (
    remove_identities, fold_constants, fold_conv_affine, fold_batchnorm, fuse_hardswish, fuse_silu, fuse_gelu,
    fuse_layernorm, fuse_matmul_bias, fuse_activations, fuse_post_affine, remove_dead, schedule_late,
)


def optimize(graph: Graph) -> Graph:
    """Shape-independent passes, in order (see OPTIMIZE_PASSES)."""
    for run_pass in OPTIMIZE_PASSES:
        graph = run_pass(graph)
    return graph


def finalize(spec: Specialized) -> Specialized:
    """Passes that need this plan's shapes, in order: as_views, fuse_residual, fuse_gate, fuse_resize_add,
    fuse_excite and fuse_attention (shape_fusion.py; fuse_excite takes the GatedAdds fuse_gate makes, and
    fuse_attention finds the Views as_views made), fuse_conv_transpose_pair, fuse_pool_concat, fuse_stem_concat,
    fuse_upsample_concat and fuse_excite_upsample_add (map_fusion.py; fuse_stem_concat takes the Concats
    fuse_pool_concat pooled, fuse_upsample_concat leaves a pooled first input alone, and the last takes the
    Excites and the Resizes with an addend made before it), then remove_dead."""
    spec = fuse_resize_add(fuse_gate(fuse_residual(as_views(spec))))
    spec = fuse_stem_concat(fuse_pool_concat(fuse_conv_transpose_pair(fuse_attention(fuse_excite(spec)))))
    spec = fuse_excite_upsample_add(fuse_upsample_concat(spec))
    return Specialized(remove_dead(spec.graph), spec.shapes)


def describe(graph: Graph) -> dict[str, Any]:
    """Node count, op counts, and fused activations by kind (for logs and reports)."""
    fused: dict[str, int] = {}
    for n in graph.nodes:
        if n.attrs.get("activation", "none") != "none":
            key = f"{n.op}+{n.attrs['activation']}"
            fused[key] = fused.get(key, 0) + 1
    return {"nodes": len(graph.nodes), "ops": graph.op_counts(), "fused": dict(sorted(fused.items()))}
