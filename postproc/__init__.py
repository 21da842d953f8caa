"""Postprocessing of PP-OCR outputs: NumPy in, Python objects out. Knows nothing of Vulkan or of ``agent``.

Reproduces RapidOCR 1.4.4 (DB boxes through the OpenCV calls it makes, reading order, CTC decoding), and runs a
configurable chain of plugins over the result.
"""

from vkocr.postproc.ctc import CtcText, ctc_decode, ctc_greedy_decode, load_charset
from vkocr.postproc.db import db_boxes
from vkocr.postproc.errors import (
    CharsetError,
    PluginConfigError,
    PluginError,
    PluginLoadError,
    PostprocError,
    UnknownPluginError,
)
from vkocr.postproc.order import sort_box_indices, sort_boxes
from vkocr.postproc.registry import (
    ENTRY_POINT_GROUP,
    PluginChain,
    PluginFactory,
    PluginRegistry,
    PostprocPlugin,
    build_chain,
    default_registry,
)
from vkocr.postproc.result import CharBox, OcrLine, OcrResult
from vkocr.postproc.wordboxes import char_boxes, word_info

__all__ = [
    "ENTRY_POINT_GROUP",
    "CharBox",
    "CharsetError",
    "CtcText",
    "OcrLine",
    "OcrResult",
    "PluginChain",
    "PluginConfigError",
    "PluginError",
    "PluginFactory",
    "PluginLoadError",
    "PluginRegistry",
    "PostprocError",
    "PostprocPlugin",
    "UnknownPluginError",
    "build_chain",
    "char_boxes",
    "ctc_decode",
    "ctc_greedy_decode",
    "db_boxes",
    "default_registry",
    "load_charset",
    "sort_box_indices",
    "sort_boxes",
    "word_info",
]
