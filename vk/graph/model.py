"""A loaded model: the optimised graph, its weights on the device (uploaded once), and an LRU cache of plans,
one per input shape, whose activations and staging share one set of regions (vk/graph/shared_memory.py). A new
shape's plan comes from the compiled function of its shape class (vk/graph/shape_classes.py), traced the first
time a shape of the class comes.

`Model.load(path, device)` runs on Vulkan; `Model.load(path, None)` is the explicit CPU fallback, the NumPy
executor (`model.backend` says which). One thread drives a model (the agent's GPU worker): the cache is not
locked. `model.on_stream(stream)` gives the same model for another stream of the device (vk/streams.py): it
shares the graph and the weights, and has its own plans, shared regions and shape classes, so that two threads
can run the model at once, each on its stream.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Self

import numpy as np
import onnx

from vkocr.engine.commands import Commands
from vkocr.engine.errors import InputError, ModelError
from vkocr.engine.graph import passes
from vkocr.engine.graph.constants import ConstantArena, constant_key
from vkocr.engine.graph.ir import Graph, Node
from vkocr.engine.graph.lower import check_lowerable, device_constants, host_inputs
from vkocr.engine.graph.memory_plan import LayoutCache
from vkocr.engine.graph.onnx_import import from_onnx, load_proto
from vkocr.engine.graph.plan import (
    Binding,
    NumpyPlan,
    Plan,
    StageHooks,
    check_float32,
    plan_needs,
    specialize_for,
)
from vkocr.engine.graph.plan_recipe import Recipe, describe
from vkocr.engine.graph.precision import FLOAT32, FP32, PrecisionPlan, output_producers
from vkocr.engine.graph.shape_classes import ShapeClasses
from vkocr.engine.graph.shared_memory import SharedMemory
from vkocr.engine.symbolic import Sym
from vkocr.log import get_logger

if TYPE_CHECKING:
    from vkocr.engine.device import Device
    from vkocr.engine.streams import Stream

log = get_logger(__name__)

CPU_BACKEND = "cpu (numpy)"
DEFAULT_PLAN_CACHE_SIZE = 1024  # plans per model; the byte bound below usually decides first
DEFAULT_PLAN_CACHE_BYTES = 256 << 20  # recordings and plan-local constants per model
MAX_BUILD_TIMES = 4096  # plan build times kept for statistics
MAX_SHAPES_SEEN = 1 << 16  # distinct input shapes counted for statistics; beyond, the count stops
ONNX_FLOAT = 1

PlanKey = tuple[tuple[int, ...], tuple[str, ...], StageHooks | None]  # input shape, extra outputs, hooks


@dataclass(frozen=True)
class InputSpec:
    """What the model file declares about its input: each dimension (None where dynamic) and the element type."""

    name: str
    dims: tuple[int | None, ...] | None  # None: not declared (a Graph built in code)
    float32: bool = True

    def check_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        shape = tuple(int(d) for d in shape)
        if any(d < 1 for d in shape):
            raise InputError(f"input {self.name}: dimensions must be positive, got {shape}")
        if self.dims is None:
            return shape
        expected = "(" + ", ".join("?" if d is None else str(d) for d in self.dims) + ")"
        if len(shape) != len(self.dims):
            raise InputError(f"input {self.name}: expected rank {len(self.dims)} {expected}, got shape {shape}")
        for axis, (want, got) in enumerate(zip(self.dims, shape)):
            if want is not None and want != got:
                raise InputError(f"input {self.name}: dimension {axis} must be {want} {expected}, got shape {shape}")
        return shape


def declared_input(model: onnx.ModelProto, name: str) -> InputSpec:
    for value in model.graph.input:
        if value.name == name:
            tensor = value.type.tensor_type
            dims = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                         for d in tensor.shape.dim)
            return InputSpec(name, dims if tensor.HasField("shape") else None, tensor.elem_type == ONNX_FLOAT)
    return InputSpec(name, None)


def read_model(source: str | Path | onnx.ModelProto | Graph, name: str | None = None) -> tuple[Graph, InputSpec | None]:
    """The IR and, for ONNX sources, the declared input; `name` names the graph (default: the file's name)."""
    if isinstance(source, Graph):
        return source, None
    if isinstance(source, onnx.ModelProto):
        proto, name = source, name or source.graph.name
    else:
        proto, name = load_proto(source), name or Path(source).name
    graph = from_onnx(proto, name=name)
    return graph, declared_input(proto, graph.inputs[0]) if len(graph.inputs) == 1 else None


def runtime_nodes(graph: Graph) -> list[Node]:
    """Nodes that touch input data for every input shape; Shape ends that chain (its output is per-shape
    metadata, folded when a plan is specialised)."""
    live = set(graph.inputs)
    nodes = []
    for node in graph.nodes:
        if node.op != "Shape" and any(name in live for name in node.inputs):
            nodes.append(node)
            live.update(name for name in node.outputs if name)
    return nodes


def load_time_constants(graph: Graph, nodes: Sequence[Node]) -> dict[str, np.ndarray]:
    """Every device constant these nodes need that is known without an input shape (all of them, for models
    whose shape subgraphs feed only host inputs), by arena key, in the precision each node stores (the
    producers of the graph's outputs store fp32 whatever the plan says: vk/graph/precision.py)."""
    arrays: dict[str, np.ndarray] = {}
    plan = graph.precision
    fp32 = output_producers(graph, graph.outputs) if plan is not None and plan.mixed else set()
    for node in nodes:
        values = [graph.constants.get(name) if name else None for name in node.inputs]
        host = host_inputs(node, values)
        if any(i < len(values) and node.inputs[i] and values[i] is None for i in host):
            continue  # steered by a per-shape value: its plan decides
        dtype = FLOAT32 if plan is None or node.name in fp32 else plan.dtype(node)
        arrays.update({constant_key(k, a): a for k, a in device_constants(node, values, dtype).items()})
    return arrays


class Model:
    """An optimised graph plus, on Vulkan, its weight arena; plans are made on demand and cached by shape."""

    def __init__(self, graph: Graph, device: Device | None, *, input_spec: InputSpec | None = None,
                 plan_cache_size: int = DEFAULT_PLAN_CACHE_SIZE,
                 plan_cache_bytes: int = DEFAULT_PLAN_CACHE_BYTES, shape_classes: bool = True,
                 precision: PrecisionPlan = FP32, stream: Stream | None = None,
                 _weights_of: Model | None = None) -> None:
        """`plan_cache_size` and `plan_cache_bytes` bound the cache by count and by the memory the plans hold
        of their own (recordings and plan-local constants; the shared regions are the model's);
        `shape_classes`: a new shape's plan comes from the compiled function of its shape class
        (vk/graph/shape_classes.py); False works every shape's plan out in full (for comparisons);
        `precision`: the storage precision of each node (vk/graph/precision.py; fp16 needs a device with
        16-bit storage, and is ignored by the CPU backend, which computes in float32); `stream`: where its
        plans record and run (the device's default when None)."""
        if len(graph.inputs) != 1:
            raise ModelError(f"model {graph.name} has inputs {graph.inputs}: vkocr plans take exactly one")
        if plan_cache_size < 1:
            raise ValueError(f"plan_cache_size must be ≥ 1, got {plan_cache_size}")
        if plan_cache_bytes < 1:
            raise ValueError(f"plan_cache_bytes must be ≥ 1, got {plan_cache_bytes}")
        if precision.mixed and device is not None and not device.info.fp16_storage:
            raise ModelError(f"precision {precision.default}: {device.info.name} has no 16-bit storage "
                             "(storageBuffer16BitAccess); use fp32")
        self.device = device
        self.stream = stream
        self.graph = replace(passes.optimize(graph), precision=precision) if _weights_of is None else graph
        self.input = input_spec or InputSpec(graph.inputs[0], None)
        if not self.input.float32:
            raise ModelError(f"model {graph.name}: input {self.input.name} is not float32")
        self.output = self.graph.outputs[0]
        self.plan_cache_size = plan_cache_size
        self.plan_cache_bytes = plan_cache_bytes
        self.shared = SharedMemory(device) if device is not None else None
        self.recordings = 0  # plans built (on Vulkan: recorded); a cache hit builds nothing
        self.build_ms: deque[float] = deque(maxlen=MAX_BUILD_TIMES)  # host ms of the latest plans built, in order
        # how each of those was made: "class" (a traced shape class's function), "traced" (it traced a new class)
        # or "full" (worked out in full: classes off, or the model cannot be traced)
        self.build_kinds: deque[str] = deque(maxlen=MAX_BUILD_TIMES)
        self.shapes_seen: set[tuple[int, ...]] = set()  # input shapes planned so far (the first MAX_SHAPES_SEEN)
        self._plans: OrderedDict[PlanKey, Plan | NumpyPlan] = OrderedDict()
        # each cached plan's own bytes, fixed once it is recorded, and their sum: the cache checks its bound on
        # every new plan, and summing over hundreds of plans each time cost 0.2 ms of it
        self._plan_bytes: dict[PlanKey, int] = {}
        self._own_total = 0
        self._weights: ConstantArena | None = None
        self._generation = 0
        self._bindings: dict[str, Binding] = {}  # per node, what every plan binds alike (Plan._bind_steps)
        self._layouts = LayoutCache()  # activation placements the plans of other shapes reuse
        self.shape_classes = ShapeClasses() if shape_classes else None
        self._owns_weights = _weights_of is None
        if _weights_of is not None:  # a sibling on another stream: the same weights and node bindings
            self._weights, self._bindings = _weights_of._weights, _weights_of._bindings
            return
        if device is not None:
            nodes = runtime_nodes(self.graph)
            for node in nodes:
                check_lowerable(node)  # an op without a Vulkan lowering fails here, naming node and op
            self._weights = ConstantArena(device, load_time_constants(self.graph, nodes))
        log.info("model_loaded", model=self.graph.name, backend=self.backend, nodes=len(self.graph.nodes),
                 weight_mib=round(self.weight_bytes / 2**20, 2))

    def on_stream(self, stream: Stream) -> Model:
        """This model for `stream` of its device: the same graph and weights (uploaded once), plans, shared
        regions and shape classes of its own. Close it before this one (which owns the weights)."""
        if self.device is None or stream.device is not self.device:
            raise ModelError("a stream of the model's own device is needed (the CPU backend has none)")
        return Model(self.graph, self.device, input_spec=self.input, plan_cache_size=self.plan_cache_size,
                     plan_cache_bytes=self.plan_cache_bytes, shape_classes=self.shape_classes is not None,
                     precision=self.precision, stream=stream, _weights_of=self)

    @classmethod
    def load(cls, source: str | Path | onnx.ModelProto | Graph, device: Device | None, *,
             plan_cache_size: int = DEFAULT_PLAN_CACHE_SIZE, plan_cache_bytes: int = DEFAULT_PLAN_CACHE_BYTES,
             shape_classes: bool = True, precision: PrecisionPlan = FP32) -> Model:
        """Import (ONNX file, ModelProto or IR graph), optimise once and, on a device, upload the weights."""
        graph, spec = read_model(source)
        return cls(graph, device, input_spec=spec, plan_cache_size=plan_cache_size,
                   plan_cache_bytes=plan_cache_bytes, shape_classes=shape_classes, precision=precision)

    @property
    def precision(self) -> PrecisionPlan:
        """Each node's storage precision (the graph carries it, so every plan and sibling sees the same)."""
        return self.graph.precision or FP32

    @property
    def backend(self) -> str:
        return CPU_BACKEND if self.device is None else f"vulkan ({self.device.info.name})"

    @property
    def weight_bytes(self) -> int:
        """Bytes of constants uploaded to the device at load (0 on the CPU backend)."""
        return self._weights.nbytes if self._weights is not None else 0

    @property
    def plan_count(self) -> int:
        """Plans in the cache now."""
        return len(self._plans)

    @property
    def plan_memory_bytes(self) -> int:
        """Memory of the cached plans: the shared regions (activations, staging) and what each plan holds of
        its own (recordings, estimated, and plan-local constants)."""
        shared = self.shared.nbytes if self.shared is not None else 0
        return shared + self._own_total

    def _keep(self, key: PlanKey, plan: Plan | NumpyPlan) -> None:
        self._plans[key] = plan
        self._plan_bytes[key] = own = getattr(plan, "memory_bytes", 0)
        self._own_total += own

    def _close_plan(self, key: PlanKey) -> None:
        self._own_total -= self._plan_bytes.pop(key)
        self._plans.pop(key).close()

    @property
    def layouts_reused(self) -> int:
        """Plans whose activations took an earlier, larger shape's placement instead of a new one."""
        return self._layouts.reused

    @property
    def cached_shapes(self) -> list[tuple[int, ...]]:
        """Input shapes of the cached plans, least recently used first."""
        return [shape for shape, _extras, _hooks in self._plans]

    def plan(self, input_shape: Sequence[int], *, extra_outputs: Sequence[str] = (),
             hooks: StageHooks | None = None) -> Plan | NumpyPlan:
        """The plan for this input shape (and extra values to read back, and GPU work around the network),
        recorded on first use."""
        shape = self.input.check_shape(input_shape)
        key = (shape, tuple(extra_outputs), hooks)
        cached = self._plans.get(key)
        if cached is not None:
            if not (isinstance(cached, Plan) and cached.stale):
                self._plans.move_to_end(key)
                return cached
            self._close_plan(key)  # recorded against memory since replaced: recorded again below
        started = time.perf_counter()
        traced = self.shape_classes.traced if self.shape_classes is not None else 0
        try:
            plan, kind = self._build(shape, extra_outputs, hooks)
        except BaseException:
            self._drop_stale()  # a build that failed after growing the shared memory leaves the others stale
            raise
        self.build_ms.append((time.perf_counter() - started) * 1e3)
        self.build_kinds.append("traced" if self.shape_classes is not None and self.shape_classes.traced > traced
                                else kind)
        if len(self.shapes_seen) < MAX_SHAPES_SEEN:  # a long-running agent meets new shapes forever
            self.shapes_seen.add(shape)
        self.recordings += 1
        if isinstance(plan, Plan) and plan.generation != self._generation:
            self._drop_stale()  # the shared regions grew for this plan: every plan before it names freed buffers
            self._generation = plan.generation
        self._keep(key, plan)
        while len(self._plans) > 1 and (len(self._plans) > self.plan_cache_size
                                        or self._own_total > self.plan_cache_bytes):
            self._close_plan(next(iter(self._plans)))  # the least recently used
        return plan

    def reserve(self, input_shape: Sequence[int], *, extra_outputs: Sequence[str] = (),
                hooks: StageHooks | None = None) -> None:
        """Grow the shared memory now to what a plan for this shape would use, recording nothing (a warm-up
        sizes it for the largest input once instead of on the request that brings it). No-op on the CPU."""
        if self.shared is None or self.device is None:
            return
        shape = self.input.check_shape(input_shape)
        needs = plan_needs(self.graph, shape, self.device.alignment, extra_outputs=extra_outputs, hooks=hooks)
        if self.shared.reserve(*needs):
            self._drop_stale()
            self._generation = self.shared.generation

    def _drop_stale(self) -> None:
        for key in [k for k, p in self._plans.items() if isinstance(p, Plan) and p.stale]:
            self._close_plan(key)

    def _build(self, shape: tuple[int, ...], extra_outputs: Sequence[str], hooks: StageHooks | None
               ) -> tuple[Plan | NumpyPlan, str]:
        """The plan, and "class" when a shape class's function gave its recipe, else "full"."""
        if self.device is None:
            if hooks is not None:
                raise ModelError("stage hooks record GPU work: the CPU backend has none")
            return NumpyPlan(self.graph, shape, extra_outputs=extra_outputs), "full"
        assert self._weights is not None and self.shared is not None
        recipe = self._class_recipe(shape, extra_outputs, hooks)
        plan = Plan(self.device, self.graph, self._weights, shape, extra_outputs=extra_outputs, hooks=hooks,
                    memory=self.shared, bindings=self._bindings, layouts=self._layouts, recipe=recipe,
                    stream=self.stream)
        return plan, "full" if recipe is None else "class"

    def _class_recipe(self, shape: tuple[int, ...], extra_outputs: Sequence[str], hooks: StageHooks | None
                      ) -> Recipe | None:
        """This shape's recipe from its shape class (traced now if no kept class holds it); None without
        classes."""
        if self.shape_classes is None or self.device is None:
            return None
        assert self._weights is not None and self.shared is not None
        device, weights, shared = self.device, self._weights, self.shared

        def traced(dims: Sequence[Sym]) -> Recipe:
            return describe(device, self.graph, weights, dims, shared=shared, extra_outputs=extra_outputs,
                            hooks=hooks, bindings=self._bindings, layouts=self._layouts)[0]

        return self.shape_classes.recipe((tuple(extra_outputs), hooks), shape, lambda: shared.generation, traced)

    def commands_of(self, plan: Plan) -> Commands:
        """The commands `plan` (this model's, current) recorded, again from its shape class: a plan drops its own
        once encoded (hundreds of plans' records would burden the collector). For joint runs (vk/graph/joint.py)."""
        if plan.shared is not self.shared or plan.stale:
            raise ModelError("commands of a current plan of this model only")
        recipe = self._class_recipe(plan.input_shape, plan.extra_outputs, plan.hooks)
        if recipe is None or recipe.arena_bytes != plan.arena_bytes or self.shared.generation != plan.generation:
            raise ModelError("no shape class gives this plan's recipe (this model keeps none, or one traced anew)")
        return recipe.commands

    def learn_shape_class(self, input_shape: Sequence[int], *, extra_outputs: Sequence[str] = (),
                          hooks: StageHooks | None = None) -> bool:
        """Trace the shape class of this input shape unless a kept class holds it already, recording no plan
        (a warm-up learns the classes of the shapes traffic will bring: then each new shape costs one function
        call and a recording). True when a class was traced; False without classes too."""
        if self.shape_classes is None or self.device is None:
            return False
        before = self.shape_classes.traced
        self._class_recipe(self.input.check_shape(input_shape), extra_outputs, hooks)
        if self.shared is not None and self.shared.generation != self._generation:
            self._drop_stale()  # the trace grew the shared memory
            self._generation = self.shared.generation
        return self.shape_classes.traced > before

    def output_shape(self, input_shape: Sequence[int]) -> tuple[int, ...]:
        """The (first) output's shape for this input shape (shape inference only: nothing is recorded)."""
        return tuple(specialize_for(self.graph, self.input.check_shape(input_shape), precision=False)
                     .shape(self.output))

    def run(self, x: np.ndarray) -> np.ndarray:
        """The model's (first) output for input `x`: float32, of the model's rank and fixed dimensions."""
        check_float32(x, f"input {self.input.name}")
        return self.plan(x.shape).run(x)[self.output]

    def close(self) -> None:
        """Free every plan and the weights."""
        while self._plans:
            self._close_plan(next(reversed(self._plans)))
        if self._weights is not None and self._owns_weights:
            self._weights.close()
            self._bindings.clear()
        self._weights = None
        self._bindings = {}
        self._layouts.clear()
        if self.shape_classes is not None:
            self.shape_classes.clear()
        if self.shared is not None:
            self.shared.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
