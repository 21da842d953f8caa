"""Recognisers of decomposed ops: chains of ONNX nodes that exporters write for one op ONNX (or an older opset)
lacks (HardSwish, SiLU, GELU, LayerNorm), each rewritten back into that op by a pattern pass (see passes.py), so that a
kernel does in one pass over the data what the chain did in five to nine, and an activation can then fuse into
its producer.
"""

from __future__ import annotations

from vkocr.engine.graph.ir import Graph, Node
from vkocr.engine.graph.opset_elementwise import clip_bounds, unary_params
from vkocr.engine.graph.rewrite import (
    NoMatch,
    Uses,
    add_const,
    constants_of,
    drop_nodes,
    is_scalar,
    last_axis_vector,
    need,
    operands,
    private_producer,
    replace_node,
    rewrite,
    scalar_value,
)
from vkocr.engine.ops.activation import SQRT2

# -- HardSwish -----------------------------------------------------------------------------------------------


def _divided_by_6(g: Graph, node: Node | None) -> str | None:
    """The operand `v` when `node` is Div(v, 6), Mul(v, 1/6) or Mul(1/6, v) (constants of one element)."""
    if node is None or len(node.inputs) != 2:
        return None
    if node.op == "Div" and is_scalar(g, node.inputs[1], 6.0):
        return node.inputs[0]
    if node.op == "Mul":
        return next((v for v, c in operands(node) if is_scalar(g, c, 1 / 6)), None)
    return None


def _relu6_shifted(g: Graph, uses: Uses, name: str, user: Node) -> tuple[str, list[Node]] | None:
    """(x, [Add, Clip]) when `name` = Clip(Add(x, 3), 0, 6) is read only by `user` and the Add only by the
    Clip."""
    clip = uses.producer(name, "Clip")
    if clip is None or not uses.private(name, user):
        return None
    consts = constants_of(g, clip)
    if consts is None or clip_bounds(clip, consts) != (0.0, 6.0):
        return None
    add = uses.producer(clip.inputs[0], "Add")
    if add is None or not uses.private(clip.inputs[0], clip):
        return None
    x = next((x for x, c in operands(add) if is_scalar(g, c, 3.0)), None)
    return (x, [add, clip]) if x is not None else None


def _hardswish_rule(g: Graph, uses: Uses, node: Node) -> bool:
    matched = _match_hardswish(g, uses, node)
    if matched is None:
        return False
    x, alpha, beta, inner = matched
    drop_nodes(g, *inner)
    replace_node(g, node, Node("HardSwish", node.name, [x], [node.outputs[0]], {"alpha": alpha, "beta": beta}))
    return True


def _match_hardswish(g: Graph, uses: Uses, node: Node) -> tuple[str, float, float, list[Node]] | None:
    """(x, alpha, beta, nodes to remove besides `node`) when `node` ends a HardSwish pattern."""
    if node.op not in ("Mul", "Div") or len(node.inputs) != 2:
        return None
    if node.op == "Mul":
        for x, other in operands(node):
            hs = uses.producer(other, "HardSigmoid")  # x * HardSigmoid(x)
            if hs is not None and hs.inputs[0] == x and uses.private(other, node):
                _, alpha, beta = unary_params(hs, [None])
                return x, alpha, beta, [hs]
            scaled = uses.producer(other)  # x * (Clip(x + 3, 0, 6) / 6)
            v = _divided_by_6(g, scaled)
            if scaled is None or v is None or not uses.private(other, node):
                continue
            relu6 = _relu6_shifted(g, uses, v, scaled)
            if relu6 is not None and relu6[0] == x:
                return x, 1 / 6, 0.5, [scaled, *relu6[1]]
    product = _divided_by_6(g, node)  # (x * Clip(x + 3, 0, 6)) / 6, as Paddle2ONNX exports hardswish
    mul = uses.producer(product, "Mul") if product is not None else None
    if mul is None or product is None or not uses.private(product, node):
        return None
    for x, other in operands(mul):
        relu6 = _relu6_shifted(g, uses, other, mul)
        if relu6 is not None and relu6[0] == x:
            return x, 1 / 6, 0.5, [mul, *relu6[1]]
    return None


def fuse_hardswish(graph: Graph) -> Graph:
    """x * HardSigmoid(x) (alpha, beta kept) and the decomposed x * Clip(x + 3, 0, 6) / 6 (divided or
    multiplied by 1/6, inside or outside the product; constants 0-d or one element) → one HardSwish node: four
    or five passes over the data become one, and a conv before it can then fuse it (run before
    fuse_activations)."""
    return rewrite(graph, _hardswish_rule)


# -- SiLU ----------------------------------------------------------------------------------------------------


def _silu_rule(g: Graph, uses: Uses, node: Node) -> bool:
    if node.op != "Mul" or len(node.inputs) != 2:
        return False
    for x, other in operands(node):
        sigmoid = uses.producer(other, "Sigmoid")  # x * Sigmoid(x), the Sigmoid read by this Mul alone
        if sigmoid is not None and sigmoid.inputs[0] == x and x != other and uses.private(other, node):
            drop_nodes(g, sigmoid)
            replace_node(g, node, Node("Silu", node.name, [x], [node.outputs[0]]))
            return True
    return False


def fuse_silu(graph: Graph) -> Graph:
    """x · Sigmoid(x) → one Silu node (activation "silu"): two passes over the data become one, and the conv or
    matmul before it, which both nodes read, can then fuse it (run before fuse_activations). PP-OCRv6 rec has
    five (three after a conv, two after a matmul)."""
    return rewrite(graph, _silu_rule)


# -- GELU ----------------------------------------------------------------------------------------------------


def _halved(g: Graph, node: Node | None) -> str | None:
    """The operand `v` when `node` is Mul(v, 0.5), Mul(0.5, v) or Div(v, 2) (constants of one element)."""
    if node is None or len(node.inputs) != 2:
        return None
    if node.op == "Div" and is_scalar(g, node.inputs[1], 2.0):
        return node.inputs[0]
    if node.op == "Mul":
        return next((v for v, c in operands(node) if is_scalar(g, c, 0.5)), None)
    return None


def _erf_plus_one(g: Graph, uses: Uses, name: str, x: str, user: Node) -> list[Node] | None:
    """[scale, Erf, Add] when `name` = 1 + erf(x / √2) (or erf(x · 1/√2)), read only by `user`, each step read
    only by the next."""
    add = private_producer(uses, name, "Add", user)
    if add is None:
        return None
    e = next((e for e, c in operands(add) if is_scalar(g, c, 1.0)), None)
    erf = private_producer(uses, e, "Erf", add) if e is not None else None
    if erf is None:
        return None
    scale = uses.producer(erf.inputs[0], "Div", "Mul")
    if scale is None or not uses.private(erf.inputs[0], erf) or len(scale.inputs) != 2:
        return None
    if scale.op == "Div":
        ok = scale.inputs[0] == x and is_scalar(g, scale.inputs[1], SQRT2)
    else:
        ok = any(v == x and is_scalar(g, c, 1 / SQRT2) for v, c in operands(scale))
    return [scale, erf, add] if ok else None


def _halving(g: Graph, uses: Uses, name: str, user: Node) -> tuple[Node, str] | None:
    """(the node, v) when `name` = v · 0.5 (or v / 2) is read only by `user`."""
    node = uses.producer(name, "Mul", "Div")
    v = _halved(g, node)
    return (node, v) if node is not None and v is not None and uses.private(name, user) else None


def _match_gelu(g: Graph, uses: Uses, node: Node) -> tuple[str, list[Node]]:
    """(x, the other nodes) when `node` ends x · 0.5 · (1 + erf(x / √2)), the two products in any grouping and
    order (the half as · 0.5 or / 2); raises NoMatch otherwise."""
    product = _halved(g, node)  # (x · (1 + erf)) · 0.5, as Paddle2ONNX exports it
    mul = private_producer(uses, product, "Mul", node) if product is not None else None
    if mul is not None:
        for x, other in operands(mul):
            chain = _erf_plus_one(g, uses, other, x, mul)
            if chain is not None:
                return x, [mul, *chain]
    need(node.op == "Mul" and len(node.inputs) == 2)
    for a, b in operands(node):
        halving = _halving(g, uses, a, node)
        if halving is None:
            continue
        half, v = halving
        chain = _erf_plus_one(g, uses, b, v, node)  # (x · 0.5) · (1 + erf): v is x
        if chain is not None:
            return v, [half, *chain]
        chain = _erf_plus_one(g, uses, v, b, half)  # ((1 + erf) · 0.5) · x: v is 1 + erf
        if chain is not None:
            return b, [half, *chain]
    raise NoMatch


def _gelu_rule(g: Graph, uses: Uses, node: Node) -> bool:
    if node.op not in ("Mul", "Div"):
        return False
    x, inner = _match_gelu(g, uses, node)
    drop_nodes(g, *inner)
    replace_node(g, node, Node("Gelu", node.name, [x], [node.outputs[0]]))
    return True


def fuse_gelu(graph: Graph) -> Graph:
    """x · 0.5 · (1 + erf(x / √2)) (Div by √2 or Mul by 1/√2; the half as · 0.5 or / 2, inside or outside; one-
    element constants) → one Gelu node: five passes over the data become one, and the conv or matmul before it
    can then fuse it (run before fuse_activations). PP-OCRv6 has 13 in det and 13 in rec."""
    return rewrite(graph, _gelu_rule)


# -- LayerNorm -----------------------------------------------------------------------------------------------


def _reduces_last_axis(node: Node | None) -> bool:
    if node is None or node.attrs.get("keepdims", 1) != 1:
        return False
    return list(node.attrs.get("axes", [])) == [-1]


def _const_operand(g: Graph, node: Node | None, op: str) -> tuple[str, str] | None:
    """(data operand, constant operand) of a binary `op` node with one constant operand, either order."""
    if node is None or node.op != op or len(node.inputs) != 2:
        return None
    return next(((d, c) for d, c in operands(node) if c in g.constants and d not in g.constants), None)


def _match_layernorm(g: Graph, uses: Uses, node: Node) -> tuple[str, str, str, float, list[Node]]:
    """(x, gamma, beta, eps, the chain's other nodes) when `node` is the final Add of
    ((x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)) * gamma + beta, means over the last axis;
    raises NoMatch otherwise."""
    scaled, beta = need(_const_operand(g, node, "Add"))
    mul = need(private_producer(uses, scaled, "Mul", node))
    normed, gamma = need(_const_operand(g, mul, "Mul"))
    div = need(private_producer(uses, normed, "Div", mul))
    d, std = div.inputs
    sqrt = need(private_producer(uses, std, "Sqrt", div))
    add_eps = need(private_producer(uses, sqrt.inputs[0], "Add", sqrt))
    var_name, eps_name = need(_const_operand(g, add_eps, "Add"))
    eps = need(scalar_value(g, eps_name))
    var = need(private_producer(uses, var_name, "ReduceMean", add_eps))
    sq = need(private_producer(uses, var.inputs[0], "Pow", var))
    sub = need(private_producer(uses, d, "Sub", sq, div))
    x, mean_name = sub.inputs
    mean = need(private_producer(uses, mean_name, "ReduceMean", sub))
    need(sq.inputs[0] == d and is_scalar(g, sq.inputs[1], 2.0) and mean.inputs[0] == x)
    need(_reduces_last_axis(mean) and _reduces_last_axis(var))
    return x, gamma, beta, eps, [mean, sub, sq, var, add_eps, sqrt, div, mul]


def _layernorm_rule(g: Graph, uses: Uses, node: Node) -> bool:
    if node.op != "Add":
        return False
    x, gamma, beta, eps, chain = _match_layernorm(g, uses, node)
    vectors = [need(last_axis_vector(v, v.shape[-1] if v.ndim else 1, max_rank=v.ndim))
               for v in (g.constants[gamma], g.constants[beta])]
    params = [name if g.constants[name].ndim == 1 else add_const(g, f"{node.name}.{name}_vec", vec)
              for name, vec in zip((gamma, beta), vectors)]
    drop_nodes(g, *chain)
    fused = Node("LayerNorm", node.name, [x, *params], [node.outputs[0]], {"axis": -1, "epsilon": eps})
    replace_node(g, node, fused)
    return True


def fuse_layernorm(graph: Graph) -> Graph:
    """The decomposed layer norm Paddle2ONNX exports (ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div,
    Mul gamma, Add beta; means over the last axis, gamma/beta constants broadcasting along it) → one LayerNorm
    node with inputs [x, gamma, beta]: nine passes over the data become one."""
    return rewrite(graph, _layernorm_rule)
