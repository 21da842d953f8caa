"""A plan: one model compiled for one input shape, recorded once and replayed for every request.

Building a plan specialises the graph (shape inference, folding of shape subgraphs), places every activation by
lifetime (vk/graph/memory_plan.py) in the device region it shares with the other plans of its model
(vk/graph/shared_memory.py), and its staging in the shared upload and readback regions, and records ONE command
buffer: upload staging → input tensor, every node's dispatches (vk/graph/lower.py), outputs → readback staging.
`run()` then only copies the input into mapped memory, submits, waits and copies the outputs out. A plan is
built on the request path whenever a new shape arrives, so building it is kept to arithmetic and recording.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from vkocr.engine.errors import BindingTooLarge, EngineError, LoweringError
from vkocr.engine.errors import InputError as InputError  # re-exported: importable from here too
from vkocr.engine.graph import passes
from vkocr.engine.graph.constants import ConstantArena
from vkocr.engine.graph.ir import Graph, Node
from vkocr.engine.graph.lower import (
    Emit,
    NodeConstants,
    check_lowerable,
    derived_key,
    device_constants,
    host_inputs,
    is_view,
    prepare,
    record_emit,
    require_host_constants,
)
from vkocr.engine.graph.memory_plan import LayoutCache, Lifetime, MemoryPlan, aligned, plan_memory
from vkocr.engine.graph.numpy_executor import run_numpy
from vkocr.engine.graph.shared_memory import SharedMemory
from vkocr.engine.graph.specialize import Specialized, specialize
from vkocr.engine.memory import Allocation
from vkocr.engine.recorder import Recorder, Timing
from vkocr.engine.tensor import Tensor
from vkocr.log import get_logger

if TYPE_CHECKING:
    from vkocr.engine.device import Device

log = get_logger(__name__)

FLOAT32 = np.dtype(np.float32)
DEFAULT_TIMEOUT_S = 300.0  # a det plan on a CPU driver (lavapipe) takes tens of seconds


def check_float32(x: Any, what: str) -> np.ndarray:
    """`x` itself when it is a float32 NumPy array; InputError otherwise (never a silent conversion)."""
    if not isinstance(x, np.ndarray):
        raise InputError(f"{what}: expected a numpy array, got {type(x).__name__}")
    if x.dtype != FLOAT32:
        raise InputError(f"{what}: expected float32, got {x.dtype}")
    return x


def check_input_array(x: Any, shape: tuple[int, ...], what: str) -> np.ndarray:
    """`x` itself when it is a float32 array of exactly `shape`; InputError otherwise."""
    arr = check_float32(x, what)
    if tuple(arr.shape) != tuple(shape):
        raise InputError(f"{what}: expected shape {tuple(shape)}, got {tuple(arr.shape)}")
    return arr


def specialize_for(graph: Graph, input_shape: tuple[int, ...]) -> Specialized:
    """Shapes for this input, shape subgraphs folded, then the per-shape passes."""
    if len(graph.inputs) != 1:
        raise EngineError(f"plans take one graph input, {graph.name} has {graph.inputs}")
    return passes.finalize(specialize(graph, {graph.inputs[0]: tuple(int(d) for d in input_shape)}))


def staged_bytes(spec: Specialized, names: Sequence[str], alignment: int) -> int:
    """Bytes of the staging for these values, laid out one after another (as Plan._stage places them)."""
    return sum(aligned(max(1, math.prod(spec.shapes[n])) * FLOAT32.itemsize, alignment) for n in names)


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


def plan_needs(graph: Graph, input_shape: Sequence[int], alignment: int, *, extra_outputs: Sequence[str] = (),
               hooks: StageHooks | None = None) -> tuple[int, int, int]:
    """Bytes of the device, upload and readback regions a plan for this shape would use, without recording it
    (for reserving a model's shared memory ahead of its largest input)."""
    spec = specialize_for(graph, tuple(int(d) for d in input_shape))
    g = spec.graph
    memory, upload, readback = memory_needs(spec, [*g.outputs, *(n for n in extra_outputs if n not in g.outputs)],
                                            hooks, alignment)
    return memory.arena_bytes, upload, readback


# -- lifetimes -----------------------------------------------------------------------------------------------------


def view_sources(nodes: Sequence[Node]) -> dict[str, str]:
    """Output → input of every node that is a view (same bytes, another shape)."""
    return {n.outputs[0]: n.inputs[0] for n in nodes if is_view(n)}


def lifetimes(spec: Specialized, keep: Sequence[str]) -> list[Lifetime]:
    """Step 0 uploads the inputs, node i runs at step i + 1, the step after the last node reads back `keep`."""
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
    return [Lifetime(name, max(1, math.prod(spec.shapes[name])) * FLOAT32.itemsize, first[name], last[name])
            for name in first]


# -- recording -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanProfile:
    """GPU time of one replay: the input upload, every node that dispatched (label = node name), the readback."""

    upload_ms: float
    nodes: list[Timing]
    readback_ms: float

    @property
    def total_ms(self) -> float:
        return self.upload_ms + sum(t.ms for t in self.nodes) + self.readback_ms


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


@dataclass(frozen=True)
class _Step:
    node: Node
    ins: list[Tensor | None]
    outs: list[Tensor]
    emit: Emit


class Plan:
    """One model at one input shape on one device: recorded once, `run()` any number of times."""

    def __init__(self, device: Device, graph: Graph, weights: ConstantArena, input_shape: Sequence[int], *,
                 extra_outputs: Sequence[str] = (), hooks: StageHooks | None = None,
                 memory: SharedMemory | None = None, bindings: dict[str, Binding] | None = None,
                 layouts: LayoutCache | None = None) -> None:
        """`memory`: the regions this plan shares with the other plans of its model (reserved large enough here;
        a plan of its own when None); `bindings`: the model's memo of node bindings (see `_bind_steps`);
        `layouts`: the model's activation placements, reused where this shape fits."""
        started = time.perf_counter()
        self.device = device
        self.input_shape = tuple(int(d) for d in input_shape)
        self.spec = specialize_for(graph, self.input_shape)
        g = self.spec.graph
        self.input_name = g.inputs[0]
        self.output_names = [*g.outputs, *(n for n in extra_outputs if n not in g.outputs)]
        self.hooks = hooks
        self._check_graph()
        self.memory: MemoryPlan
        self.memory, upload, readback = memory_needs(self.spec, self.output_names, hooks, device.alignment,
                                                        layouts)
        self._check_binding_sizes()
        self._own_memory = memory is None
        self.shared = memory if memory is not None else SharedMemory(device)
        self._local: ConstantArena | None = None
        self._recorder: Recorder | None = None
        self._profiler: Recorder | None = None
        try:
            self.shared.reserve(self.memory.arena_bytes, upload, readback)
            self.generation = self.shared.generation
            self._weights, self._bindings = weights, bindings
            self._tensors: dict[str, Tensor] = {}
            self._steps: list[_Step] = []
            self._build_steps()
            self._upload: Allocation | None = None
            if hooks is None:
                self._upload, self._input_host = self._stage([self.input_name], "upload")[self.input_name]
            self._readback = self._stage(self.output_names, "readback") if readback else {}
            self._recorder, self._spans = self._record(profile=False)
            self._release_steps()
        except BaseException:
            self.close()
            raise
        self.dispatch_count = self._recorder.dispatch_count
        self.pipelines: set[str] = set(self._recorder.kernels)
        self.build_ms = (time.perf_counter() - started) * 1e3
        log.debug("plan_recorded", graph=graph.name, shape=self.input_shape, dispatches=self.dispatch_count,
                  arena_mib=round(self.arena_bytes / 2**20, 1), naive_mib=round(self.naive_bytes / 2**20, 1),
                  ms=round(self.build_ms, 2))

    # -- building ---------------------------------------------------------------------------------------------

    @property
    def arena_bytes(self) -> int:
        return self.memory.arena_bytes

    @property
    def naive_bytes(self) -> int:
        return self.memory.naive_bytes

    @property
    def memory_bytes(self) -> int:
        """Bytes this plan holds of its own: its recording (estimated) and local constants; the regions it
        shares with its model's other plans are the model's (and counted here only for a plan of its own)."""
        recording = self._recorder.host_bytes_estimate if self._recorder is not None else 0
        own = self.shared.nbytes if self._own_memory else 0
        return recording + self.local_constant_bytes + own

    @property
    def stale(self) -> bool:
        """True once the shared regions were replaced after this plan was recorded (it must not run)."""
        return self.generation != self.shared.generation

    @property
    def local_constant_bytes(self) -> int:
        """Constants this plan uploaded itself because the model's weight arena lacks them (per-shape folds)."""
        return self._local.nbytes if self._local is not None else 0

    def _check_graph(self) -> None:
        g = self.spec.graph
        for node in g.nodes:
            check_lowerable(node)
        for name in self.output_names:
            if name not in self.spec.shapes or name in g.constants:
                raise LoweringError(f"output {name} is not computed at runtime for input shape {self.input_shape}")

    def _check_binding_sizes(self) -> None:
        """Every value is bound whole by the dispatches that use it: one beyond the device's limit could not run."""
        limit, shapes = self.device.info.max_storage_buffer_range, self.spec.shapes
        if self.memory.naive_bytes <= limit:  # all values together fit: so does each (the common case, no loop)
            return
        for name in self.memory.offsets:
            nbytes = math.prod(shapes[name]) * FLOAT32.itemsize
            if nbytes > limit:
                raise BindingTooLarge(
                    f"input {self.input_shape}: {name} {tuple(shapes[name])} takes {nbytes / 2**20:.1f} MiB, more "
                    f"than this device binds ({limit / 2**20:.0f} MiB, maxStorageBufferRange)")

    def _build_steps(self) -> None:
        """Every value's tensor and every node's bindings: what a recording reads. Made for the recording, then
        released (`_release_steps`): a cached plan keeps its command buffer, not a Python object per value and
        per node for the cycle collector to walk on every full collection."""
        self._tensors = self._place_tensors(self.shared.region("device"))  # (_bind_steps reads them)
        self._steps = self._bind_steps(self._weights, self._bindings)

    def _release_steps(self) -> None:
        self._tensors, self._steps = {}, []

    def _place_tensors(self, arena: Allocation) -> dict[str, Tensor]:
        shapes = self.spec.shapes
        return {name: Tensor(arena.sub(offset, max(1, math.prod(shapes[name])) * FLOAT32.itemsize), shapes[name],
                             FLOAT32)
                for name, offset in self.memory.offsets.items()}

    def _bind_steps(self, weights: ConstantArena, memo: dict[str, Binding] | None) -> list[_Step]:
        """Every node's device tensors and host constants. Constants the model's weights lack (values folded
        for this shape only) are uploaded into a small arena of this plan. `memo` keeps, per node, what does
        not depend on the shape (its constants are the very arrays of an earlier plan), for the next plan."""
        g = self.spec.graph
        work: list[tuple[Node, list[np.ndarray | None], Binding | None, dict[str, np.ndarray]]] = []
        for node in g.nodes:
            values = [g.constants.get(name) if name else None for name in node.inputs]
            known = memo.get(node.name) if memo is not None else None
            if known is not None and len(known.values) == len(values) and all(
                    a is b for a, b in zip(known.values, values)):
                work.append((node, values, known, {}))
            else:
                work.append((node, values, None, device_constants(node, values)))
        missing = {k: a for _, _, _, needed in work for k, a in needed.items() if weights.lookup(k, a) is None}
        if missing and self._local is None:  # (a rebuild for profile() finds them uploaded)
            self._local = ConstantArena(self.device, missing)
        local = self._local

        def device_tensor(key: str, array: np.ndarray) -> Tensor:
            found = local.tensors[key] if local is not None and key in missing else weights.lookup(key, array)
            assert found is not None, key
            return found

        steps = []
        for node, values, known, needed in work:
            if known is None:
                known = self._binding(node, values, {k: device_tensor(k, a) for k, a in needed.items()})
                if memo is not None and not any(k in missing for k in needed):  # plan-local constants: not kept
                    memo[node.name] = known
            steps.append(self._step(node, known))
        return steps

    @staticmethod
    def _binding(node: Node, values: list[np.ndarray | None], constants: dict[str, Tensor]) -> Binding:
        host = host_inputs(node, values)
        require_host_constants(node, values, host)
        prefix = derived_key(node, "")
        derived = {k[len(prefix):]: t for k, t in constants.items() if k.startswith(prefix)} if constants else {}
        consts = NodeConstants(values, derived)
        static = [constants.get(name) if name and i not in host else None for i, name in enumerate(node.inputs)]
        return Binding(values, host, constants, consts, prepare(node, static, consts))

    def _step(self, node: Node, bound: Binding) -> _Step:
        tensors, host, constants = self._tensors, bound.host, bound.constants
        ins: list[Tensor | None] = [None if not name or i in host else tensors[name] if name in tensors
                                    else constants[name] for i, name in enumerate(node.inputs)]
        outs = [tensors[name] for name in node.outputs if name]
        return _Step(node, ins, outs, bound.emit)

    def _stage(self, names: Sequence[str], kind: str) -> dict[str, tuple[Allocation, np.ndarray]]:
        """Host-visible staging for these values in the shared `kind` region, and NumPy views of the mapping."""
        region, offset, staged = self.shared.region(kind), 0, {}
        alignment = self.device.alignment
        for name in names:
            tensor = self._tensors[name]
            alloc = region.sub(offset, tensor.nbytes)
            staged[name] = (alloc, alloc.array(np.float32, tensor.shape))
            offset += aligned(tensor.nbytes, alignment)
        return staged

    def _record(self, *, profile: bool) -> tuple[Recorder, list[tuple[str, int]]]:
        """One command buffer for the whole plan; the command count of the input step, every node, and the
        output step, in order (the profile splits timestamps by these counts)."""
        rec = Recorder(self.device, profile=profile)
        try:
            if self.hooks is None:
                assert self._upload is not None
                rec.copy(self._upload.view, self._tensors[self.input_name].view, label="upload")
            else:
                self.hooks.prologue(rec, self._tensors[self.input_name])
            spans = [("input", rec.command_count)]
            for step in self._steps:
                before = rec.command_count
                record_emit(rec, step.node, step.emit, step.ins, step.outs)
                spans.append((step.node.name, rec.command_count - before))
            if self.hooks is not None and self.hooks.epilogue is not None:
                self.hooks.epilogue(rec, {name: self._tensors[name] for name in self.output_names})
            for name, (alloc, _host) in self._readback.items():
                rec.copy(self._tensors[name].view, alloc.view, label="readback")
            rec.end()
        except BaseException:
            rec.close()
            raise
        return rec, spans

    # -- running ----------------------------------------------------------------------------------------------------

    def fill_arena(self, value: float) -> None:
        """Set every activation byte to `value` (tests poison with NaN, so an element no kernel writes shows)."""
        if self._recorder is None:
            raise EngineError("plan is closed")
        words = Tensor(self.shared.region("device"), (self.arena_bytes // FLOAT32.itemsize,), FLOAT32)
        self.device.write(words, np.full(words.shape, value, np.float32))

    def _replay(self, rec: Recorder, x: np.ndarray | None, timeout_s: float) -> None:
        if self._upload is not None:
            if x is None:
                raise InputError(f"input {self.input_name}: this plan takes its input from the host")
            x = check_input_array(x, self.input_shape, f"input {self.input_name}")
            np.copyto(self._input_host, x)
            self._upload.flush()
        elif x is not None:
            raise InputError(f"input {self.input_name}: this plan's prologue fills its input on the GPU")
        rec.submit()
        rec.wait(timeout_s)

    def run(self, x: np.ndarray | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S,
            copy: bool = True) -> dict[str, np.ndarray]:
        """The outputs for input `x` (float32, exactly this plan's shape; None when a prologue fills the input),
        each copied out of the mapping (none when the hooks read their own results). ``copy=False``: read-only
        views of the mapping instead, valid until this plan runs again (a caller that reads a few rows of a
        large map saves copying all of it)."""
        if self._recorder is None:
            raise EngineError("plan is closed")
        if self.stale:
            raise EngineError("plan recorded against memory its model has since replaced: make it again")
        self._replay(self._recorder, x, timeout_s)
        results = {}
        for name, (alloc, host) in self._readback.items():
            alloc.invalidate()
            if copy:
                results[name] = host.copy()
            else:
                view = host.view()
                view.flags.writeable = False
                results[name] = view
        return results

    def profile(self, x: np.ndarray | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> PlanProfile:
        """Per-node GPU time for input `x`, from a second, timestamped recording (made on first use)."""
        if self._recorder is None:
            raise EngineError("plan is closed")
        if self.stale:
            raise EngineError("plan recorded against memory its model has since replaced: make it again")
        if self._profiler is None:
            self._build_steps()
            try:
                self._profiler, _ = self._record(profile=True)
            finally:
                self._release_steps()
        if not self._profiler.profile:
            raise EngineError(f"{self.device.info.name} has no timestamp queries on its compute queue")
        self._replay(self._profiler, x, timeout_s)
        timings = self._profiler.timings()
        (_, n_input), node_spans = self._spans[0], self._spans[1:]
        nodes, i = [], n_input
        for name, count in node_spans:
            if count:
                nodes.append(Timing(name, sum(t.ms for t in timings[i:i + count])))
            i += count
        return PlanProfile(sum(t.ms for t in timings[:n_input]), nodes, sum(t.ms for t in timings[i:]))

    # -- lifetime -------------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Wait for any submission, then free the recordings and local constants (and the memory of a plan of
        its own)."""
        for rec in (self._recorder, self._profiler):
            if rec is not None:
                rec.close()
        self._recorder = self._profiler = None
        if self._local is not None:
            self._local.close()
            self._local = None
        if self._own_memory:
            self.shared.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NumpyPlan:
    """The explicit CPU fallback: the same interface as Plan, executed by the NumPy reference ops."""

    def __init__(self, graph: Graph, input_shape: Sequence[int], *, extra_outputs: Sequence[str] = ()) -> None:
        self.input_shape = tuple(int(d) for d in input_shape)
        self.spec = specialize_for(graph, self.input_shape)
        self.input_name = self.spec.graph.inputs[0]
        self.output_names = [*self.spec.graph.outputs, *(n for n in extra_outputs if n not in self.spec.graph.outputs)]
        self._extra = set(self.output_names)

    def run(self, x: np.ndarray) -> dict[str, np.ndarray]:
        x = check_input_array(x, self.input_shape, f"input {self.input_name}")
        values = run_numpy(self.spec, {self.input_name: x}, keep=self._extra.__contains__)
        return {name: values[name] for name in self.output_names}

    def close(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
