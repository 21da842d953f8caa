"""DESIGN.md's layout rules, checked on the source: who may import whom, and how big a library module may grow."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.paths import ROOT

MAX_MODULE_LINES = 400
# folder → the vkocr packages its modules must never import (DESIGN.md, "who may import whom")
FORBIDDEN = {
    "vk": ("vkocr.agent", "vkocr.postproc"),  # the engine knows no OCR
    "postproc": ("vkocr.agent", "vkocr.engine"),  # postprocessing knows no Vulkan
}
LIBRARY = ("vk", "agent", "postproc", "shaders", "proto/vkocr")


def modules(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "_pb2" not in p.name)


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_no_forbidden_imports(folder: str) -> None:
    bad = [f"{p.relative_to(ROOT)} imports {name}" for p in modules(folder) for name in sorted(imported(p))
           if name.startswith(FORBIDDEN[folder])]
    assert not bad, "\n".join(bad)


def test_the_check_sees_an_import() -> None:
    """The rule above can fail: the agent's pipeline does import the engine and postproc."""
    names = imported(ROOT / "agent" / "ocr" / "pipeline.py")
    assert any(n.startswith("vkocr.engine") for n in names) and any(n.startswith("vkocr.postproc") for n in names)


def test_no_library_module_past_the_size_limit() -> None:
    sizes = {p.relative_to(ROOT): len(p.read_text().splitlines()) for f in LIBRARY for p in modules(f)}
    big = [f"{path}: {n} lines" for path, n in sorted(sizes.items()) if n > MAX_MODULE_LINES]
    assert not big, f"library modules over {MAX_MODULE_LINES} lines (split them):\n" + "\n".join(big)
