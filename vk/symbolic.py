"""Symbolic dimensions: a plan is built once per shape class, then made for every new shape of the class by
evaluating one compiled function.

Building a plan for a new input shape re-runs the same Python for every shape: shape inference, placement,
each kernel's push constants and group counts. Under a `Trace`, the input's dimensions are `Sym`s: numbers
that carry the concrete value of the shape being built (so every line of that code runs as usual) and the
expression that made them. Every comparison made on a Sym is a *guard*: the branch it took holds for the
shapes whose comparison comes out the same. `compile_program` (vk/symbolic_program.py) turns the guards and
the expressions behind a result (any structure of tuples, lists, dicts, named tuples and constants with Syms
inside) into one Python function of the input dimensions: it returns the result for another shape, or None
when a guard fails (the shape belongs to another class, which is traced in turn). This module holds the Syms,
the trace that records them and the deferred push-constant packing.

A Sym that leaves for a place that needs a real int (`int()`, an index, NumPy's int64, `struct.pack`) is an
*escape*: the value is pinned by an equality guard, which is always correct but makes the class that one
value. The code a plan runs keeps dimensions symbolic (`dim()` instead of `int()`, `pack()` of
vk/kernels/launch.py, object arrays for folded shapes), and the tests check that a traced plan of the real
models escapes only where a value really picks a kernel variant (softmax's cache length).
"""

from __future__ import annotations

import functools
import math
import operator
import struct
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

_active = threading.local()

BINARY = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "floordiv": operator.floordiv,
          "mod": operator.mod, "truediv": operator.truediv}
COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
REFLEXIVE = frozenset({"le", "ge", "eq"})  # comparisons that hold for a value against itself
INFIX = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "mod": "%", "truediv": "/"}
NUMBER = (int, float)


class Trace:
    """What one traced build did with its Syms, in order: every Sym made and every guard, so that a compiled
    program runs them in the same order (a guard that protected an expression, a divisor checked positive, say,
    still comes before it)."""

    def __init__(self) -> None:
        self.events: list[Sym | tuple[str, Any, Any, bool]] = []  # Syms, and guards: (comparison, l, r, outcome)
        self.escapes: list[str] = []  # where a Sym was pinned to its value (for tests and diagnostics)

    @property
    def guards(self) -> list[tuple[str, Any, Any, bool]]:
        return [e for e in self.events if isinstance(e, tuple)]

    def guard(self, op: str, a: Any, b: Any, outcome: bool) -> None:
        self.events.append((op, a, b, outcome))

    def inputs(self, values: Sequence[int], prefix: str = "d") -> tuple[Sym, ...]:
        """One Sym per value: the input dimensions of the build."""
        with tracing(self):
            return tuple(Sym(int(v), f"{prefix}{i}") for i, v in enumerate(values))


def active() -> Trace:
    trace: Trace | None = getattr(_active, "trace", None)
    if trace is None:
        raise RuntimeError("a symbolic dimension was used outside its trace")
    return trace


@contextmanager
def tracing(trace: Trace) -> Iterator[Trace]:
    """Make `trace` collect the guards of the Syms used in this thread until the block ends."""
    previous = getattr(_active, "trace", None)
    _active.trace = trace
    try:
        yield trace
    finally:
        _active.trace = previous


def _value(x: Any) -> Any:
    return x.value if isinstance(x, Sym) else x


def _binary(name: str, reflected: bool) -> Callable[[Sym, Any], Any]:
    fn = BINARY[name]

    def method(self: Sym, other: Any) -> Any:
        if isinstance(other, Sym):
            value = other.value
        elif isinstance(other, NUMBER) and not isinstance(other, bool):
            value = other
            if type(value) is int and type(self.value) is int:
                same = _identity(name, reflected, value)
                if same is not None:  # x * 1, x // 1, x + 0, x % 1 ...: no expression (nor guard) for them
                    return self if same is _SELF else same
                if name == "add" or (name == "sub" and not reflected):
                    return _shifted(self, value if name == "add" else -value)
        else:
            return NotImplemented
        if reflected:
            return Sym(fn(value, self.value), (name, other, self))
        return Sym(fn(self.value, value), (name, self, other))

    return method


_SELF = object()


def _shifted(x: Sym, c: int) -> Any:
    """x + c for an integer x, folded into x's own constant term when it has one: shape code adds and subtracts
    constants in long chains (pads, kernel sizes, strides), and a program that computes (d - 1) + 1 computes
    and guards every step of it; folded, it is d again."""
    expr = x.expr
    if isinstance(expr, tuple) and len(expr) == 3:
        op, a, b = expr
        if op == "add" and type(b) is int and isinstance(a, Sym):
            base, k = a, b
        elif op == "add" and type(a) is int and isinstance(b, Sym):
            base, k = b, a
        elif op == "sub" and type(b) is int and isinstance(a, Sym):
            base, k = a, -b
        else:
            return Sym(x.value + c, ("add", x, c))
        if k + c == 0:
            return base
        return Sym(x.value + c, ("add", base, k + c))
    return Sym(x.value + c, ("add", x, c))


def _identity(name: str, reflected: bool, c: int) -> Any:
    """What an integer operation with the constant `c` comes to whatever the integer x: _SELF (x itself), a
    constant, or None (a real operation). Kernels compute x * 1 and x // 1 often (strides, unit kernels)."""
    if c == 1 and (name == "mul" or (name == "floordiv" and not reflected)):
        return _SELF
    if c == 0 and (name == "add" or (name == "sub" and not reflected)):
        return _SELF
    if (c == 1 and name == "mod" and not reflected) or (c == 0 and name == "mul"):
        return 0
    return None


def _compare(name: str) -> Callable[[Sym, Any], Any]:
    fn = getattr(operator, name)

    def method(self: Sym, other: Any) -> Any:
        if not isinstance(other, (Sym, *NUMBER)) or isinstance(other, bool):
            return NotImplemented
        outcome = bool(fn(self.value, _value(other)))
        active().guard(name, self, other, outcome)
        return outcome

    return method


class Sym:
    """A number of the traced shape, with the expression that computed it from the input dimensions."""

    __slots__ = ("value", "expr")

    def __init__(self, value: int | float, expr: tuple[Any, ...] | str) -> None:
        self.value = value
        self.expr = expr  # an input's name, or (operation, operands...)
        active().events.append(self)

    __add__, __radd__ = _binary("add", False), _binary("add", True)
    __sub__, __rsub__ = _binary("sub", False), _binary("sub", True)
    __mul__, __rmul__ = _binary("mul", False), _binary("mul", True)
    __floordiv__, __rfloordiv__ = _binary("floordiv", False), _binary("floordiv", True)
    __mod__, __rmod__ = _binary("mod", False), _binary("mod", True)
    __truediv__, __rtruediv__ = _binary("truediv", False), _binary("truediv", True)
    __lt__, __le__, __gt__, __ge__ = _compare("lt"), _compare("le"), _compare("gt"), _compare("ge")
    __eq__, __ne__ = _compare("eq"), _compare("ne")

    def __neg__(self) -> Sym:
        if isinstance(self.expr, tuple) and self.expr[0] == "neg":
            return self.expr[1]  # type: ignore[no-any-return]  # -(-x): x
        return Sym(-self.value, ("neg", self))

    def __pos__(self) -> Sym:
        return self

    def __floor__(self) -> Sym:
        return Sym(math.floor(self.value), ("floor", self))

    def __ceil__(self) -> Sym:
        return Sym(math.ceil(self.value), ("ceil", self))

    def floor(self) -> Sym:  # what NumPy calls for np.floor of an object array
        return self.__floor__()

    def ceil(self) -> Sym:
        return self.__ceil__()

    def to_int(self) -> Sym:
        return self if isinstance(self.value, int) else Sym(int(self.value), ("int", self))

    # Unhashable: a Sym keying a cache (an lru_cache, a dict) would hand this trace's expressions to the next
    # trace, or pin nothing where it should guard. Such code must take concrete values or no cache.
    __hash__ = None  # type: ignore[assignment]

    def _pin(self, why: str) -> Any:
        trace = active()
        trace.guard("eq", self, self.value, True)
        caller = sys._getframe(2)
        trace.escapes.append(f"{why} at {caller.f_code.co_filename}:{caller.f_lineno}")
        return self.value

    def __index__(self) -> int:
        return int(self._pin("index"))

    def __int__(self) -> int:
        return int(self._pin("int"))

    def __float__(self) -> float:
        return float(self._pin("float"))

    def __bool__(self) -> bool:
        return bool(self._pin("bool"))

    def __format__(self, spec: str) -> str:
        return format(self._pin("format"), spec)

    def __repr__(self) -> str:  # the value, as messages and logs print it (repr decides nothing)
        return repr(self.value)


def dim(x: Any) -> Any:
    """`int(x)`, except that a Sym stays symbolic (as an int: a float-valued one is truncated symbolically)."""
    return x.to_int() if isinstance(x, Sym) else int(x)


def concrete(x: Any) -> Any:
    """The value of `x` in the traced shape, without a guard: only for what does not change the result (a size
    to reserve ahead, a log line)."""
    return x.value if isinstance(x, Sym) else x


def is_symbolic(values: Sequence[Any]) -> bool:
    for v in values:
        if isinstance(v, Sym):
            return True
    return False


class Packed:
    """Push-constant bytes with Syms among the values: `struct.pack` deferred to the compiled program. Joins
    with bytes and with other Packed as bytes do."""

    __slots__ = ("parts",)

    def __init__(self, parts: tuple[bytes | tuple[str, tuple[Any, ...]], ...]) -> None:
        self.parts = parts  # bytes, or (struct format, values)

    def __len__(self) -> int:
        return sum(len(p) if isinstance(p, bytes) else struct.calcsize(p[0]) for p in self.parts)

    def __add__(self, other: bytes | Packed) -> Packed:
        return Packed(self.parts + (other.parts if isinstance(other, Packed) else (bytes(other),)))

    def __radd__(self, other: bytes) -> Packed:
        return Packed((bytes(other), *self.parts))

    def ljust(self, width: int, fill: bytes) -> Packed:
        missing = width - len(self)
        return self if missing <= 0 else Packed((*self.parts, fill * missing))

    def realize(self) -> bytes:
        return b"".join(p if isinstance(p, bytes) else struct.pack(p[0], *(_value(v) for v in p[1]))
                        for p in self.parts)


@functools.cache
def packer(fmt: str) -> Callable[..., bytes]:
    """`struct.pack` for one format, compiled once (a program packs every dispatch's push constants)."""
    return struct.Struct(fmt).pack


def pack(fmt: str, values: Sequence[Any]) -> bytes | Packed:
    """struct.pack(fmt, *values), deferred when a value is symbolic."""
    if is_symbolic(values):
        return Packed(((fmt, tuple(values)),))
    return struct.pack(fmt, *values)
