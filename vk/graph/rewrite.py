"""The rewriting machinery the graph passes share: use lists, rule sweeps, and small graph edits.

A rule `(graph, uses, node) -> bool` is tried on every node by `rewrite`; a rule that matches rewrites the
graph copy in place and raises nothing; `NoMatch` (through `need`) is how a rule gives up half-way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np

from vkocr.engine.errors import EngineError
from vkocr.engine.graph.ir import Graph, Node


class Uses:
    """Who produces and who reads each value of a graph (a snapshot: rebuilt after every rewrite)."""

    def __init__(self, graph: Graph) -> None:
        self.producers = graph.producers()
        self.consumers = graph.consumers()
        self.outputs = set(graph.outputs)

    def producer(self, name: str, *ops: str) -> Node | None:
        """The node computing `name`, if it is one of `ops` (any op when none given)."""
        node = self.producers.get(name)
        return node if node is not None and (not ops or node.op in ops) else None

    def private(self, name: str, *users: Node) -> bool:
        """True when `name` is no graph output and every read of it is by one of `users`: fusing those nodes
        cannot change anything else's input."""
        reads = self.consumers.get(name, [])
        return name not in self.outputs and bool(reads) and all(any(r is u for u in users) for r in reads)

    def sole_consumer(self, name: str) -> Node | None:
        """The one node reading `name` (exactly once), when `name` is private to it."""
        reads = self.consumers.get(name, [])
        return reads[0] if len(reads) == 1 and name not in self.outputs else None


Rule = Callable[[Graph, Uses, Node], bool]
T = TypeVar("T")


class NoMatch(EngineError):
    """Raised by a matcher deep in a pattern when the pattern does not hold; `try_rule` catches it as the rule
    not matching, so it never leaves the graph passes."""


def need(value: T | None) -> T:
    """`value`, or NoMatch when it is None or False (lets matchers read as a straight line)."""
    if value is None or value is False:
        raise NoMatch
    return value


def private_producer(uses: Uses, name: str, op: str, *users: Node) -> Node | None:
    """The `op` node computing `name`, when only `users` read `name`."""
    node = uses.producer(name, op)
    return node if node is not None and uses.private(name, *users) else None


def try_rule(rule: Rule, g: Graph, uses: Uses, node: Node) -> bool:
    try:
        return rule(g, uses, node)
    except NoMatch:
        return False


def rewrite(graph: Graph, rule: Rule) -> Graph:
    """Apply `rule` to a copy of `graph` until it matches nowhere: sweeps in node order, looking at the node
    in place again after a rewrite, until a sweep rewrites nothing."""
    g = graph.copy()
    changed = True
    while changed:
        changed, uses, i = False, Uses(g), 0
        while i < len(g.nodes):
            if try_rule(rule, g, uses, g.nodes[i]):
                changed, uses = True, Uses(g)
            else:
                i += 1
    return g


def drop_nodes(g: Graph, *nodes: Node) -> None:
    g.nodes = [n for n in g.nodes if not any(n is d for d in nodes)]


def replace_node(g: Graph, old: Node, new: Node) -> None:
    g.nodes = [new if n is old else n for n in g.nodes]


def fresh_name(g: Graph, base: str) -> str:
    """A constant/value name not used anywhere in `g`."""
    taken = set(g.constants) | set(g.inputs) | {v for n in g.nodes for v in (*n.inputs, *n.outputs)}
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    return name


def add_const(g: Graph, base: str, value: np.ndarray) -> str:
    name = fresh_name(g, base)
    g.constants[name] = value
    return name


def scalar_value(g: Graph, name: str) -> float | None:
    """The value of a one-element constant (0-d or any shape of size 1)."""
    value = g.constants.get(name)
    return float(value.reshape(-1)[0]) if value is not None and value.size == 1 else None


def is_scalar(g: Graph, name: str, expected: float, rtol: float = 1e-6) -> bool:
    value = scalar_value(g, name)
    return value is not None and abs(value - expected) <= rtol * abs(expected)


def operands(node: Node) -> list[tuple[str, str]]:
    """Both orders of a commutative binary node's operands."""
    a, b = node.inputs[:2]
    return [(a, b), (b, a)]


def constants_of(g: Graph, node: Node) -> list[np.ndarray | None] | None:
    """Values of a node's operands after the first; None when any present one is not a constant."""
    rest = node.inputs[1:]
    if any(name and name not in g.constants for name in rest):
        return None
    return [None, *(g.constants[name] if name else None for name in rest)]


def last_axis_vector(value: np.ndarray, n: int, max_rank: int) -> np.ndarray | None:
    """`value` as an (n,) vector when it broadcasts along the last axis only (shape (n,), (1, ..., n) or one
    element) without raising the rank beyond `max_rank`; None otherwise."""
    if value.ndim > max_rank:
        return None
    if value.size == 1:
        return np.full((n,), value.reshape(-1)[0], dtype=value.dtype)
    if value.shape[-1] != n or value.size != n:
        return None
    return value.reshape(n)
