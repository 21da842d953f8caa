"""The order a plan records its nodes in: independent branches side by side.

The recorder (vk/recorder.py) puts a barrier before a command only where it touches what an unbarriered earlier
one wrote or read, so commands that follow each other without depending on one another run together behind one
barrier. ONNX exporters list a model branch after branch: det's neck runs four lateral chains one after the
other, each of its dispatches behind a barrier, while the GPU sits mostly idle under each small one. Ordering
the nodes by their distance from the graph's outputs (as late as possible, the export's order among equals)
puts the branches' nodes of one depth next to each other, and holds each value no earlier than its consumers
need it, so the memory plan (vk/graph/memory_plan.py) grows less than an as-soon-as-possible order would.

The memory plan must then not undo it: a value placed in the bytes of one that a node of the same barrier
group still reads (or wrote) makes the recorder put a barrier between them (WAR, WAW). `group_ends` gives, per
step, the end of its barrier group, to which plan_recipe.py's lifetimes stretch every value's last read.
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


def group_ends(graph: Graph) -> list[int]:
    """Per step of a plan (0: the upload, i: node i - 1, len(nodes) + 1: the readback), the last step of its
    barrier group: the run of nodes that read nothing another node of the run wrote, as the recorder groups
    their dispatches (a View writes nothing: its output is its input's bytes)."""
    ends = list(range(len(graph.nodes) + 2))
    written: set[str] = set()  # values written since the group began, and Views of them
    start = 1
    for step, node in enumerate(graph.nodes, start=1):
        reads_group = any(name in written for name in node.inputs)
        if node.op == "View":
            if reads_group:
                written.update(node.outputs)
            continue
        if reads_group:
            ends[start:step] = [step - 1] * (step - start)
            start, written = step, set()
        written.update(name for name in node.outputs if name)
    last = len(graph.nodes)
    ends[start:last + 1] = [last] * (last + 1 - start)
    return ends
