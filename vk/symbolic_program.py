"""Compiling a trace: the guards and expressions that one traced build recorded (vk/symbolic.py) turned into one
straight-line Python function of the input dimensions, which rebuilds the traced result for another shape of
the class or returns None when a guard fails.

Kept apart from the Sym arithmetic: tracing runs on every traced build, compiling once per shape class.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from vkocr.engine.symbolic import COMPARE, INFIX, REFLEXIVE, Packed, Sym, Trace, packer


class _Emitter:
    """Straight-line Python for the guards and the expressions a result needs, common subexpressions shared."""

    def __init__(self, inputs: Sequence[Sym]) -> None:
        self.names: dict[int, str] = {}  # id(Sym) → local name
        self.constants: dict[int, tuple[str, Any]] = {}  # id(object) → (global name, object)
        self.holds: dict[int, bool] = {}  # id(object) → whether a Sym is inside
        self.params = []
        for s in inputs:
            assert isinstance(s.expr, str)
            self.names[id(s)] = s.expr
            self.params.append(s.expr)

    def constant(self, obj: Any) -> str:
        if isinstance(obj, (bool, type(None))) or (isinstance(obj, int) and not isinstance(obj, bool)):
            return repr(obj)
        if isinstance(obj, float) and math.isfinite(obj):
            return repr(obj)
        entry = self.constants.get(id(obj))
        if entry is None:
            entry = self.constants[id(obj)] = (f"_k{len(self.constants)}", obj)
        return entry[0]

    def operand(self, x: Any) -> str:
        if not isinstance(x, Sym):
            return self.constant(x)
        name = self.names.get(id(x))
        if name is None:
            raise RuntimeError(f"a Sym of another trace ({x.expr if isinstance(x.expr, str) else x.expr[0]}) reached "
                               "this one: something cached a Sym")
        return name

    def body(self, trace: Trace, roots: list[Sym]) -> list[str]:
        """The lines, in the trace's order, of every guard and of the Syms that they and `roots` need."""
        needed = {id(r) for r in roots}
        for event in reversed(trace.events):  # operands come before the Syms made from them
            if isinstance(event, tuple):
                args: Any = event[1:3]
            elif id(event) in needed and not isinstance(event.expr, str):
                args = event.expr[1:]
            else:
                continue
            for a in args:
                if isinstance(a, Sym):
                    needed.add(id(a))
        lines: list[str] = []
        by_key: dict[tuple[Any, ...], str] = {}
        tests: set[str] = set()
        for event in trace.events:
            if isinstance(event, tuple):
                op, a, b, outcome = event
                left, right = self.operand(a), self.operand(b)
                if left == right and outcome == (op in REFLEXIVE):  # x == x, x < x ...: decided whatever the
                    continue  # shape (folding makes such tests)
                test = f"{'not ' if outcome else ''}({left} {COMPARE[op]} {right})"
                if test not in tests:
                    tests.add(test)
                    lines.append(f"    if {test}: return None")
            elif id(event) in needed and not isinstance(event.expr, str):
                op, *operands = event.expr
                names = [self.operand(a) for a in operands]
                key = (op, *names)
                name = by_key.get(key)
                if name is None:  # else the same arithmetic again: computed once
                    name = by_key[key] = f"v{len(by_key)}"
                    if op in INFIX:
                        code = f"{names[0]} {INFIX[op]} {names[1]}"
                    elif op == "neg":
                        code = f"-{names[0]}"
                    else:  # floor, ceil, int
                        code = f"_{op}({names[0]})"
                    lines.append(f"    {name} = {code}")
                self.names[id(event)] = name
        return lines

    def symbolic(self, obj: Any) -> bool:
        """Whether `obj` holds a Sym anywhere (memoised: a recipe shares many sub-structures)."""
        key = id(obj)
        found = self.holds.get(key)
        if found is None:
            if isinstance(obj, Sym):
                found = True
            elif isinstance(obj, Packed):
                found = any(not isinstance(p, bytes) for p in obj.parts)
            elif isinstance(obj, (tuple, list)):
                found = any(self.symbolic(v) for v in obj)
            elif isinstance(obj, dict):
                found = any(self.symbolic(v) or self.symbolic(k) for k, v in obj.items())
            else:
                found = False
            self.holds[key] = found
        return found

    def roots(self, obj: Any, found: list[Sym]) -> list[Sym]:
        """The Syms inside `obj`."""
        if isinstance(obj, Sym):
            found.append(obj)
        elif isinstance(obj, Packed):
            for p in obj.parts:
                if not isinstance(p, bytes):
                    self.roots(p[1], found)
        elif isinstance(obj, (tuple, list, dict)) and self.symbolic(obj):
            for v in (obj.values() if isinstance(obj, dict) else obj):
                self.roots(v, found)
            if isinstance(obj, dict):
                self.roots(list(obj), found)
        return found

    def rebuild(self, obj: Any) -> str:
        """An expression that rebuilds `obj` with its Syms evaluated (a part without Syms is a constant: tuples
        shared, lists and dicts copied)."""
        if isinstance(obj, Sym):
            return self.operand(obj)
        if isinstance(obj, (tuple, list, dict)) and not self.symbolic(obj):
            name = self.constant(obj)
            return name if isinstance(obj, tuple) else f"{name}.copy()"
        if isinstance(obj, Packed):
            parts = [self.constant(p) if isinstance(p, bytes) else
                     f"{self.constant(packer(p[0]))}({', '.join(self.rebuild(v) for v in p[1])})" for p in obj.parts]
            return " + ".join(parts)
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a NamedTuple
            return f"{self.constant(type(obj))}({', '.join(self.rebuild(v) for v in obj)})"
        if isinstance(obj, tuple):
            return f"({''.join(self.rebuild(v) + ', ' for v in obj)})"
        if isinstance(obj, list):
            return f"[{', '.join(self.rebuild(v) for v in obj)}]"
        if isinstance(obj, dict):
            return "{" + ", ".join(f"{self.rebuild(k)}: {self.rebuild(v)}" for k, v in obj.items()) + "}"
        return self.constant(obj)


def compile_program(trace: Trace, inputs: Sequence[Sym], result: Any, name: str = "program"
                    ) -> Callable[..., Any]:
    """One function of the input dimensions: `result` rebuilt for those dimensions, or None when one of the
    trace's guards comes out otherwise. Every line runs in the order of the trace, so a guard that protected an
    expression (a divisor checked positive, say) still comes before it."""
    emit = _Emitter(inputs)
    body = emit.body(trace, emit.roots(result, []))
    returned = emit.rebuild(result)
    source = "\n".join([f"def {name}({', '.join(emit.params)}):", *body, f"    return {returned}", ""])
    namespace: dict[str, Any] = {"_floor": math.floor, "_ceil": math.ceil, "_int": int}
    namespace.update(emit.constants.values())
    exec(compile(source, f"<{name}>", "exec"), namespace)  # noqa: S102  # our own generated arithmetic
    program: Callable[..., Any] = namespace[name]
    program.source = source  # type: ignore[attr-defined]  # for tests and diagnostics
    program.guard_count = sum(line.startswith("    if ") for line in body)  # type: ignore[attr-defined]
    return program
