"""The recording order (vk/graph/schedule.py): independent branches side by side, every node as late as its
consumers allow, always topological; on PP-OCRv6's det, fewer barriers in the plan and no more memory."""

from __future__ import annotations

import pytest

from tests.engine.graph.test_ppocrv6 import DET, needs_models
from tests.engine.kernels.harness import fresh_rng
from vkocr.engine.commands import Barrier
from vkocr.engine.device import Device
from vkocr.engine.graph import passes
from vkocr.engine.graph.ir import Graph, Node
from vkocr.engine.graph.model import Model
from vkocr.engine.graph.schedule import schedule_late


def relu(name: str, src: str) -> Node:
    return Node("Relu", name, [src], [name])


def test_branches_run_side_by_side() -> None:
    """x → a1 → a2 → a3 and x → b1 → b2, joined by an Add: b's nodes move next to a's of the same depth."""
    nodes = [relu("a1", "x"), relu("a2", "a1"), relu("a3", "a2"), relu("b1", "x"), relu("b2", "b1"),
             Node("Add", "y", ["a3", "b2"], ["y"])]
    graph = Graph(nodes, ["x"], ["y"], {})
    scheduled = schedule_late(graph)
    assert [n.name for n in scheduled.nodes] == ["a1", "a2", "b1", "a3", "b2", "y"]
    assert [n.name for n in graph.nodes] == ["a1", "a2", "a3", "b1", "b2", "y"]  # the input is left alone


def heights(graph: Graph) -> dict[str, int]:
    """The longest path (in nodes) from each node to an output, by brute force over the consumers."""
    consumers = graph.consumers()
    memo: dict[str, int] = {}

    def height(node: Node) -> int:
        if node.name not in memo:
            memo[node.name] = max((height(c) + 1 for out in node.outputs for c in consumers.get(out, ())), default=0)
        return memo[node.name]

    return {n.name: height(n) for n in graph.nodes}


@pytest.mark.parametrize("size", [1, 5, 40, 200])
def test_random_graphs_stay_topological(size: int) -> None:
    rng, seed = fresh_rng()
    nodes = []
    for i in range(size):  # each node reads one to three earlier values (or the input)
        reads = sorted({f"v{j}" if j >= 0 else "x" for j in rng.integers(-1, i, rng.integers(1, 4))})
        nodes.append(Node("Sum", f"v{i}", reads, [f"v{i}"]))
    graph = Graph(nodes, ["x"], [f"v{size - 1}"], {})
    scheduled = schedule_late(graph).nodes
    assert sorted(n.name for n in scheduled) == sorted(n.name for n in nodes), seed
    made = {"x"}
    for node in scheduled:
        assert set(node.inputs) <= made, (seed, node)
        made.update(node.outputs)
    h = heights(graph)
    assert [h[n.name] for n in scheduled] == sorted(h.values(), reverse=True), seed
    # among nodes of one height, the export's order
    position = {n.name: i for i, n in enumerate(nodes)}
    for a, b in zip(scheduled, scheduled[1:]):
        if h[a.name] == h[b.name]:
            assert position[a.name] < position[b.name], seed


def barriers_and_arena(device: Device, shape: tuple[int, ...]) -> tuple[int, int]:
    model = Model.load(DET, device)
    try:
        plan = model.plan(shape)
        return sum(isinstance(op, Barrier) for op in model.commands_of(plan).ops), plan.arena_bytes
    finally:
        model.close()


@needs_models
def test_det_records_fewer_barriers(device: Device, monkeypatch: pytest.MonkeyPatch) -> None:
    """PP-OCRv6 det's four lateral chains and head: 122 barriers in the export's order, 100 scheduled late (at
    736×1024; this shape is smaller), in no more memory."""
    shape = (1, 3, 96, 160)
    late = barriers_and_arena(device, shape)
    monkeypatch.setattr(passes, "OPTIMIZE_PASSES", tuple(p for p in passes.OPTIMIZE_PASSES if p is not schedule_late))
    export = barriers_and_arena(device, shape)
    assert late[0] <= export[0] - 15, (late, export)
    assert late[1] <= export[1], (late, export)
