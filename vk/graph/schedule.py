"""The order a plan records its nodes in: independent branches side by side.

The recorder (vk/recorder.py) puts a barrier before a command only where it touches what an unbarriered earlier
one wrote or read, so commands that follow each other without depending on one another run together behind one
barrier. ONNX exporters list a model branch after branch: det's neck runs four lateral chains one after the
other, each of its dispatches behind a barrier, while the GPU sits mostly idle under each small one. Ordering
the nodes by their distance from the graph's outputs (as late as possible, the export's order among equals)
puts the branches' nodes of one depth next to each other, and holds each value no earlier than its consumers
need it, so the memory plan (vk/graph/memory_plan.py) grows less than an as-soon-as-possible order would.
"""

from __future__ import annotations

from vkocr.engine.graph.ir import Graph


def schedule_late(graph: Graph) -> Graph:
    """The same nodes, each as late as its consumers allow: sorted by (longest path to a graph output,
    descending; export position). Topological: a producer is always at least one step further from every
    output than each of its consumers."""
    g = graph.shallow_copy()
    consumers = g.consumers()
    height: dict[int, int] = {}  # per node (by id): the most nodes on a path from it to an output, itself out
    for node in reversed(g.nodes):  # consumers come later in a topological order: each is known before its producer
        height[id(node)] = max((height[id(c)] + 1 for out in node.outputs for c in consumers.get(out, ())),
                               default=0)
    position = {id(node): i for i, node in enumerate(g.nodes)}
    g.nodes = sorted(g.nodes, key=lambda n: (-height[id(n)], position[id(n)]))
    return g
