"""Liveness planning of the activation arena (pure Python): no two values live at the same step share a byte,
views sit on their source, offsets are aligned, and the arena lies between the peak live set and the naive sum."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vkocr.engine.graph.memory_plan import LayoutCache, Lifetime, MemoryPlan, aligned, plan_memory, resolve_alias

ALIGNMENTS = (4, 16, 64, 256)


def check_plan(values: list[Lifetime], aliases: dict[str, str], plan: MemoryPlan, *, greedy: bool = True) -> None:
    """Every invariant, checked exhaustively over all pairs and all steps (`greedy=False`: a placement reused
    from larger sizes, whose arena may exceed the sum of the smaller ones)."""
    a = plan.alignment
    owned = {v.name: v for v in values if v.name not in aliases}
    # a source stays live while any view of it is
    span = {name: (v.first, v.last) for name, v in owned.items()}
    for v in values:
        if v.name in aliases:
            root = resolve_alias(v.name, aliases)
            lo, hi = span[root]
            span[root] = (min(lo, v.first), max(hi, v.last))
            assert plan.offsets[v.name] == plan.offsets[root], f"view {v.name} not on its source {root}"
    for name, off in plan.offsets.items():
        assert off % a == 0, f"{name} at {off} not aligned to {a}"
    for name, v in owned.items():
        assert plan.offsets[name] + aligned(v.nbytes, a) <= plan.arena_bytes, f"{name} ends past the arena"
    for v in values:  # a value's slot (what a Tensor of the plan reserves) holds it and lies inside the arena
        slot = (plan.slots or {}).get(v.name, aligned(v.nbytes, a))
        assert v.nbytes <= slot and plan.offsets[v.name] + slot <= plan.arena_bytes, f"{v.name}'s slot {slot}"
    for x, y in itertools.combinations(owned.values(), 2):
        (xf, xl), (yf, yl) = span[x.name], span[y.name]
        if xf <= yl and yf <= xl:  # live at a common step
            xo, yo = plan.offsets[x.name], plan.offsets[y.name]
            disjoint = xo + aligned(x.nbytes, a) <= yo or yo + aligned(y.nbytes, a) <= xo
            assert disjoint, f"{x} at {xo} and {y} at {yo} overlap while both live"
    steps = range(min((f for f, _ in span.values()), default=0),
                  max((last for _, last in span.values()), default=0) + 1)
    peak = max((sum(aligned(owned[n].nbytes, a) for n, (f, last) in span.items() if f <= s <= last) for s in steps),
               default=0)
    assert peak <= plan.arena_bytes
    assert plan.arena_bytes <= plan.naive_bytes or not greedy
    assert plan.naive_bytes == sum(aligned(v.nbytes, a) for v in owned.values())


@st.composite
def problems(draw: st.DrawFn) -> tuple[list[Lifetime], dict[str, str], int]:
    """Random lifetimes over a short schedule, some of them views of earlier values (chains included)."""
    steps = draw(st.integers(1, 30))
    count = draw(st.integers(1, 40))
    values: list[Lifetime] = []
    aliases: dict[str, str] = {}
    for i in range(count):
        first = draw(st.integers(0, steps))
        last = draw(st.integers(first, steps))
        nbytes = draw(st.one_of(st.integers(0, 300), st.integers(1, 1 << 20)))
        name = f"v{i}"
        if values and draw(st.integers(0, 3)) == 0:  # about a quarter are views
            source = draw(st.sampled_from(values))
            aliases[name] = source.name
            nbytes = min(nbytes, source.nbytes)
            first = max(first, source.first)
            last = max(last, first)
        values.append(Lifetime(name, nbytes, first, last))
    return values, aliases, draw(st.sampled_from(ALIGNMENTS))


@settings(max_examples=300, deadline=None)
@given(problems())
def test_random_problems_never_overlap_live_values(problem: tuple[list[Lifetime], dict[str, str], int]) -> None:
    values, aliases, alignment = problem
    check_plan(values, aliases, plan_memory(values, aliases, alignment))


def test_chain_reuses_memory_two_buffers_suffice() -> None:
    """x0 → x1 → x2 → …: each value is read only by the next step, so two slots hold the whole chain."""
    values = [Lifetime(f"x{i}", 1000, i, i + 1) for i in range(10)]
    plan = plan_memory(values, {}, 64)
    check_plan(values, {}, plan)
    assert plan.arena_bytes == 2 * aligned(1000, 64)
    assert plan.naive_bytes == 10 * aligned(1000, 64)


def test_plain_tuples_are_accepted_and_zero_sizes_take_one_alignment_unit() -> None:
    plan = plan_memory([("a", 0, 0, 1), ("b", 8, 0, 1)], None, 256)
    assert sorted(plan.offsets.values()) == [0, 256] and plan.arena_bytes == 512


def test_view_extends_its_source_lifetime() -> None:
    """src dies at step 1 but its view is read at step 5: nothing live meanwhile may take src's bytes."""
    values = [Lifetime("src", 4096, 0, 1), Lifetime("view", 4096, 1, 5), Lifetime("other", 4096, 2, 4)]
    aliases = {"view": "src"}
    plan = plan_memory(values, aliases, 64)
    check_plan(values, aliases, plan)
    assert plan.offsets["view"] == plan.offsets["src"] != plan.offsets["other"]
    assert plan.naive_bytes == 2 * 4096  # a view owns no bytes


@pytest.mark.parametrize(("values", "aliases", "message"), [
    ([Lifetime("a", 4, 0, 1), Lifetime("b", 4, 0, 1)], {"a": "b", "b": "a"}, "alias cycle"),
    ([Lifetime("v", 4, 0, 1)], {"v": "missing"}, "not a planned value"),
    ([Lifetime("s", 4, 0, 1), Lifetime("v", 8, 0, 1)], {"v": "s"}, "larger than its source"),
    ([Lifetime("a", 4, 3, 1)], {}, "bad lifetime"),
])
def test_inconsistent_problems_are_rejected(values: list[Lifetime], aliases: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan_memory(values, aliases, 16)


@settings(max_examples=200, deadline=None)
@given(problems(), st.randoms(use_true_random=False))
def test_a_reused_placement_holds_smaller_sizes_and_no_larger_ones(
        problem: tuple[list[Lifetime], dict[str, str], int], rng: random.Random) -> None:
    """The placement of some sizes serves any sizes that fit in them (the same offsets, no overlap while live,
    an arena no larger), and is not reused once one value outgrows its bytes."""
    values, aliases, alignment = problem
    cache = LayoutCache()
    first = cache.plan(values, aliases, alignment)
    assert cache.reused == 0 and first == plan_memory(values, aliases, alignment)
    smaller = [v._replace(nbytes=rng.randint(0, v.nbytes)) for v in values]
    for i, v in enumerate(smaller):  # a view is never larger than its source
        if v.name in aliases:
            source = next(s for s in smaller if s.name == resolve_alias(v.name, aliases))
            smaller[i] = v._replace(nbytes=min(v.nbytes, source.nbytes))
    reused = cache.plan(smaller, aliases, alignment)
    assert cache.reused == 1 and reused.offsets == first.offsets and reused.arena_bytes <= first.arena_bytes
    check_plan(smaller, aliases, reused, greedy=False)
    owners = [v for v in values if v.name not in aliases]
    grown_name = rng.choice(owners).name
    grown = [v._replace(nbytes=aligned(v.nbytes, alignment) + 1) if v.name == grown_name else v for v in values]
    fresh = cache.plan(grown, aliases, alignment)
    assert cache.reused == 1 and fresh == plan_memory(grown, aliases, alignment)
    check_plan(grown, aliases, fresh)


def test_layouts_are_kept_per_structure_and_bounded() -> None:
    """Another lifetime structure never reuses a placement; at most `keep` placements per structure, the largest."""
    cache = LayoutCache(keep=2)
    chain = [Lifetime("a", 100, 0, 1), Lifetime("b", 100, 1, 2), Lifetime("c", 100, 2, 3)]
    overlapping = [v._replace(last=3) for v in chain]
    cache.plan(chain, {}, 4)
    assert cache.plan(overlapping, {}, 4).arena_bytes == 300 and cache.reused == 0
    for size in (200, 300, 400):  # each outgrows the ones before: three placements, two kept
        cache.plan([v._replace(nbytes=size) for v in chain], {}, 4)
    assert cache.reused == 0
    cache.plan([v._replace(nbytes=250) for v in chain], {}, 4)  # fits in 300's (and 400's)
    assert cache.reused == 1
    cache.plan([v._replace(nbytes=150) for v in chain], {}, 4)  # 100's and 200's were dropped: still 300's
    assert cache.reused == 2
    with pytest.raises(ValueError, match="keep"):
        LayoutCache(keep=0)
