"""vkocr: PaddleOCR's PP-OCR pipeline on Vulkan compute shaders — the local OCR API.

    import vkocr

    with vkocr.OCR() as ocr:                  # the default device; vkocr.OCR("llvmpipe"), vkocr.OCR("cpu")
        result = ocr("photo.jpg")             # a path, bytes, a binary file, a Pillow image, an H×W×3 array
        pages = ocr.read_pdf("scan.pdf")      # one result per page
        for line in result.lines:
            print(line.text, line.score, line.box, line.angle)

Names are imported on first use (PEP 562), so ``import vkocr.v1.ocr_pb2`` (the wire contract) stays light.
Subpackages: vkocr.engine (the Vulkan engine), vkocr.postproc, vkocr.agent (CLI, serving), vkocr.v1 (gRPC).
As a library vkocr logs through `logging` ("vkocr.*" loggers) and prints nothing unless the application
configures logging.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from vkocr.lazy import lazy_exports

try:
    __version__: str = version("vkocr")
except PackageNotFoundError:  # a source tree on sys.path without an installed distribution
    __version__ = "0+unknown"

if TYPE_CHECKING:
    from vkocr.agent.errors import EngineClosed, ImageError, OptionsError
    from vkocr.agent.ocr.options import OcrOptions
    from vkocr.agent.ocr.reader import OCR
    from vkocr.engine.errors import DeviceNotFound, VulkanUnavailable
    from vkocr.errors import VkocrError
    from vkocr.postproc.result import CharBox, OcrLine, OcrResult

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "OCR": "vkocr.agent.ocr.reader",
    "OcrOptions": "vkocr.agent.ocr.options",
    "OcrResult": "vkocr.postproc.result",
    "OcrLine": "vkocr.postproc.result",
    "CharBox": "vkocr.postproc.result",
    "VkocrError": "vkocr.errors",
    "VulkanUnavailable": "vkocr.engine.errors",
    "DeviceNotFound": "vkocr.engine.errors",
    "ImageError": "vkocr.agent.errors",
    "EngineClosed": "vkocr.agent.errors",
    "OptionsError": "vkocr.agent.errors",
}

__all__ = [
    "CharBox", "DeviceNotFound", "EngineClosed", "ImageError", "OCR", "OcrLine", "OcrOptions", "OcrResult",
    "OptionsError", "VkocrError", "VulkanUnavailable", "__version__",
]


__getattr__, __dir__ = lazy_exports("vkocr", _EXPORTS, globals())
