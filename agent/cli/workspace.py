"""Where the benches find the workspace's shared/ folder: RapidOCR's compat images and the peers' models.

VKOCR_SHARED, else `../shared` from the current directory (a checkout's root sits beside it).
"""

from __future__ import annotations

import os
from pathlib import Path


def shared_dir() -> Path:
    return Path(os.environ.get("VKOCR_SHARED") or "../shared")


def compat_images() -> Path:
    return shared_dir() / "compat" / "rapidocr-1.4.4" / "images"


def ncnn_models() -> Path:
    return shared_dir() / "peers" / "ncnn-ppocrv4"
