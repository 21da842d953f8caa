"""A model's shape classes: for each, one compiled function from an input shape to its plan's Recipe.

Working a plan out for a new shape (vk/graph/plan_recipe.py, `describe`) runs a lot of Python: shape inference,
placement, binding, every kernel's push constants and group counts, the barriers. Most of it is the same
arithmetic for every shape. So the first shape of a class is described under a trace (vk/symbolic.py): its
dimensions are symbolic, every comparison made on them is a guard, and the recipe comes out as expressions of
the input dimensions, compiled into one function. A later shape tries the functions of the classes traced so
far, most recently used first: the first whose guards all hold gives the recipe by arithmetic alone. When none
does, the shape is traced into a new class. The traced shape's own recipe comes from its new function too, so
every plan is made the same way.

A function names the shared regions' buffers (vk/graph/shared_memory.py): when a region is replaced, every
function is dropped and the classes are traced again.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from vkocr.engine.errors import EngineError
from vkocr.engine.graph.plan_recipe import NotTraceable, Recipe
from vkocr.engine.symbolic import Sym, Trace, tracing
from vkocr.engine.symbolic_program import compile_program
from vkocr.log import get_logger

log = get_logger(__name__)

# Functions kept per key. A rec model has 11-15 classes per batch size along the width (the warm-up learns them
# all); a shape that misses costs each kept function's early guards (tens of µs), then a trace (60-130 ms).
MAX_CLASSES = 96


class ShapeClasses:
    """The compiled recipe functions of one model, per key (a model keys them by extra outputs and hooks: those
    change what is recorded), valid for one generation of its shared memory."""

    def __init__(self, limit: int = MAX_CLASSES) -> None:
        if limit < 1:
            raise ValueError(f"limit must be ≥ 1, got {limit}")
        self.limit = limit
        self.traced = 0  # classes traced so far (statistics, tests)
        self.reused = 0  # recipes from a function traced for another shape
        self.escapes: list[str] = []  # where traces pinned a dimension to its value (kept for tests, diagnostics)
        self._functions: dict[Hashable, list[Callable[..., Recipe | None]]] = {}
        self._untraceable: set[Hashable] = set()
        self._generation: int | None = None

    @property
    def count(self) -> int:
        """Classes kept now."""
        return sum(len(f) for f in self._functions.values())

    def recipe(self, key: Hashable, shape: Sequence[int], generation: Callable[[], int],
               describe: Callable[[Sequence[Sym]], Recipe]) -> Recipe | None:
        """The recipe for `shape` from a kept class, or from a new one traced with `describe` (which works a
        recipe out for symbolic dimensions); None when this key's plans cannot be traced (describe them shape
        by shape). `generation()`: the shared memory's generation now."""
        if key in self._untraceable:
            return None
        self._forget_if_replaced(generation())
        functions = self._functions.setdefault(key, [])
        for i, function in enumerate(functions):
            found: Recipe | None = function(*shape)
            if found is not None:
                if i:
                    functions.insert(0, functions.pop(i))
                self.reused += 1
                return found
        trace = Trace()
        dims = trace.inputs(shape)
        try:
            with tracing(trace):
                symbolic = describe(dims)
            function = compile_program(trace, dims, symbolic, name="recipe")
            recipe: Recipe | None = function(*shape)
            if recipe is None:
                raise RuntimeError("a traced shape fails its own guards")
        except NotTraceable as exc:
            log.info("shape_classes_off", reason=str(exc))
            self._untraceable.add(key)
            return None
        except EngineError:
            raise  # this shape is refused (too large to bind, say): described in full it would be too
        except Exception as exc:  # a traced build that breaks is a bug of ours: the plans are still made, in full
            log.warning("shape_classes_off", reason=f"{type(exc).__name__}: {exc}", shape=list(shape))
            self._untraceable.add(key)
            return None
        self._forget_if_replaced(generation())  # the trace grew the shared memory: the other classes are stale
        functions = self._functions.setdefault(key, [])
        functions.insert(0, function)
        del functions[self.limit:]
        self.traced += 1
        self.escapes += trace.escapes[:MAX_CLASSES - len(self.escapes)]
        log.debug("shape_class_traced", shape=list(shape), guards=getattr(function, "guard_count", 0),
                  escapes=len(trace.escapes))
        return recipe

    def _forget_if_replaced(self, generation: int) -> None:
        if generation != self._generation:
            self._functions.clear()
            self._generation = generation

    def clear(self) -> None:
        self._functions.clear()
        self._untraceable.clear()
        self._generation = None

