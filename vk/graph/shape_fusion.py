"""Fusions a plan's shapes decide (run by passes.finalize, per shape): where shapes prove a fusion exact, two or
three nodes become one dispatch and one pass over memory, with the same answer bit for bit in fp32."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from vkocr.engine.graph.ir import Graph, Node
from vkocr.engine.graph.precision import FLOAT32, output_producers
from vkocr.engine.graph.specialize import Specialized
from vkocr.engine.kernels.attention import fits as attention_fits
from vkocr.engine.kernels.excite import fuses as excite_fuses


def fuse_residual(spec: Specialized) -> Specialized:
    """Add(conv(x), r) → one Conv with r as a fourth input, added in its epilogue after the activation (one
    dispatch and one pass over the output fewer). Only where the Add's two inputs have one shape (no
    broadcasting), the conv's output feeds the Add alone, r is computed before the conv runs, and the conv is a
    dense one (the depthwise kernel has no residual). Likewise Add(MatMul(x, W), r) for a 2-D constant W, which
    runs as one GEMM (SVTR's projections and MLPs and their skip connections)."""
    g = spec.graph

    def with_residual(node: Node, value: str, r: str) -> list[str] | None:
        dense_conv = node.op == "Conv" and not _is_depthwise(g, node)
        weights = g.constants.get(node.inputs[1]) if node.op == "MatMul" else None
        one_gemm = weights is not None and weights.ndim == 2 and len(spec.shapes[value]) >= 2  # lower_matrix's
        if len(node.inputs) > 3 or not (dense_conv or one_gemm):
            return None
        return [node.inputs[0], node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else "", r]

    return _fold_add(spec, with_residual)


def fuse_gate(spec: Specialized) -> Specialized:
    """Add(x, Mul(x, s)) → GatedAdd(x, s): an SE block's x + x·s in one pass over x instead of two (s broadcasts
    into x; the Mul's product feeds the Add alone). The product is rounded before the add, as before."""
    g = spec.graph
    uses, producer = uses_and_producers(g)
    dropped: set[str] = set()
    replaced: dict[str, Node] = {}
    for node in g.nodes:
        if node.op != "Add" or len(node.inputs) != 2:
            continue
        for x, m in (node.inputs, node.inputs[::-1]):
            mul = producer.get(m)
            if (mul is None or mul.op != "Mul" or len(mul.inputs) != 2 or x not in mul.inputs or uses[m] != 1
                    or m in g.outputs or mul.name in dropped or x not in spec.shapes):
                continue
            s = mul.inputs[1] if mul.inputs[0] == x else mul.inputs[0]
            if s == x or spec.shape(x) != spec.shapes.get(node.outputs[0]):
                continue
            replaced[node.name] = Node("GatedAdd", node.name, [x, s], list(node.outputs))
            dropped.add(mul.name)
            break
    return rewritten(spec, replaced, dropped)


def fuse_excite(spec: Specialized) -> Specialized:
    """Mul(x, g) or GatedAdd(x, g), g = Conv(Conv(s)) with both convolutions 1×1 on the 1×1 map s → one Excite
    node (an SE block's excitation, shaders/excite.comp): three dispatches become one, with the same answer bit
    for bit. Only where the kernel takes the block's size (vk/kernels/excite.py `fuses`); each conv is dense,
    unpadded and unstrided, ends in at most a bias and an activation, and feeds the next node alone (no output,
    no other reader); g broadcasts over x's map only ((N, C, 1, 1) against (N, C, H, W)); and the three nodes
    store one precision (the product's stays fp32 where it makes a graph output). The Excite takes the product's
    name, so a precision plan names it as it named the product."""
    g = spec.graph
    uses, producer = uses_and_producers(g)
    storage = storage_of(g)

    def single_use_conv(value: str) -> Node | None:
        conv = producer.get(value)
        if (conv is None or conv.op != "Conv" or uses.get(value) != 1 or value in g.outputs
                or not 2 <= len(conv.inputs) <= 3 or conv.inputs[1] not in g.constants
                or (len(conv.inputs) == 3 and conv.inputs[2] and conv.inputs[2] not in g.constants)):
            return None
        a = conv.attrs
        w = g.constants[conv.inputs[1]]
        if (w.ndim != 4 or w.shape[2:] != (1, 1) or int(a.get("group", 1)) != 1
                or any(int(v) != 1 for v in (*a.get("strides", (1, 1)), *a.get("dilations", (1, 1))))
                or any(int(v) != 0 for v in a.get("pads", (0, 0, 0, 0)))
                or a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID")
                or "post_scale" in a or "post_shift" in a):
            return None
        return conv

    dropped: set[str] = set()
    replaced: dict[str, Node] = {}
    for node in g.nodes:
        if node.op not in ("Mul", "GatedAdd") or len(node.inputs) != 2:
            continue
        orders = [node.inputs] if node.op == "GatedAdd" else [node.inputs, node.inputs[::-1]]
        for x, gate in orders:
            second = single_use_conv(gate)
            first = single_use_conv(second.inputs[0]) if second is not None else None
            if first is None or second is None or x not in spec.shapes:
                continue
            s = first.inputs[0]
            x_shape, s_shape = spec.shape(x), spec.shapes.get(s)
            c1, c = g.constants[first.inputs[1]].shape[:2]
            if (not excite_fuses(c, c1) or s_shape is None or len(x_shape) != 4 or len(s_shape) != 4
                    or tuple(s_shape[1:]) != (c, 1, 1) or x_shape[1] != c or s_shape[0] != x_shape[0]
                    or spec.shape(node.outputs[0]) != x_shape or g.constants[second.inputs[1]].shape[:2] != (c, c1)):
                continue
            if len({storage(n) for n in (first, second, node)}) != 1:
                continue
            bias = [conv.inputs[2] if len(conv.inputs) == 3 else "" for conv in (first, second)]
            conv_attrs = [epilogue_attrs(conv) for conv in (first, second)]
            replaced[node.name] = Node("Excite", node.name,
                                       [x, s, first.inputs[1], bias[0], second.inputs[1], bias[1]],
                                       list(node.outputs), {"gated_add": node.op == "GatedAdd",
                                                            "first": conv_attrs[0], "second": conv_attrs[1]})
            dropped |= {first.name, second.name}
            break
    return rewritten(spec, replaced, dropped)


def fuse_resize_add(spec: Specialized) -> Specialized:
    """Add(Resize(x), a) → one Resize with a as a fifth input (an FPN's upsample-and-add: one dispatch and one
    pass over the map fewer; shaders/resize.comp rounds as the two nodes did, so bit for bit). Only for nearest
    resizing (a gather), where the Add's two inputs have one shape and storage (no broadcasting), the Resize's
    output feeds the Add alone, and a is computed before the Resize runs."""
    def with_addend(resize: Node, value: str, a: str) -> list[str] | None:
        if (resize.op != "Resize" or len(resize.inputs) > 4 or resize.attrs.get("mode", "nearest") != "nearest"
                or spec.dtype(value) != spec.dtype(a)):
            return None
        return [*resize.inputs, *[""] * (4 - len(resize.inputs)), a]  # absent roi/scales/sizes stay ""

    return _fold_add(spec, with_addend)


def _fold_add(spec: Specialized, fold: Callable[[Node, str, str], list[str] | None]) -> Specialized:
    """Add(p, a) → p's node computing the Add's output, with the inputs `fold(node, p, a)` gives it (None: not
    this node). Only where the Add's two inputs have one shape (no broadcasting) and p feeds the Add alone and is
    no graph output. Either operand of the Add may be p. The fused node runs where p's node ran, or, where a is
    computed after that (SVTR's last skip connection, whose transpose comes after the conv it is added to), where
    the Add ran: p's node then reads its inputs later, which only the Add read from p. That move only in fp32
    storage, where folding changes no answer; an fp16 plan keeps its answers as its sameness gate measured them."""
    g = spec.graph
    uses, _ = uses_and_producers(g)
    storage = storage_of(g)
    position = {out: i for i, node in enumerate(g.nodes) for out in node.outputs}
    fused: dict[int, Node] = {}  # the fused node's position (its producer's or its Add's) → the fused node
    taken: set[int] = set()  # producers with an Add folded in
    dropped: set[int] = set()
    for i, node in enumerate(g.nodes):
        if node.op != "Add" or len(node.inputs) != 2 or any(n not in spec.shapes for n in node.inputs):
            continue
        for value, other in (node.inputs, node.inputs[::-1]):
            at = position.get(value, -1)
            if (at < 0 or at in taken or uses[value] != 1 or value in g.outputs
                    or spec.shapes[value] != spec.shapes[other]):
                continue
            producer = g.nodes[at]
            inputs = fold(producer, value, other)
            if inputs is None:
                continue
            later = position.get(other, -1) >= at  # a is made after p: the fused node runs in the Add's place
            if later and storage(producer) != FLOAT32:
                continue  # (conv kernels add a to the unrounded sum: in fp16 not the answer that ran, so left)
            taken.add(at)
            fused[i if later else at] = Node(producer.op, producer.name, inputs, [node.outputs[0]], producer.attrs)
            dropped.add(at if later else i)
            break
    if not fused:
        return spec
    out = g.shallow_copy()
    out.nodes = [fused.get(i, node) for i, node in enumerate(g.nodes) if i not in dropped]
    return Specialized(out, spec.shapes, spec.dtypes)


def _is_depthwise(g: Graph, conv: Node) -> bool:
    w = g.constants.get(conv.inputs[1])
    group = int(conv.attrs.get("group", 1))
    return w is None or (w.ndim == 4 and w.shape[1] == 1 and w.shape[0] == group and group > 1)


def fuse_attention(spec: Specialized) -> Specialized:
    """SVTR's attention as exported — the (N, T, 3, heads, D) q/k/v tensor transposed to (3, N, heads, T, D) and
    sliced into q, k and v, q times a scalar (plus a scalar), k transposed, MatMul, Softmax over the last axis,
    MatMul with v, transposed to (N, T, heads, D) — → one Attention node (shaders/attention.comp): eleven
    dispatches become one, with the same answer bit for bit. Only where every intermediate feeds the next node
    alone (no output, no other reader), the kernel takes the size (vk/kernels/attention.py `fits`: T ≥ 2, where
    the products ran on gemm.comp) and every node stores one precision. The Attention takes the last
    Transpose's name."""
    g = spec.graph
    uses, producer = uses_and_producers(g)
    readers = g.consumers()
    storage = storage_of(g)

    def only(value: str, op: str) -> Node | None:
        """The node of type `op` that makes `value`, which nothing else reads."""
        node = producer.get(value)
        ok = node is not None and node.op == op and uses.get(value) == 1 and value not in g.outputs
        return node if ok else None

    def reader(value: str, op: str) -> Node | None:
        """The one node, of type `op`, that reads `value`."""
        found = readers.get(value, [])
        ok = len(found) == 1 and found[0].op == op and uses.get(value) == 1 and value not in g.outputs
        return found[0] if ok else None

    def scalar_operand(node: Node) -> tuple[str, str] | None:
        """(the runtime input, the one-element float constant) of a binary node with one of each."""
        a, b = node.inputs
        for value, const in ((a, b), (b, a)):
            c = g.constants.get(const)
            if value in spec.shapes and c is not None and c.size == 1 and c.dtype.kind == "f":
                return value, const
        return None

    def slice_of(view_out: str, index: int) -> tuple[Node, Node] | None:
        """(the View, the Slice) that make `view_out` as entry `index` of axis 0 of the Slice's input."""
        view = only(view_out, "View")
        cut = only(view.inputs[0], "Slice") if view is not None else None
        if view is None or cut is None or len(cut.inputs) not in (4, 5):
            return None
        bounds: list[int] = []
        for name in cut.inputs[1:]:  # starts, ends, axes and (perhaps) steps
            value = g.constants.get(name)
            if value is None or value.size != 1:
                return None
            bounds.append(int(value.reshape(-1)[0]))
        start, end, axis, step = bounds if len(bounds) == 4 else [*bounds, 1]
        part, whole = spec.shapes.get(view_out), spec.shapes.get(cut.inputs[0])
        if part is None or whole is None or tuple(part) != tuple(whole[1:]):  # (the View drops the sliced axis)
            return None
        return (view, cut) if (start, end, axis, step) == (index, index + 1, 0, 1) else None

    dropped: set[str] = set()
    replaced: dict[str, Node] = {}
    for sm in g.nodes:
        if sm.op != "Softmax" or len(sm.inputs) != 1:
            continue
        scores = spec.shapes.get(sm.inputs[0])
        if scores is None or len(scores) != 4 or int(sm.attrs.get("axis", -1)) not in (-1, 3):
            continue
        mm1 = only(sm.inputs[0], "MatMul")
        mm2 = reader(sm.outputs[0], "MatMul")
        if (mm1 is None or mm2 is None or len(mm1.inputs) != 2 or len(mm2.inputs) != 2
                or mm2.inputs[0] != sm.outputs[0]):
            continue
        if any(n.attrs.get("activation", "none") != "none" for n in (mm1, mm2)):
            continue
        back = reader(mm2.outputs[0], "Transpose")
        kt = only(mm1.inputs[1], "Transpose")
        if (back is None or kt is None or list(back.attrs.get("perm", ())) != [0, 2, 1, 3]
                or list(kt.attrs.get("perm", ())) != [0, 1, 3, 2]):
            continue
        # q: Mul by a scalar, then perhaps Add of a scalar
        add_const, q_value = "", mm1.inputs[0]
        add = only(q_value, "Add")
        if add is not None:
            found = scalar_operand(add)
            if found is None:
                continue
            q_value, add_const = found
        mul = only(q_value, "Mul")
        found = scalar_operand(mul) if mul is not None else None
        if mul is None or found is None:
            continue
        q_view, scale_const = found
        found_parts = [slice_of(q_view, 0), slice_of(kt.inputs[0], 1), slice_of(mm2.inputs[1], 2)]
        parts = [part for part in found_parts if part is not None]
        if len(parts) != 3:
            continue
        sources = {cut.inputs[0] for _, cut in parts}
        split = producer.get(sources.pop()) if len(sources) == 1 else None
        if (split is None or split.op != "Transpose" or list(split.attrs.get("perm", ())) != [2, 0, 3, 1, 4]
                or uses.get(split.outputs[0]) != 3 or split.outputs[0] in g.outputs):
            continue
        qkv = split.inputs[0]
        qkv_shape = spec.shapes.get(qkv)
        if (qkv_shape is None or len(qkv_shape) != 5 or qkv_shape[2] != 3
                or not attention_fits(qkv_shape[1], qkv_shape[4])):
            continue
        computing = [split, *(cut for _, cut in parts), mul, kt, mm1, sm, mm2, back]
        if add is not None:
            computing.append(add)
        if len({storage(n) for n in computing}) != 1:
            continue
        replaced[back.name] = Node("Attention", back.name, [qkv, scale_const, add_const], list(back.outputs))
        dropped |= {n.name for n in computing if n is not back} | {view.name for view, _ in parts}
    return rewritten(spec, replaced, dropped)


def epilogue_attrs(node: Node) -> dict[str, object]:
    """The activation a pass fused into `node` (its attributes), for a fused node that runs its epilogue."""
    return {k: v for k, v in node.attrs.items() if k in ("activation", "act_alpha", "act_beta")}


def storage_of(g: Graph) -> Callable[[Node], np.dtype]:
    """Each node's storage dtype, as precision.assign will give it (the producers of outputs store fp32)."""
    plan = g.precision
    fp32 = output_producers(g, g.outputs) if plan is not None and plan.mixed else set()

    def storage(node: Node) -> np.dtype:
        return FLOAT32 if plan is None or node.name in fp32 else plan.dtype(node)

    return storage


def uses_and_producers(g: Graph) -> tuple[dict[str, int], dict[str, Node]]:
    """How many times each value is read (a node reading it twice counts twice), and the node making each."""
    return {name: len(readers) for name, readers in g.consumers().items()}, g.producers()


def rewritten(spec: Specialized, replaced: dict[str, Node], dropped: set[str]) -> Specialized:
    """spec with the nodes named in `replaced` replaced (each in its place) and those in `dropped` gone."""
    if not replaced:
        return spec
    out = spec.graph.shallow_copy()
    out.nodes = [replaced.get(n.name, n) for n in spec.graph.nodes if n.name not in dropped]
    return Specialized(out, spec.shapes, spec.dtypes)
