"""What a plan is for one input shape, as data: its placement, its staging, and every command it records.

`describe()` works it out: it specialises the graph for the shape (shape inference, folding of shape subgraphs,
the per-shape passes), places every activation by lifetime (vk/graph/memory_plan.py) in the device region the
model's plans share (vk/graph/shared_memory.py), its staging in the shared upload and readback regions, and
collects the commands of one recording (upload → every node's dispatches (vk/graph/lower.py) → readback).
vk/graph/plan.py turns a Recipe into a recorded plan.

Run on symbolic dimensions (vk/symbolic.py), the same code gives a recipe whose numbers are expressions of the
input's dimensions: vk/graph/shape_classes.py compiles it into one function per shape class, so a new shape of
a known class costs an evaluation of that function instead of this Python.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from vkocr.engine.commands import Commands
from vkocr.engine.errors import BindingTooLarge, EngineError, LoweringError
from vkocr.engine.graph import passes
from vkocr.engine.graph.constants import ConstantArena, constant_key
from vkocr.engine.graph.ir import Graph, Node
from vkocr.engine.graph.lower import (
    check_lowerable,
    derived_key,
    device_constants,
    host_inputs,
    is_view,
    prepare,
    record_emit,
    require_host_constants,
)
from vkocr.engine.graph.lower_registry import Emit, NodeConstants
from vkocr.engine.graph.memory_plan import LayoutCache, Lifetime, MemoryPlan, aligned, plan_memory
from vkocr.engine.graph.precision import assign
from vkocr.engine.graph.schedule import group_ends
from vkocr.engine.graph.shared_memory import SharedMemory
from vkocr.engine.graph.specialize import Specialized, specialize
from vkocr.engine.recorder import Recorder
from vkocr.engine.symbolic import concrete, dim, is_symbolic
from vkocr.engine.tensor import Tensor

if TYPE_CHECKING:
    from vkocr.engine.device import Device


class NotTraceable(EngineError):
    """Raised when a model's plans need something per shape that is not arithmetic (constants folded for one
    shape only): they are described shape by shape."""


def specialize_for(graph: Graph, input_shape: tuple[int, ...], extra_outputs: Sequence[str] = (), *,
                   precision: bool = True) -> Specialized:
    """Shapes for this input, shape subgraphs folded, then the per-shape passes, then the storage precision of
    every value with casts where precisions meet (vk/graph/precision.py; `precision=False`: all float32, as
    the NumPy executor computes). The per-shape passes take `extra_outputs` for outputs: a value asked for is
    never fused away (a calibration reads every node's)."""
    if len(graph.inputs) != 1:
        raise EngineError(f"plans take one graph input, {graph.name} has {graph.inputs}")
    spec = specialize(graph, {graph.inputs[0]: tuple(dim(d) for d in input_shape)})
    spec.graph.outputs = output_names(spec.graph, extra_outputs)  # (specialize's own copy)
    spec = passes.finalize(spec)
    spec.graph.outputs = list(graph.outputs)  # (finalize's own copy)
    if not precision or graph.precision is None or not graph.precision.mixed:
        return spec
    g = spec.graph
    constants = g.constants

    def device_inputs(node: Node) -> list[int]:
        values = [constants.get(name) if name else None for name in node.inputs]
        host = host_inputs(node, values)
        return [i for i in range(len(node.inputs)) if i not in host]

    shapes = dict(spec.shapes)
    graph_out, dtypes = assign(g, shapes, graph.precision, output_names(g, extra_outputs), device_inputs)
    return Specialized(graph_out, shapes, dtypes)


def value_bytes(spec: Specialized, name: str) -> int:
    return max(1, math.prod(spec.shapes[name])) * spec.dtype(name).itemsize


def staged_bytes(spec: Specialized, names: Sequence[str], alignment: int) -> int:
    """Bytes of the staging for these values, laid out one after another (as `describe` places them)."""
    return sum(aligned(value_bytes(spec, n), alignment) for n in names)


def memory_needs(spec: Specialized, outputs: Sequence[str], hooks: StageHooks | None, alignment: int,
                 layouts: LayoutCache | None = None) -> tuple[MemoryPlan, int, int]:
    """The activation placement of a plan (an earlier one's from `layouts` where it fits), and the bytes of
    its upload and readback staging."""
    values, aliases = lifetimes(spec, outputs), view_sources(spec.graph.nodes)
    memory = layouts.plan(values, aliases, alignment) if layouts is not None else plan_memory(values, aliases,
                                                                                               alignment)
    upload = staged_bytes(spec, [spec.graph.inputs[0]], alignment) if hooks is None else 0
    readback = staged_bytes(spec, outputs, alignment) if hooks is None or hooks.read_outputs else 0
    return memory, upload, readback


def output_names(graph: Graph, extra_outputs: Sequence[str]) -> list[str]:
    return [*graph.outputs, *(n for n in extra_outputs if n not in graph.outputs)]


def plan_needs(graph: Graph, input_shape: Sequence[int], alignment: int, *, extra_outputs: Sequence[str] = (),
               hooks: StageHooks | None = None) -> tuple[int, int, int]:
    """Bytes of the device, upload and readback regions a plan for this shape would use, without recording it
    (for reserving a model's shared memory ahead of its largest input)."""
    spec = specialize_for(graph, tuple(int(d) for d in input_shape), extra_outputs)
    memory, upload, readback = memory_needs(spec, output_names(spec.graph, extra_outputs), hooks, alignment)
    return memory.arena_bytes, upload, readback


# -- lifetimes -----------------------------------------------------------------------------------------------------


def view_sources(nodes: Sequence[Node]) -> dict[str, str]:
    """Output → input of every node that is a view (same bytes, another shape)."""
    return {n.outputs[0]: n.inputs[0] for n in nodes if is_view(n)}


def lifetimes(spec: Specialized, keep: Sequence[str]) -> list[Lifetime]:
    """Step 0 uploads the inputs, node i runs at step i + 1, the step after the last node reads back `keep`. A
    value lives to the end of the barrier group of its last reader (vk/graph/schedule.py `group_ends`), so no
    other takes its bytes while that group runs (a barrier there would serialise the group)."""
    g = spec.graph
    end = len(g.nodes) + 1
    first = {name: 0 for name in g.inputs}
    last = dict(first)
    for step, node in enumerate(g.nodes, start=1):
        for name in node.inputs:
            if name in first:
                last[name] = step
        for name in node.outputs:
            if name:
                first[name] = last[name] = step
    for name in keep:
        last[name] = end
    ends = group_ends(g)
    return [Lifetime(name, value_bytes(spec, name), first[name], ends[last[name]]) for name in first]


# -- what a recording reads ------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class StageHooks:
    """GPU work recorded around a plan's network in the same command buffer (compared by identity, so a
    model caches one plan per shape and hooks object).

    `prologue(rec, input)` fills the network input on the GPU instead of the host upload (an application
    decodes an image once and preprocesses it in a shader); `epilogue(rec, outputs)` consumes the outputs on
    the GPU (an argmax, say) and records its own readback; with `read_outputs=False` the full outputs are not
    copied back at all. Both only record: whatever changes per request they read from buffers they own.
    """

    prologue: Callable[[Recorder, Tensor], None]
    epilogue: Callable[[Recorder, dict[str, Tensor]], None] | None = None
    read_outputs: bool = True


@dataclass(frozen=True)
class Binding:
    """What a node reads besides activations, for one set of constant inputs: their values, which positions
    are read on the host, the device tensors of the others, the node's derived constants, and its prepared
    recording (lower.prepare)."""

    values: list[np.ndarray | None]
    host: frozenset[int]
    constants: dict[str, Tensor]
    consts: NodeConstants
    emit: Emit


class Recipe(NamedTuple):
    """A plan for one input shape, as numbers and commands (what vk/graph/plan.py records and runs)."""

    input_shape: tuple[int, ...]
    output_names: list[str]
    output_shapes: list[tuple[int, ...]]
    offsets: dict[str, int]  # every activation's byte offset in the device region
    arena_bytes: int
    naive_bytes: int
    upload_bytes: int
    readback_bytes: int
    upload: tuple[int, int] | None  # (offset, bytes) of the input's staging; None when a prologue fills it
    readback: list[tuple[int, int]]  # (offset, bytes) of each output's staging; empty when none is read back
    commands: Commands
    spans: list[tuple[str, int]]  # commands of the input step and of every node (profiles split by them)


def _check_graph(spec: Specialized, outputs: Sequence[str], input_shape: tuple[int, ...]) -> None:
    g = spec.graph
    for node in g.nodes:
        check_lowerable(node)
    for name in outputs:
        if name not in spec.shapes or name in g.constants:
            raise LoweringError(f"output {name} is not computed at runtime for input shape {input_shape}")


def _check_binding_sizes(spec: Specialized, memory: MemoryPlan, limit: int, input_shape: tuple[int, ...]) -> None:
    """Every value is bound whole by the dispatches that use it: one beyond the device's limit could not run."""
    if not is_symbolic((memory.naive_bytes,)) and memory.naive_bytes <= limit:
        return  # all values together fit: so does each (the common case, no loop; traced, a guard per value)
    for name in memory.offsets:
        nbytes = math.prod(spec.shapes[name]) * spec.dtype(name).itemsize
        if nbytes > limit:
            raise BindingTooLarge(
                f"input {input_shape}: {name} {tuple(spec.shapes[name])} takes {nbytes / 2**20:.1f} MiB, more "
                f"than this device binds ({limit / 2**20:.0f} MiB, maxStorageBufferRange)")


def _binding(node: Node, values: list[np.ndarray | None], constants: dict[str, Tensor]) -> Binding:
    host = host_inputs(node, values)
    require_host_constants(node, values, host)
    prefix = derived_key(node, "")
    derived = {k[len(prefix):]: t for k, t in constants.items() if k.startswith(prefix)} if constants else {}
    consts = NodeConstants(values, derived)
    static = [constants.get(name) if name and i not in host else None for i, name in enumerate(node.inputs)]
    return Binding(values, host, constants, consts, prepare(node, static, consts))


class _Step(NamedTuple):
    node: Node
    ins: list[Tensor | None]
    outs: list[Tensor]
    emit: Emit


def _bind_steps(device: Device, spec: Specialized, tensors: dict[str, Tensor], weights: ConstantArena,
                memo: dict[str, Binding] | None, local: ConstantArena | None, symbolic: bool
                ) -> tuple[list[_Step], ConstantArena | None]:
    """Every node's device tensors and host constants. Constants the model's weights lack (values folded for
    this shape only) are uploaded into a small arena of the plan (`local`, made here if needed). `memo` keeps,
    per node, what does not depend on the shape (its constants are the very arrays of an earlier plan)."""
    g = spec.graph
    work: list[tuple[Node, list[np.ndarray | None], Binding | None, dict[str, np.ndarray]]] = []
    for node in g.nodes:
        values = [g.constants.get(name) if name else None for name in node.inputs]
        known = memo.get(node.name) if memo is not None else None
        if known is not None and len(known.values) == len(values) and all(
                a is b for a, b in zip(known.values, values)):
            work.append((node, values, known, {}))
        else:
            work.append((node, values, None, device_constants(node, values, spec.dtype(node.outputs[0]))))
    missing = {constant_key(k, a): a for _, _, _, needed in work for k, a in needed.items()
               if weights.lookup(constant_key(k, a), a) is None}
    if missing and local is None:  # (a description for profile() finds them uploaded)
        if symbolic:
            raise NotTraceable(f"{g.name}: constants folded per shape ({', '.join(sorted(missing))})")
        local = ConstantArena(device, missing)

    def device_tensor(key: str, array: np.ndarray) -> Tensor:
        key = constant_key(key, array)
        found = local.tensors[key] if local is not None and key in missing else weights.lookup(key, array)
        assert found is not None, key
        return found

    steps = []
    for node, values, known, needed in work:
        if known is None:
            known = _binding(node, values, {k: device_tensor(k, a) for k, a in needed.items()})
            # plan-local constants: not kept
            if memo is not None and not any(constant_key(k, a) in missing for k, a in needed.items()):
                memo[node.name] = known
        host, constants = known.host, known.constants
        ins: list[Tensor | None] = [None if not name or i in host else tensors[name] if name in tensors
                                    else constants[name] for i, name in enumerate(node.inputs)]
        steps.append(_Step(node, ins, [tensors[name] for name in node.outputs if name], known.emit))
    return steps, local


def _staging(tensors: dict[str, Tensor], names: Sequence[str], alignment: int) -> list[tuple[int, int]]:
    """(offset, bytes) of each value's staging, one after another in its region."""
    offset, placed = 0, []
    for name in names:
        nbytes = tensors[name].nbytes
        placed.append((offset, nbytes))
        offset += aligned(nbytes, alignment)
    return placed


def _collect(device: Device, steps: list[_Step], tensors: dict[str, Tensor], input_name: str,
             outputs: Sequence[str], upload: tuple[int, int] | None, readback: list[tuple[int, int]],
             shared: SharedMemory, hooks: StageHooks | None, profile: bool) -> tuple[Commands, list[tuple[str, int]]]:
    """The commands of the whole plan, and the command count of the input step and of every node, in order."""
    rec = Recorder(device, profile=profile)
    try:
        if hooks is None:
            assert upload is not None
            rec.copy(shared.region("upload").sub(*upload).view, tensors[input_name].view, label="upload")
        else:
            hooks.prologue(rec, tensors[input_name])
        spans = [("input", rec.command_count)]
        for step in steps:
            before = rec.command_count
            record_emit(rec, step.node, step.emit, step.ins, step.outs)
            spans.append((step.node.name, rec.command_count - before))
        if hooks is not None and hooks.epilogue is not None:
            hooks.epilogue(rec, {name: tensors[name] for name in outputs})
        region = shared.region("readback") if readback else None
        for name, placed in zip(outputs, readback):
            assert region is not None
            rec.copy(tensors[name].view, region.sub(*placed).view, label="readback")
        return rec.take_commands(), spans
    finally:
        rec.close()


def describe(device: Device, graph: Graph, weights: ConstantArena, input_shape: Sequence[Any], *,
             shared: SharedMemory, extra_outputs: Sequence[str] = (), hooks: StageHooks | None = None,
             bindings: dict[str, Binding] | None = None, layouts: LayoutCache | None = None,
             local: ConstantArena | None = None, profile: bool = False) -> tuple[Recipe, ConstantArena | None]:
    """The recipe of a plan for `input_shape` (ints, or the Syms of a trace) and the plan-local constants it
    uploaded (None when the weights hold everything). Reserves the shared regions it needs. `bindings`: the
    model's memo of node bindings; `layouts`: its activation placements, reused where this shape fits."""
    shape = tuple(dim(d) for d in input_shape)
    spec = specialize_for(graph, shape, extra_outputs)
    g = spec.graph
    outputs = output_names(g, extra_outputs)
    _check_graph(spec, outputs, shape)
    memory, upload_bytes, readback_bytes = memory_needs(spec, outputs, hooks, device.alignment, layouts)
    _check_binding_sizes(spec, memory, device.info.max_storage_buffer_range, shape)
    shared.reserve(concrete(memory.arena_bytes), concrete(upload_bytes), concrete(readback_bytes))
    # Under a trace these are guards: no shape of the class needs more than the regions its commands name.
    if not (memory.arena_bytes <= shared.bytes_of("device") and upload_bytes <= shared.bytes_of("upload")
            and readback_bytes <= shared.bytes_of("readback")):
        raise EngineError(f"input {shape}: the shared regions were not reserved for this plan")
    arena = shared.region("device")
    slots = memory.slots or {}
    tensors = {name: Tensor(arena.sub(offset, value_bytes(spec, name), slots.get(name)), spec.shapes[name],
                            spec.dtype(name)) for name, offset in memory.offsets.items()}
    steps, local = _bind_steps(device, spec, tensors, weights, bindings, local, is_symbolic(shape))
    input_name = g.inputs[0]
    upload = _staging(tensors, [input_name], device.alignment)[0] if hooks is None else None
    readback = _staging(tensors, outputs, device.alignment) if readback_bytes != 0 else []
    commands, spans = _collect(device, steps, tensors, input_name, outputs, upload, readback, shared, hooks, profile)
    recipe = Recipe(shape, outputs, [spec.shapes[name] for name in outputs], dict(memory.offsets),
                    memory.arena_bytes, memory.naive_bytes, upload_bytes, readback_bytes, upload, readback, commands,
                    spans)
    return recipe, local
