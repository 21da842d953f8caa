"""Words the bench reports share, so that a run on the CPU backend speaks of the CPU backend (no GPU, no GPU
waits, no plans) and every "n/a" in a table says why."""

from __future__ import annotations

from typing import Final

RAPIDOCR_ABSENT: Final = "n/a: RapidOCR 1.4.4 is not installed (pip install 'vkocr[test]' brings it)"


def on_gpu(backend: str) -> bool:
    """A report's backend string ("vulkan (…)", "cpu (onnxruntime …)", "numpy …") names a Vulkan device."""
    return backend.lower().startswith("vulkan")


def python_time(backend: str) -> str:
    """What the reports' Python column measures on this backend."""
    return "Python outside GPU waits" if on_gpu(backend) else "Python time (the CPU backend: the models' own included)"


NO_PLANS: Final = "plans n/a: the CPU backend keeps no plans (onnxruntime runs any shape as it comes)"
NO_GPU_BUSY: Final = "GPU busy n/a: the CPU backend has no GPU to be busy"


def not_applicable(backend: str, *notes: str) -> list[str]:
    """`notes` (NO_PLANS, NO_GPU_BUSY: why a column shows n/a) when the backend is no GPU; else none."""
    return [] if on_gpu(backend) else list(notes)
