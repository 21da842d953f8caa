"""A package's public names imported on first use (PEP 562), written once for `vkocr` and `vkocr.engine`: their
facades stay cheap to import (no Vulkan, no onnxruntime) until a name is used."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str], namespace: dict[str, Any]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level `__getattr__` and `__dir__` of `package`, whose public names map to the modules that
    define them in `exports`; `namespace` is the package's globals(), where a name is kept once looked up."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # looked up once
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
