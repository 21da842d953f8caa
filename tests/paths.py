"""The one definition of the paths the tests use: the checkout, the default models, the workspace's shared/.

shared/ (RapidOCR's compat images) lies beside the project in the workspace, not in it: `../shared` from the
checkout, or the folder VKOCR_SHARED names. A test that reads anything there carries `@pytest.mark.compat`
(tests/conftest.py), which skips it, with COMPAT_ABSENT as its reason, where the images are absent."""

from __future__ import annotations

from pathlib import Path

from vkocr.agent.cli.workspace import shared_dir
from vkocr.agent.ocr.model_files import models_dir

ROOT = Path(__file__).resolve().parent.parent  # the checkout: scripts/, config/, proto/ sources
MODELS = models_dir()
SHARED = shared_dir() if shared_dir().is_absolute() else (ROOT / shared_dir()).resolve()
COMPAT = SHARED / "compat" / "rapidocr-1.4.4"
COMPAT_IMAGES = COMPAT / "images"
COMPAT_ABSENT = (f"RapidOCR's compat images are absent ({COMPAT_IMAGES}): the workspace keeps them beside the "
                 "project, not in it; set VKOCR_SHARED to a shared/ folder that holds compat/rapidocr-1.4.4/")
