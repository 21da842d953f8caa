"""Fusions that keep an intermediate feature map out of memory (run by passes.finalize, per shape): DB's two
upsampling ConvTransposes as one dispatch, a stem's MaxPool computed inside the Concat that reads it (and, in
fp32, the stem's two 2×2 convolutions beside it), an FPN's nearest upsamplings gathered by the Concat that joins
them, and its upsample-and-adds computed by the excitations that make their addends. Each computes what the nodes
it replaces computed, bit for bit, in fp32 and fp16."""

from __future__ import annotations

from vkocr.engine.graph.ir import Node
from vkocr.engine.graph.opset_layout import resize_args, resize_modes
from vkocr.engine.graph.opset_windows import window_pads
from vkocr.engine.graph.precision import FLOAT32
from vkocr.engine.graph.shape_fusion import epilogue_attrs, rewritten, storage_of, uses_and_producers
from vkocr.engine.graph.specialize import Specialized
from vkocr.engine.kernels.conv_transpose import pair_fuses
from vkocr.engine.kernels.resize import integer_upsampling
from vkocr.engine.kernels.stem_concat import fuses as stem_fuses


def fuse_conv_transpose_pair(spec: Specialized) -> Specialized:
    """ConvTranspose(ConvTranspose(x)), each kernel equal to its stride (DB's head: a map upsampled twice) → one
    ConvTransposePair node (shaders/conv_transpose_pair.comp), which never stores the middle map, with the same
    answer bit for bit. Only where each has constant weights and bias, no padding, dilation, output padding,
    groups or folded affine, the first feeds the second alone (no output, no other reader), the kernel holds the
    middle channels (vk/kernels/conv_transpose.py `pair_fuses`), and both store one precision or the second fp32.
    The pair takes the second's name, and so its precision: in an fp16 plan, where DB's map (the output) stores
    fp32 and the first fp16, the pair runs in fp32 from its input cast up, its middle map no longer rounded to fp16
    (a cast of the input instead of one of the four times larger middle map, and the fp32 answer of that input)."""
    g = spec.graph
    uses, producer = uses_and_producers(g)
    storage = storage_of(g)

    def upsampling(node: Node | None) -> bool:
        if node is None or node.op != "ConvTranspose" or not 2 <= len(node.inputs) <= 3:
            return False
        w = g.constants.get(node.inputs[1])
        a = node.attrs
        bias = node.inputs[2] if len(node.inputs) == 3 else ""
        if w is None or w.ndim != 4 or (bias and bias not in g.constants):
            return False
        kernel = [int(k) for k in w.shape[2:]]
        return ([int(v) for v in a.get("strides", (1, 1))] == kernel
                and [int(v) for v in a.get("kernel_shape", kernel)] == kernel
                and not any(int(v) for v in a.get("pads", (0, 0, 0, 0)))
                and all(int(v) == 1 for v in a.get("dilations", (1, 1)))
                and not any(int(v) for v in a.get("output_padding", (0, 0)))
                and int(a.get("group", 1)) == 1 and a.get("auto_pad", "NOTSET") in ("NOTSET", "VALID")
                and not {"output_shape", "post_scale", "post_shift"} & set(a))

    dropped: set[str] = set()
    replaced: dict[str, Node] = {}
    for node in g.nodes:
        first = producer.get(node.inputs[0]) if node.inputs else None
        if (not upsampling(node) or not upsampling(first) or first is None or uses.get(node.inputs[0]) != 1
                or node.inputs[0] in g.outputs or first.name in replaced
                or len(spec.shapes.get(first.inputs[0], ())) != 4
                or not pair_fuses(g.constants[first.inputs[1]].shape, g.constants[node.inputs[1]].shape)
                or not (storage(first) == storage(node) or storage(node) == FLOAT32)):
            continue
        bias = [n.inputs[2] if len(n.inputs) == 3 else "" for n in (first, node)]
        replaced[node.name] = Node("ConvTransposePair", node.name,
                                   [first.inputs[0], first.inputs[1], bias[0], node.inputs[1], bias[1]],
                                   list(node.outputs), {"first": epilogue_attrs(first),
                                                       "second": epilogue_attrs(node)})
        dropped.add(first.name)
    return rewritten(spec, replaced, dropped)


def fuse_pool_concat(spec: Specialized) -> Specialized:
    """Concat(MaxPool(a), b, ...) on channels → one Concat that pools a on the way (a network stem's: PP-HGNet's
    and PP-LCNetV3's; shaders/concat.comp takes the max as pool.comp does, so bit for bit): one dispatch and one
    pass over the pooled map fewer. Only where the MaxPool is the Concat's first input and feeds it alone (no
    output, no other reader), pools at stride 1 without dilation and pads that keep the map's size, and stores
    the Concat's precision."""
    g = spec.graph
    uses, producer = uses_and_producers(g)
    storage = storage_of(g)
    dropped: set[str] = set()
    replaced: dict[str, Node] = {}
    for node in g.nodes:
        if node.op != "Concat" or len(node.inputs) < 2 or len(spec.shapes.get(node.outputs[0], ())) != 4:
            continue
        pool = producer.get(node.inputs[0])
        if (int(node.attrs.get("axis", 0)) not in (1, -3) or pool is None or pool.op != "MaxPool"
                or uses.get(node.inputs[0]) != 1 or node.inputs[0] in g.outputs or storage(pool) != storage(node)):
            continue
        pads = size_keeping_pads(pool)
        if pads is None:
            continue
        replaced[node.name] = Node("Concat", node.name, [pool.inputs[0], *node.inputs[1:]], list(node.outputs),
                                   {**node.attrs, "pool_first": {"kernel_shape": list(pool.attrs["kernel_shape"]),
                                                                 "pads": pads}})
        dropped.add(pool.name)
    return rewritten(spec, replaced, dropped)


def fuse_stem_concat(spec: Specialized) -> Specialized:
    """Concat(MaxPool(a), Conv(Conv(a))) on channels, the pool in the Concat (fuse_pool_concat's) and all three 2×2
    at stride 1 padded below and to the right (PP-HGNetV2's stem: PP-OCRv5/v6 det and rec) → one StemConcat node
    (shaders/stem_concat.comp): three dispatches become one, and the middle map and the second convolution's never
    reach memory. Only where each convolution has constant weights and bias, group 1, no dilation, folded affine
    or residual, the first feeds the second alone and the second the Concat alone (no output, no other reader),
    the kernel holds the channels (vk/kernels/stem_concat.py `fuses`), and all three store fp32: the fused
    kernel adds in conv2d_direct.comp's order, which runs those convolutions in fp32, so its answer is theirs bit
    for bit; in fp16 a device with cooperative matrices runs them tap by tap (conv2d_taps.comp), in another."""
    g = spec.graph
    uses, producer = uses_and_producers(g)
    storage = storage_of(g)

    def stem_conv(value: str, source: str) -> Node | None:
        conv = producer.get(value)
        if (conv is None or conv.op != "Conv" or uses.get(value) != 1 or value in g.outputs
                or not 2 <= len(conv.inputs) <= 3 or conv.inputs[0] != source or conv.inputs[1] not in g.constants
                or (len(conv.inputs) == 3 and conv.inputs[2] and conv.inputs[2] not in g.constants)
                or "post_scale" in conv.attrs or "post_shift" in conv.attrs or storage(conv) != FLOAT32):
            return None
        a = conv.attrs
        w = g.constants[conv.inputs[1]]
        shape = spec.shapes.get(source, ())
        if (w.ndim != 4 or tuple(w.shape[2:]) != (2, 2) or len(shape) != 4 or int(a.get("group", 1)) != 1
                or any(int(v) != 1 for v in (*a.get("strides", (1, 1)), *a.get("dilations", (1, 1))))):
            return None
        try:
            pads = window_pads(conv, (1, 1, 1, 1), (2, 2))  # at stride 1, the same for every size
        except ValueError:
            return None
        return conv if [int(v) for v in pads] == [0, 0, 1, 1] else None

    dropped: set[str] = set()
    replaced: dict[str, Node] = {}
    for node in g.nodes:
        pool = node.attrs.get("pool_first")
        if (node.op != "Concat" or pool is None or len(node.inputs) != 2 or storage(node) != FLOAT32
                or list(pool["kernel_shape"]) != [2, 2] or [int(v) for v in pool["pads"]] != [0, 0, 1, 1]):
            continue
        source = node.inputs[0]
        middle = producer.get(node.inputs[1])
        second = stem_conv(node.inputs[1], middle.inputs[0]) if middle is not None and middle.inputs else None
        first = stem_conv(second.inputs[0], source) if second is not None else None
        if first is None or second is None:
            continue
        w1, w2 = g.constants[first.inputs[1]], g.constants[second.inputs[1]]
        if not stem_fuses(w1.shape, w2.shape) or spec.shapes.get(source, (0, 0))[1] != w1.shape[1]:
            continue
        bias = [conv.inputs[2] if len(conv.inputs) == 3 else "" for conv in (first, second)]
        inputs = [source, first.inputs[1], bias[0], second.inputs[1], bias[1]]
        attrs = {"first": epilogue_attrs(first), "second": epilogue_attrs(second)}
        replaced[node.name] = Node("StemConcat", node.name, inputs, list(node.outputs), attrs)
        dropped |= {first.name, second.name}
    return rewritten(spec, replaced, dropped)


def size_keeping_pads(pool: Node) -> list[int] | None:
    """A 2-D MaxPool's pads (top, left, bottom, right) where it pools at stride 1 without dilation and its pads
    keep the map's size (explicit, or auto_pad SAME_*); None otherwise."""
    a = pool.attrs
    kernel = [int(k) for k in a.get("kernel_shape", ())]
    if (len(kernel) != 2 or any(int(s) != 1 for s in a.get("strides", (1, 1)))
            or any(int(d) != 1 for d in a.get("dilations", (1, 1))) or int(a.get("storage_order", 0)) != 0):
        return None
    try:
        pads = [int(v) for v in window_pads(pool, (1, 1, 1, 1), kernel)]  # at stride 1, the same for every size
    except ValueError:  # an auto_pad the engine does not take
        return None
    keeps = all(pads[i] + pads[i + 2] == kernel[i] - 1 and 0 <= pads[i] < kernel[i] for i in range(2))
    return pads if keeps else None


def fuse_upsample_concat(spec: Specialized) -> Specialized:
    """Concat(..., Resize(a), ...) on channels, each Resize nearest by one integer factor on both axes that lands
    each run of outputs on one source (vk/kernels/resize.py `integer_upsampling`: DB's neck upsamples its four
    levels to one size and joins them) → one Concat that gathers a on the way (`upsample`: a factor per input,
    1 for those read as they are): three dispatches and the upsampled maps fewer. Only where the Resize feeds
    the Concat alone (no output, no other reader), has constant scales, no addend, and stores the Concat's
    precision; never the first input of a Concat that pools it."""
    g = spec.graph
    uses, producer = uses_and_producers(g)
    storage = storage_of(g)

    def factor(value: str, concat: Node) -> int | None:
        resize = producer.get(value)
        if (resize is None or resize.op != "Resize" or not 3 <= len(resize.inputs) <= 4 or uses.get(value) != 1
                or value in g.outputs or storage(resize) != storage(concat)):
            return None
        return nearest_factor(spec, resize)

    dropped: set[str] = set()
    replaced: dict[str, Node] = {}
    for node in g.nodes:
        if (node.op != "Concat" or len(spec.shapes.get(node.outputs[0], ())) != 4
                or int(node.attrs.get("axis", 0)) not in (1, -3) or len(set(node.inputs)) != len(node.inputs)):
            continue
        ups = [None if i == 0 and "pool_first" in node.attrs else factor(name, node)
               for i, name in enumerate(node.inputs)]
        if not any(ups):
            continue
        inputs = [producer[name].inputs[0] if up else name for name, up in zip(node.inputs, ups)]
        replaced[node.name] = Node("Concat", node.name, inputs, list(node.outputs),
                                   {**node.attrs, "upsample": [up or 1 for up in ups]})
        dropped.update(producer[name].name for name, up in zip(node.inputs, ups) if up)
    return rewritten(spec, replaced, dropped)


def nearest_factor(spec: Specialized, resize: Node) -> int | None:
    """The factor f > 1 of a Resize that upsamples a 4-D map by f on both axes, nearest, with constant scales and
    a coordinate mode and rounding that land each run of f outputs on one source (vk/kernels/resize.py
    `integer_upsampling`): a gather of floor(y / f); None for any other Resize."""
    consts = [spec.graph.constants.get(name) if name else None for name in resize.inputs[:4]]
    try:
        _, scales = resize_args(resize, spec.shapes[resize.inputs[0]], consts)
    except (ValueError, KeyError):
        return None
    modes = resize_modes(resize)
    if scales is None or len(scales) != 4 or scales[:2] != [1.0, 1.0] or scales[2] != scales[3] \
            or modes["mode"] != "nearest":
        return None
    up = integer_upsampling(scales[2], modes["coordinate_transformation_mode"], modes["nearest_mode"])
    return up if up is not None and up > 1 else None


def fuse_excite_upsample_add(spec: Specialized) -> Specialized:
    """Resize(u) + e, the Add folded into the Resize (shape_fusion.fuse_resize_add), where e is an Excite's output
    (shape_fusion.fuse_excite) → that Excite adding u upsampled (`upsample`: the factor; u its seventh input): an
    FPN's top-down path, whose lateral maps DB's neck excites before adding the coarser level to them. One
    dispatch and one pass over the map fewer. Only where the Resize is a nearest integer upsampling
    (`nearest_factor`), e feeds it alone (no output, no other reader), and both store one precision. The fused
    node runs where the Resize ran, when u and the excitation's inputs are all made."""
    g = spec.graph
    uses, producer = uses_and_producers(g)
    storage = storage_of(g)
    dropped: set[str] = set()
    replaced: dict[str, Node] = {}
    for node in g.nodes:
        if node.op != "Resize" or len(node.inputs) != 5 or not node.inputs[4]:
            continue
        addend = node.inputs[4]
        excite = producer.get(addend)
        if (excite is None or excite.op != "Excite" or "upsample" in excite.attrs or uses.get(addend) != 1
                or addend in g.outputs or storage(excite) != storage(node) or excite.name in dropped):
            continue
        up = nearest_factor(spec, node)
        if up is None:
            continue
        replaced[node.name] = Node("Excite", excite.name, [*excite.inputs, node.inputs[0]], list(node.outputs),
                                   {**excite.attrs, "upsample": up})
        dropped.add(excite.name)
    return rewritten(spec, replaced, dropped)
