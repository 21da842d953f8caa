"""A plan: one model compiled for one input shape, recorded once and replayed for every request.

A plan is made from its Recipe (vk/graph/plan_recipe.py: placement, staging and commands, worked out by
`describe()` or, for a shape of a known class, by that class's compiled program: vk/graph/shape_classes.py). It
reserves the regions it shares with the other plans of its model (vk/graph/shared_memory.py) and records ONE
command buffer: upload staging → input tensor, every node's dispatches, outputs → readback staging. `run()` then
only copies the input into mapped memory, submits, waits and copies the outputs out. A plan is made on the
request path whenever a new shape arrives, so making it is kept to arithmetic and recording.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Self

import numpy as np

from vkocr.engine.errors import EngineError
from vkocr.engine.errors import InputError as InputError  # re-exported: importable from here too
from vkocr.engine.graph.constants import ConstantArena
from vkocr.engine.graph.ir import Graph
from vkocr.engine.graph.memory_plan import LayoutCache, MemoryPlan
from vkocr.engine.graph.numpy_executor import run_numpy
from vkocr.engine.graph.plan_recipe import Binding as Binding  # re-exported, as are the helpers below
from vkocr.engine.graph.plan_recipe import Recipe, describe
from vkocr.engine.graph.plan_recipe import StageHooks as StageHooks
from vkocr.engine.graph.plan_recipe import lifetimes as lifetimes
from vkocr.engine.graph.plan_recipe import memory_needs as memory_needs
from vkocr.engine.graph.plan_recipe import plan_needs as plan_needs
from vkocr.engine.graph.plan_recipe import specialize_for as specialize_for
from vkocr.engine.graph.plan_recipe import view_sources as view_sources
from vkocr.engine.graph.shared_memory import SharedMemory
from vkocr.engine.graph.specialize import Specialized
from vkocr.engine.memory import Allocation
from vkocr.engine.recorder import Recorder, Timing
from vkocr.engine.tensor import Tensor
from vkocr.log import get_logger

if TYPE_CHECKING:
    from vkocr.engine.device import Device
    from vkocr.engine.streams import Stream

log = get_logger(__name__)

FLOAT32 = np.dtype(np.float32)
DEFAULT_TIMEOUT_S = 300.0  # a det plan on a CPU driver (lavapipe) takes tens of seconds


def check_float32(x: object, what: str) -> np.ndarray:
    """`x` itself when it is a float32 NumPy array; InputError otherwise (never a silent conversion)."""
    if not isinstance(x, np.ndarray):
        raise InputError(f"{what}: expected a numpy array, got {type(x).__name__}")
    if x.dtype != FLOAT32:
        raise InputError(f"{what}: expected float32, got {x.dtype}")
    return x


def check_input_array(x: object, shape: tuple[int, ...], what: str) -> np.ndarray:
    """`x` itself when it is a float32 array of exactly `shape`; InputError otherwise."""
    arr = check_float32(x, what)
    if tuple(arr.shape) != tuple(shape):
        raise InputError(f"{what}: expected shape {tuple(shape)}, got {tuple(arr.shape)}")
    return arr


# -- recording -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanProfile:
    """GPU time of one replay: the input upload, every node that dispatched (label = node name), the readback;
    and the kernels each node's commands ran (their labels: which kernel a rule chose, per device)."""

    upload_ms: float
    nodes: list[Timing]
    readback_ms: float
    node_kernels: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def total_ms(self) -> float:
        return self.upload_ms + sum(t.ms for t in self.nodes) + self.readback_ms


class Plan:
    """One model at one input shape on one device: recorded once, `run()` any number of times."""

    def __init__(self, device: Device, graph: Graph, weights: ConstantArena, input_shape: Sequence[int], *,
                 extra_outputs: Sequence[str] = (), hooks: StageHooks | None = None,
                 memory: SharedMemory | None = None, bindings: dict[str, Binding] | None = None,
                 layouts: LayoutCache | None = None, recipe: Recipe | None = None, stream: Stream | None = None
                 ) -> None:
        """`memory`: the regions this plan shares with the other plans of its model (reserved large enough here;
        a plan of its own when None); `bindings`: the model's memo of node bindings; `layouts`: the model's
        activation placements, reused where this shape fits; `recipe`: this shape's, worked out already (by a
        shape class's program), else described here; `stream`: where it records and runs (the device's default
        when None)."""
        started = time.perf_counter()
        self.device = device
        self.stream = stream
        self.hooks = hooks
        self._graph, self._weights, self._bindings, self._layouts = graph, weights, bindings, layouts
        self._extra_outputs = tuple(extra_outputs)
        self._own_memory = memory is None
        self.shared = memory if memory is not None else SharedMemory(device)
        self._local: ConstantArena | None = None
        self._recorder: Recorder | None = None
        self._profiler: Recorder | None = None
        self._spec: Specialized | None = None
        try:
            if recipe is None:
                recipe, self._local = describe(device, graph, weights, input_shape, shared=self.shared,
                                               extra_outputs=extra_outputs, hooks=hooks, bindings=bindings,
                                               layouts=layouts)
            self._realize(recipe)
        except BaseException:
            self.close()
            raise
        self.build_ms = (time.perf_counter() - started) * 1e3
        log.debug("plan_recorded", graph=graph.name, shape=self.input_shape, dispatches=self.dispatch_count,
                  arena_mib=round(self.arena_bytes / 2**20, 1), naive_mib=round(self.naive_bytes / 2**20, 1),
                  ms=round(self.build_ms, 2))

    def _realize(self, recipe: Recipe) -> None:
        """Reserve the regions, map the staging, and record the recipe's commands."""
        self.input_shape = recipe.input_shape
        self.input_name = self._graph.inputs[0]
        self.output_names = recipe.output_names
        self.output_shapes = dict(zip(recipe.output_names, recipe.output_shapes))
        self.memory = MemoryPlan(recipe.offsets, recipe.arena_bytes, recipe.naive_bytes, self.device.alignment)
        if self.shared.reserve(recipe.arena_bytes, recipe.upload_bytes, recipe.readback_bytes):
            raise EngineError("the shared memory grew after this plan's recipe was made (its commands name the "
                              "regions before): make the recipe again")
        self.generation = self.shared.generation
        self._spans = recipe.spans
        self._upload: Allocation | None = None
        if recipe.upload is not None:
            self._upload = self.shared.region("upload").sub(*recipe.upload)
            self._input_host = self._upload.array(np.float32, self.input_shape)
        readback = self.shared.region("readback") if recipe.readback else None
        self._readback: dict[str, tuple[Allocation, np.ndarray]] = {}
        for name, shape, placed in zip(recipe.output_names, recipe.output_shapes, recipe.readback):
            assert readback is not None
            alloc = readback.sub(*placed)
            self._readback[name] = (alloc, alloc.array(np.float32, shape))
        self._recorder = Recorder(self.device, stream=self.stream)
        self._recorder.end_with(recipe.commands)
        self.dispatch_count = self._recorder.dispatch_count
        self.pipelines: set[str] = set(self._recorder.kernels)

    # -- building ---------------------------------------------------------------------------------------------

    @property
    def spec(self) -> Specialized:
        """The graph specialised for this plan's shape (worked out again on first use: a plan made by a shape
        class's program never needed it)."""
        if self._spec is None:
            self._spec = specialize_for(self._graph, self.input_shape, self._extra_outputs)
        return self._spec

    @property
    def has_host_io(self) -> bool:
        """Whether the input comes from the host or outputs go back to it (not only through the hooks)."""
        return self._upload is not None or bool(self._readback)

    @property
    def extra_outputs(self) -> tuple[str, ...]:
        """The values read back besides the graph's outputs."""
        return self._extra_outputs

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

    # -- running ----------------------------------------------------------------------------------------------------

    def fill_arena(self, value: float) -> None:
        """Set every activation byte to `value` (tests poison with NaN, so an element no kernel writes shows)."""
        if self._recorder is None:
            raise EngineError("plan is closed")
        words = Tensor(self.shared.region("device"), (self.arena_bytes // FLOAT32.itemsize,), FLOAT32)
        fill = np.full(words.shape, value, np.float32)
        if np.isnan(value):  # a NaN as float32 and in both float16 halves, whatever precision a value stores
            fill.view(np.uint32)[:] = 0x7FC07FC0
        self.device.write(words, fill)

    def _start(self, rec: Recorder, x: np.ndarray | None) -> None:
        self.stage(x)
        rec.submit()

    def stage(self, x: np.ndarray | None) -> None:
        """Write input `x` (as `run` takes it) into this plan's staging without running anything (a recording of
        several plans at once runs it)."""
        if self._upload is not None:
            if x is None:
                raise InputError(f"input {self.input_name}: this plan takes its input from the host")
            x = check_input_array(x, self.input_shape, f"input {self.input_name}")
            np.copyto(self._input_host, x)
            self._upload.flush()
        elif x is not None:
            raise InputError(f"input {self.input_name}: this plan's prologue fills its input on the GPU")

    def _replay(self, rec: Recorder, x: np.ndarray | None, timeout_s: float) -> None:
        self._start(rec, x)
        rec.wait(timeout_s)

    def _live(self) -> Recorder:
        if self._recorder is None:
            raise EngineError("plan is closed")
        if self.stale:
            raise EngineError("plan recorded against memory its model has since replaced: make it again")
        return self._recorder

    def submit(self, x: np.ndarray | None = None) -> None:
        """Start a replay for input `x` (as `run` takes it) without waiting: several plans of different models,
        or of one model on different streams, can then run at once; `wait()` before reading their outputs."""
        self._start(self._live(), x)

    def wait(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Wait for the replay `submit()` started (nothing to wait for: returns at once)."""
        if self._recorder is not None:
            self._recorder.wait(timeout_s)

    def run(self, x: np.ndarray | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S,
            copy: bool = True) -> dict[str, np.ndarray]:
        """The outputs for input `x` (float32, exactly this plan's shape; None when a prologue fills the input),
        each copied out of the mapping (none when the hooks read their own results). ``copy=False``: read-only
        views of the mapping instead, valid until this plan runs again (a caller that reads a few rows of a
        large map saves copying all of it)."""
        self._replay(self._live(), x, timeout_s)
        return self.outputs(copy=copy)

    def outputs(self, *, copy: bool = True) -> dict[str, np.ndarray]:
        """The outputs of the last finished replay (see `run`)."""
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
            recipe, _ = describe(self.device, self._graph, self._weights, self.input_shape, shared=self.shared,
                                 extra_outputs=self._extra_outputs, hooks=self.hooks, bindings=self._bindings,
                                 layouts=self._layouts, local=self._local, profile=True)
            if self.stale:
                raise EngineError("the shared memory grew while this plan was profiled: make it again")
            self._profiler = Recorder(self.device, profile=True, stream=self.stream)
            if self._profiler.profile:
                self._profiler.end_with(recipe.commands)
        if not self._profiler.profile:
            raise EngineError(f"{self.device.info.name} has no timestamp queries on its compute queue")
        self._replay(self._profiler, x, timeout_s)
        timings = self._profiler.timings()
        (_, n_input), node_spans = self._spans[0], self._spans[1:]
        nodes, kernels, i = [], {}, n_input
        for name, count in node_spans:
            if count:
                nodes.append(Timing(name, sum(t.ms for t in timings[i:i + count])))
                kernels[name] = tuple(t.label for t in timings[i:i + count])
            i += count
        return PlanProfile(sum(t.ms for t in timings[:n_input]), nodes, sum(t.ms for t in timings[i:]), kernels)

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
        self.spec = specialize_for(graph, self.input_shape, precision=False)
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
