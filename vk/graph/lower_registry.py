"""The lowering registry: each op type's `Rule` (how to record it, which inputs it reads on the host, the device
constants it derives, its once-per-node `prepare`), registered with `@lowers` where the rule is defined, and
the small helpers every rule uses (operands, views, the fused activation). The rules live in the lower_*
modules; take `RULES` from vk/graph/lower.py, which imports them all (from here it may still be incomplete).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from vkocr.engine.errors import KernelArgumentError, LoweringError
from vkocr.engine.graph.ir import Node
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

STORAGE_CAST = "StorageCast"  # fp32 ↔ fp16 where a plan's precisions meet (vk/graph/precision.py)


@dataclass(frozen=True)
class NodeConstants:
    """What a node reads besides its device tensors: the host value of each constant input (None for runtime
    values and absent inputs), and the device constants derived from its parameters, by short name."""

    values: Sequence[np.ndarray | None]
    derived: Mapping[str, Tensor] = field(default_factory=dict)


Values = Sequence[np.ndarray | None]
Record = Callable[[Recorder, Node, list[Tensor | None], list[Tensor], NodeConstants], None]
Emit = Callable[[Recorder, list[Tensor | None], list[Tensor]], None]  # one node's recording, for any input shape
# a rule's once-per-node work, from the node's constant device tensors (None where an input is a runtime value);
# None: the node needs its input shapes for that, so it records from scratch every time
Prepare = Callable[[Node, list[Tensor | None], NodeConstants], Emit | None]
HostInputs = Callable[[Node, Values], frozenset[int]]
Derive = Callable[[Node, Values], dict[str, np.ndarray]]


def no_host_inputs(node: Node, values: Values) -> frozenset[int]:
    return frozenset()


def all_but_first(node: Node, values: Values) -> frozenset[int]:
    return frozenset(range(1, len(node.inputs)))


@dataclass(frozen=True)
class Rule:
    record: Record
    host_inputs: HostInputs = no_host_inputs
    derive: Derive | None = None
    prepare: Prepare | None = None


RULES: dict[str, Rule] = {}


def lowers(*ops: str, host_inputs: HostInputs = no_host_inputs, derive: Derive | None = None,
           prepare: Prepare | None = None) -> Callable[[Record], Record]:
    """Register `record` as the lowering of these op types."""

    def register(record: Record) -> Record:
        for name in ops:
            RULES[name] = Rule(record, host_inputs, derive, prepare)
        return record

    return register


def fail(node: Node, reason: str) -> LoweringError:
    return LoweringError(f"node {node.name} ({node.op}): {reason}")


def operand(node: Node, ins: list[Tensor | None], i: int) -> Tensor:
    t = ins[i] if i < len(ins) else None
    if t is None:
        raise fail(node, f"input {i} must be a device tensor")
    return t


def optional(ins: list[Tensor | None], i: int) -> Tensor | None:
    return ins[i] if i < len(ins) else None


def reshaped(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """The same bytes with another (equal-size) shape: free, no copy."""
    if math.prod(shape) != t.numel:
        raise KernelArgumentError(f"cannot view {t.shape} as {shape}")
    return Tensor(t.alloc, shape, t.dtype)


def activation(node: Node) -> tuple[str, float, float]:
    """The activation a pass fused into this node: (kind, alpha, beta)."""
    a = node.attrs
    return str(a.get("activation", "none")), float(a.get("act_alpha", 0.0)), float(a.get("act_beta", 0.0))


def scalar(value: np.ndarray | None) -> float | None:
    """The number in a one-element constant (float or integer), else None."""
    if value is None or np.size(value) != 1 or np.asarray(value).dtype.kind not in "fiu":
        return None
    return float(np.asarray(value).reshape(-1)[0])
