"""Graph passes, each a small named function from Graph to Graph (or Specialized to Specialized).

`optimize()` runs the passes that need no shapes, once per model; `finalize()` runs those that need the
shapes of one plan, after `specialize()`.
"""

from __future__ import annotations

from vk.graph.ir import Graph
from vk.graph.specialize import Specialized


def remove_dead(graph: Graph) -> Graph:
    """Drop nodes whose outputs no graph output depends on, and constants nothing reads."""
    g = graph.copy()
    needed = set(g.outputs)
    kept = []
    for node in reversed(g.nodes):
        if any(out in needed for out in node.outputs):
            kept.append(node)
            needed.update(name for name in node.inputs if name)
    g.nodes = kept[::-1]
    g.constants = {k: v for k, v in g.constants.items() if k in needed}
    return g


def optimize(graph: Graph) -> Graph:
    """Shape-independent passes, in order."""
    return remove_dead(graph)


def finalize(spec: Specialized) -> Specialized:
    """Passes that need this plan's shapes, in order."""
    return Specialized(remove_dead(spec.graph), spec.shapes)
