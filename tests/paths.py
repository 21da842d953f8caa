"""The one definition of the paths the tests use: the checkout, the default models, the workspace's shared/."""

from __future__ import annotations

from pathlib import Path

from vkocr.agent.cli.workspace import shared_dir
from vkocr.agent.ocr.model_files import models_dir

ROOT = Path(__file__).resolve().parent.parent  # the checkout: scripts/, config/, proto/ sources
MODELS = models_dir()
SHARED = shared_dir() if shared_dir().is_absolute() else (ROOT / shared_dir()).resolve()
COMPAT = SHARED / "compat" / "rapidocr-1.4.4"
COMPAT_IMAGES = COMPAT / "images"
