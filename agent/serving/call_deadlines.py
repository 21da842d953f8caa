"""How long a client should give one OCR call, by the backend the agent serves on (its status says which).

Light on purpose: `vkocr client --help` reads these without loading grpc.
"""

from __future__ import annotations

from typing import Final

from vkocr.engine.devices import CPU_IMPLEMENTATION_NAMES

# One OCR call on a GPU, or on the CPU backend (a photo in about 2 s on a 2-core board), with room for a queue.
OCR_TIMEOUT_S: Final = 60.0
# On lavapipe (only ever named) or the NumPy reference a photo takes tens of seconds on 2 cores.
SLOW_OCR_TIMEOUT_S: Final = 600.0


def ocr_timeout_for(backend: str, device: str) -> float:
    """The deadline of one OCR call on `backend` ("vulkan", "cpu", "numpy") and `device` (its name)."""
    slow = backend == "numpy" or bool(CPU_IMPLEMENTATION_NAMES.search(device))
    return SLOW_OCR_TIMEOUT_S if slow else OCR_TIMEOUT_S
