"""Symbolic dimensions (vk/symbolic.py, compiled by vk/symbolic_program.py): a compiled program gives what the
traced code gives for every shape its guards accept, refuses the shapes whose branches differ, and never
evaluates past a guard that protected it."""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np
import pytest

from tests.engine.kernels.harness import fresh_rng
from vkocr.engine.symbolic import Packed, Trace, concrete, dim, pack, tracing
from vkocr.engine.symbolic_program import compile_program


def shaped_arithmetic(n: Any, c: Any, h: Any, w: Any) -> dict[str, Any]:
    """Code of the kind a plan runs: conv output lengths, ceil-divided group counts, a tile chosen by size,
    aligned offsets, a float scale floored, packed push constants, max/min and a guarded division."""
    oh = (h + 2 - 3) // 2 + 1
    ow = (w + 2 - 3) // 2 + 1
    groups = max(1, -(-(n * oh * ow) // 256))
    tile = "wide" if ow * 4 > 96 else "narrow"
    nbytes = n * c * oh * ow * 4
    offset = max(256, math.ceil(nbytes / 256) * 256)
    up = dim(math.floor(oh * 1.5))
    share = (w // (h - 30)) if h - 30 > 0 else -1
    push = pack("<4I", (n, oh, ow, up)) + b"\x07\x00\x00\x00"
    return {"shape": (n, c, oh, ow), "groups": (groups, 1, 1), "tile": tile, "offset": offset,
            "push": push, "small": min(oh, ow), "share": share, "names": ["a", "b"]}


def realized(result: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.realize() if isinstance(v, Packed) else v) for k, v in result.items()}


def test_a_program_gives_the_traced_code_s_result_wherever_its_guards_hold() -> None:
    rng, seed = fresh_rng()
    traced_at = (int(rng.integers(1, 7)), 3, int(rng.integers(8, 200)), int(rng.integers(8, 400)))
    trace = Trace()
    dims = trace.inputs(traced_at)
    with tracing(trace):
        symbolic = shaped_arithmetic(*dims)
    program = compile_program(trace, dims, symbolic)
    assert program(*traced_at) == realized(shaped_arithmetic(*traced_at)), f"seed {seed}"
    accepted = 0
    for _ in range(400):
        shape = (int(rng.integers(1, 7)), 3, int(rng.integers(8, 200)), int(rng.integers(8, 400)))
        got = program(*shape)
        if got is not None:
            accepted += 1
            assert got == realized(shaped_arithmetic(*shape)), f"seed {seed}, traced at {traced_at}, shape {shape}"
    assert accepted > 0, f"seed {seed}: no other shape shares the class of {traced_at}"


def test_a_shape_whose_branch_differs_is_refused() -> None:
    trace = Trace()
    dims = trace.inputs((1, 3, 64, 256))  # ow = 128: the wide tile
    with tracing(trace):
        symbolic = shaped_arithmetic(*dims)
    program = compile_program(trace, dims, symbolic)
    assert program(1, 3, 64, 264) is not None
    assert program(1, 3, 64, 40) is None  # ow = 20: the narrow tile


def test_a_guarded_division_is_never_evaluated_past_its_guard() -> None:
    trace = Trace()
    dims = trace.inputs((1, 3, 64, 100))  # h - 30 > 0: w // (h - 30) is computed
    with tracing(trace):
        symbolic = shaped_arithmetic(*dims)
    program = compile_program(trace, dims, symbolic)
    assert program(1, 3, 30, 100) is None  # h - 30 == 0: refused before the division, not ZeroDivisionError


def chained_offsets(h: Any, w: Any) -> tuple[Any, ...]:
    """Constant terms added and taken away in chains, as pads, kernel sizes and strides make them."""
    same = ((h - 1) + 2) - 1  # h again
    shifted = 5 + (w + 3) - 11  # w - 3
    conv = ((h + 2) - 3) // 2 + 1
    back = (conv - 1) + 1  # conv's expression again: computed once
    steps = 0 + (7 - (w - 2)) + 4  # a constant minus w: not folded into w's terms
    flag = (h - 1) + 1 >= h  # h >= h: decided whatever h is
    return same, shifted, conv, back, steps, flag, (h + 4) * 2 - 8


def test_constant_terms_fold_and_the_results_stay_exact() -> None:
    rng, seed = fresh_rng()
    traced_at = (int(rng.integers(8, 500)), int(rng.integers(8, 500)))
    trace = Trace()
    dims = trace.inputs(traced_at)
    with tracing(trace):
        symbolic = chained_offsets(*dims)
    assert symbolic[0] is dims[0], "a chain of constant terms that cancels is its operand itself"
    program = compile_program(trace, dims, symbolic)
    assert program.source.count("// 2") == 1 and program.source.count(" - 1") == 0, program.source
    assert "d0 >= d0" not in program.source, "a test of a value against itself is decided, not emitted"
    assert "    v0 = d1 + -3\n" in program.source, f"5 + (w + 3) - 11 is one addition:\n{program.source}"
    for _ in range(200):
        shape = (int(rng.integers(-50, 2000)), int(rng.integers(-50, 2000)))
        assert program(*shape) == chained_offsets(*shape), f"seed {seed}, traced at {traced_at}, shape {shape}"


def test_an_escape_pins_the_value() -> None:
    trace = Trace()
    (n,) = trace.inputs((5,))
    with tracing(trace):
        result = struct.pack("<I", n)  # __index__: only n == 5 gives these bytes
    program = compile_program(trace, (n,), result)
    assert trace.escapes and "index" in trace.escapes[0]
    assert program(5) == struct.pack("<I", 5)
    assert program(6) is None


def test_numpy_object_arrays_keep_dims_symbolic() -> None:
    trace = Trace()
    dims = trace.inputs((2, 3, 48, 320))
    with tracing(trace):
        shape = np.array(dims, dtype=object)
        total = dim(np.prod(shape[2:]))
        target = np.concatenate([shape[:2], [-1]])
    program = compile_program(trace, dims, (total, tuple(target)))
    assert not trace.escapes
    assert program(2, 3, 48, 512) == (48 * 512, (2, 3, -1))


def test_syms_key_no_cache_and_live_only_in_their_trace() -> None:
    trace = Trace()
    (d,) = trace.inputs((7,))
    with tracing(trace), pytest.raises(TypeError):
        {d: 1}  # noqa: B018  # a cache keyed by a Sym would leak this trace into the next
    with pytest.raises(RuntimeError, match="outside its trace"):
        d < 3  # noqa: B015
    assert concrete(d) == 7 and repr(d) == "7"


def test_a_sym_of_another_trace_is_refused_when_compiling() -> None:
    old = Trace()
    (stale,) = old.inputs((4,))
    trace = Trace()
    (d,) = trace.inputs((4,))
    with tracing(trace):
        mixed = d + stale  # what a cache that kept an earlier trace's values would hand over
    with pytest.raises(RuntimeError, match="another trace"):
        compile_program(trace, (d,), mixed)


def test_a_trace_that_breaks_falls_back_to_full_plans_and_a_refused_shape_stays_refused() -> None:
    from vkocr.engine.errors import BindingTooLarge
    from vkocr.engine.graph.shape_classes import ShapeClasses

    def broken(dims: Any) -> Any:
        return {dims[0]: 1}  # a Sym keying a dict: a bug of ours, found by the trace

    def too_large(dims: Any) -> Any:
        raise BindingTooLarge("too large to bind")

    classes = ShapeClasses()
    assert classes.recipe("a", (2, 3), lambda: 0, broken) is None
    assert classes.recipe("a", (4, 3), lambda: 0, broken) is None, "the key is described in full from then on"
    assert classes.traced == 0
    with pytest.raises(BindingTooLarge):
        classes.recipe("b", (2, 3), lambda: 0, too_large)
    assert classes.recipe("c", (5,), lambda: 0, lambda dims: (dims[0] * 2,)) == (10,)
    assert classes.recipe("c", (7,), lambda: 0, broken) == (14,), "a kept class makes it: no trace"
