"""Liveness-based placement of a plan's activations in one arena: values whose lifetimes do not overlap share
bytes.

Each value is live over the closed step interval [first, last] (written at `first`, last read at `last`), so a
node's output never shares bytes with its own inputs. A view (Reshape, Squeeze, …) owns no bytes: it sits at its
source's offset, and its source stays live until the view's last use.

Placement is the greedy-by-size heuristic (TFLite's and others'): largest values first, each at the lowest
aligned offset where it overlaps no already placed value that is live at the same time. Pure Python, no Vulkan.

A model's plans at different shapes have the same values and lifetimes, only other sizes: `LayoutCache` reuses
the placement of an earlier, larger shape when every value of the new one fits in the bytes it had there (the
same offsets then overlap nothing live at the same time), so a new shape mostly costs a size check, not a
placement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from vkocr.engine.symbolic import concrete, is_symbolic


class Lifetime(NamedTuple):
    """One value: its size and the steps that write it first and read it last."""

    name: str
    nbytes: int
    first: int
    last: int


@dataclass(frozen=True)
class MemoryPlan:
    """Byte offset of every value (views included), the arena size, and the one-buffer-per-tensor size."""

    offsets: dict[str, int]
    arena_bytes: int
    naive_bytes: int
    alignment: int
    slots: dict[str, int] | None = None  # bytes each value owns at its offset (a view: its source's); None: its own


def aligned(nbytes: int, alignment: int) -> int:
    """The bytes a value reserves: rounded up to the alignment, never zero (Vulkan binds no empty range)."""
    return -(-max(nbytes, 1) // alignment) * alignment  # (max(alignment, ...) would guard a size against it)


def resolve_alias(name: str, aliases: Mapping[str, str]) -> str:
    """The value that owns the bytes behind `name` (following views of views)."""
    seen = {name}
    while name in aliases:
        name = aliases[name]
        if name in seen:
            raise ValueError(f"alias cycle through {name!r}")
        seen.add(name)
    return name


def _owned_lifetimes(values: Iterable[Lifetime], aliases: Mapping[str, str]) -> dict[str, Lifetime]:
    """One lifetime per owning value, stretched over the uses of every view of it."""
    by_name = {v.name: Lifetime(*v) for v in values}
    owned = {name: v for name, v in by_name.items() if name not in aliases}
    for view, v in by_name.items():
        if view not in aliases:
            continue
        root = resolve_alias(view, aliases)
        if root not in owned:
            raise ValueError(f"view {view!r} aliases {root!r}, which is not a planned value")
        r = owned[root]
        if v.nbytes > r.nbytes:
            raise ValueError(f"view {view!r} ({v.nbytes} B) is larger than its source {root!r} ({r.nbytes} B)")
        owned[root] = r._replace(first=min(r.first, v.first), last=max(r.last, v.last))
    return owned


def _lowest_free_offset(size: int, busy: list[tuple[int, int]], alignment: int) -> int:
    """The lowest aligned offset where [offset, offset + size) misses every (offset, end) range in `busy`."""
    offset = 0
    for lo, hi in sorted(busy):
        if offset + size <= lo:
            break
        offset = max(offset, -(-hi // alignment) * alignment)
    return offset


@lru_cache(maxsize=64)
def _overlaps(lifetimes: tuple[tuple[str, int, int], ...]) -> dict[str, tuple[str, ...]]:
    """For each value, the values live at some step it is live. Only steps decide it, not sizes: the plans of one
    model at different shapes share it, so it is computed once per model graph (a sweep, not all pairs)."""
    by_first = sorted(lifetimes, key=lambda v: v[1])
    found: dict[str, list[str]] = {name: [] for name, _, _ in lifetimes}
    live: list[tuple[str, int, int]] = []
    for name, first, last in by_first:
        live = [v for v in live if v[2] >= first]  # those that end before `first` meet no later value either
        for other, _, _ in live:
            found[name].append(other)
            found[other].append(name)
        live.append((name, first, last))
    return {name: tuple(others) for name, others in found.items()}


def plan_memory(
    values: Iterable[Lifetime | tuple[str, int, int, int]],
    aliases: Mapping[str, str] | None = None,
    alignment: int = 64,
) -> MemoryPlan:
    """Offsets for `values` (name, nbytes, first_step, last_step); `aliases` maps a view to its source."""
    if alignment < 1:
        raise ValueError(f"alignment must be positive, got {alignment}")
    aliases = dict(aliases or {})
    lifetimes = [Lifetime(*v) for v in values]
    owned = _owned_lifetimes(lifetimes, aliases)
    for v in owned.values():
        if v.first > v.last or v.nbytes < 0:
            raise ValueError(f"value {v.name!r}: bad lifetime [{v.first}, {v.last}] or size {v.nbytes}")
    # largest first; ties by first use then name, so the plan is deterministic
    order = sorted(owned.values(), key=lambda v: (-aligned(v.nbytes, alignment), v.first, v.name))
    overlapping = _overlaps(tuple((v.name, v.first, v.last) for v in owned.values()))
    placed: dict[str, tuple[int, int]] = {}  # (offset, end) of every value placed so far
    offsets: dict[str, int] = {}
    arena = 0
    for v in order:
        size = aligned(v.nbytes, alignment)
        busy = [placed[name] for name in overlapping[v.name] if name in placed]
        offset = _lowest_free_offset(size, busy, alignment)
        placed[v.name] = (offset, offset + size)
        offsets[v.name] = offset
        arena = max(arena, offset + size)
    for v in lifetimes:
        if v.name in aliases:
            offsets[v.name] = offsets[resolve_alias(v.name, aliases)]
    naive = sum(aligned(v.nbytes, alignment) for v in owned.values())
    slots = {v.name: placed[resolve_alias(v.name, aliases)][1] - offsets[v.name] for v in lifetimes}
    return MemoryPlan(offsets, arena, naive, alignment, slots)


KEPT_LAYOUTS = 8  # placements kept per graph structure; the largest ones, which the most shapes fit in


@dataclass(frozen=True)
class _Layout:
    sizes: np.ndarray  # aligned bytes of each owned value (in the structure's order) it was placed for
    offsets: np.ndarray  # their offsets
    plan: MemoryPlan


@dataclass
class _Structure:
    owned: list[str]  # the values that own bytes (views excluded), in a fixed order
    layouts: list[_Layout]


def _fits(sizes: Sequence[int], layout: _Layout) -> bool:
    """Whether every (aligned) size fits the bytes its value had in `layout`; for symbolic sizes, a guard each."""
    return all(size <= slot for size, slot in zip(sizes, layout.sizes.tolist()))


class LayoutCache:
    """`plan_memory` for the plans of one model, reusing an earlier placement where the new sizes fit in it.

    A reused placement's offsets and slots are exact for the values it placed, and the arena it reports is its
    own. Keyed by the values' names and lifetimes (and the aliases and alignment), so a graph that specialises
    differently for some shape gets placements of its own.

    Sizes that are symbolic (vk/symbolic.py) are checked against a kept placement one by one (a guard each:
    the size fits its slot); a new placement is made for their values in the traced shape, kept, and served
    the same way. Either reports the placement's own arena (its offsets hold every shape that passes those
    guards), never an expression that compares the values' ends with each other. Nothing symbolic is kept."""

    def __init__(self, keep: int = KEPT_LAYOUTS) -> None:
        if keep < 1:
            raise ValueError(f"keep must be ≥ 1, got {keep}")
        self.keep = keep
        self.reused = 0  # placements served from a kept layout (statistics, tests)
        self._structures: dict[tuple[object, ...], _Structure] = {}

    def plan(self, values: list[Lifetime], aliases: Mapping[str, str], alignment: int = 64) -> MemoryPlan:
        key = (tuple((v.name, v.first, v.last) for v in values), tuple(aliases.items()), alignment)
        nbytes = {v.name: v.nbytes for v in values}
        found = self._structures.get(key)
        if is_symbolic(list(nbytes.values())):
            return self._plan_symbolic(values, aliases, alignment, key, found)
        if found is not None:
            sizes = np.array([aligned(nbytes[name], alignment) for name in found.owned], np.int64)
            for layout in found.layouts:
                if bool(np.all(sizes <= layout.sizes)):
                    self.reused += 1
                    kept = layout.plan
                    # the placement's own arena, which its slots (what the plan's tensors reserve) reach: the plan
                    # that made it may have failed before it grew the shared region (a binding past the device's
                    # limit), so the region need not hold them yet
                    return MemoryPlan(kept.offsets, kept.arena_bytes, int(sizes.sum()), alignment, kept.slots)
        plan = plan_memory(values, aliases, alignment)
        self._keep(values, aliases, alignment, key, found, plan)
        return plan

    def _keep(self, values: list[Lifetime], aliases: Mapping[str, str], alignment: int, key: tuple[object, ...],
              found: _Structure | None, plan: MemoryPlan) -> _Layout:
        """Keep `plan`, the placement of `values` (concrete sizes), for later shapes of this structure."""
        if found is None:
            found = self._structures[key] = _Structure([v.name for v in values if v.name not in aliases], [])
        nbytes = {v.name: v.nbytes for v in values}
        sizes = np.array([aligned(nbytes[name], alignment) for name in found.owned], np.int64)
        offsets = np.array([plan.offsets[name] for name in found.owned], np.int64)
        kept = _Layout(sizes, offsets, plan)
        found.layouts.append(kept)
        found.layouts.sort(key=lambda layout: layout.plan.arena_bytes)  # the tightest that fits is tried first
        if len(found.layouts) > self.keep:
            del found.layouts[0]  # the smallest: a larger placement holds more shapes
        return kept

    def _plan_symbolic(self, values: list[Lifetime], aliases: Mapping[str, str], alignment: int,
                       key: tuple[object, ...], found: _Structure | None) -> MemoryPlan:
        """`plan` for symbolic sizes: the first kept placement each size fits in (one guard per value), else a
        new one made for the traced shape's sizes and kept."""
        nbytes = {v.name: v.nbytes for v in values}
        owned = found.owned if found is not None else [v.name for v in values if v.name not in aliases]
        sizes = [aligned(nbytes[name], alignment) for name in owned]
        naive = sum(sizes)
        for layout in reversed(found.layouts) if found is not None else []:  # the largest first: the widest class
            if _fits(sizes, layout):
                self.reused += 1
                kept = layout.plan
                return MemoryPlan(kept.offsets, kept.arena_bytes, naive, alignment, kept.slots)
        traced = [v._replace(nbytes=concrete(v.nbytes)) for v in values]
        plan = plan_memory(traced, aliases, alignment)
        # its offsets hold the shapes whose values fit where the traced shape's do: those guards
        fits = _fits(sizes, self._keep(traced, aliases, alignment, key, found, plan))
        assert fits, "the traced shape fits its own placement"
        return MemoryPlan(plan.offsets, plan.arena_bytes, naive, alignment, plan.slots)

    def clear(self) -> None:
        self._structures.clear()
