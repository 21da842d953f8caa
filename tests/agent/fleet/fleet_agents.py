"""What the model-service and fleet tests share: bundles of the real models, agents with their own model store,
and an operator's client.

Every bundle carries the real PP-OCR models and the options `FAST`, under which detection runs at the image's
own size, so a self-test on a small word image costs about a second on lavapipe instead of twenty.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import onnx

from tests.agent.agents import agent_config, word_png
from tests.agent.bundles.conftest import KeyPair
from vkocr.agent.bundles import bundle
from vkocr.agent.bundles.store import ModelStore
from vkocr.agent.ocr.model_files import PPOCRV4_FILES, models_dir
from vkocr.agent.serving.background import BackgroundAgent, start_agent
from vkocr.agent.serving.client import OcrClient
from vkocr.agent.serving.config import AgentConfig
from vkocr.v1 import models_pb2

FAST = {"limit_type": "max", "limit_side_len": 960}
WORD = "LOT0042"  # what the self-test image says
WORD_SWAPPED = "LOT1142"  # what a recogniser whose dictionary swaps '0' and '1' reads there
MAX_BUNDLE_BYTES = 32 << 20  # the real bundles are about 15 MiB


def default_models() -> dict[str, Path]:
    return {m.role: models_dir() / m.filename for m in PPOCRV4_FILES}


def swapped_digits_rec(out_dir: Path, a: str = "0", b: str = "1") -> Path:
    """The real recogniser with the dictionary in its `character` metadata changed: digits `a` and `b` trade
    places, so every `a` it sees reads as `b` and back. Same file name, other content."""
    model = onnx.load(str(default_models()["rec"]))
    for prop in model.metadata_props:
        if prop.key == "character":
            chars = prop.value.split("\n")
            i, j = chars.index(a), chars.index(b)
            chars[i], chars[j] = chars[j], chars[i]
            prop.value = "\n".join(chars)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / default_models()["rec"].name
    onnx.save(model, str(out))
    return out


def word_image(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(word_png(text))
    return path


def make_bundle(out: Path, version: str, key: KeyPair, image: Path, expect: str, *,
                models: dict[str, Path] | None = None, other_files: tuple[Path, ...] = (),
                options: dict[str, Any] | None = None) -> Path:
    bundle.create(models or default_models(), "labels", version, out, options=FAST if options is None else options,
                  self_tests=[(image, expect)], other_files=other_files, private_key=key.private)
    return out


def store_config(root: Path, key: KeyPair, **overrides: Any) -> AgentConfig:
    """A loopback agent on a free port serving from the store at `root`, trusting `key`, with model management
    allowed from loopback (development flag) unless overridden."""
    return agent_config(**{"models.store": str(root), "models.trusted_keys": [str(key.public_path)],
                           "models.max_bundle_bytes": MAX_BUNDLE_BYTES, "auth.dev_allow_loopback": True,
                           "server.status_interval_s": 0.2, **overrides})


def seed_store(root: Path, key: KeyPair, *bundles: Path) -> ModelStore:
    """Set-up, as scripts/make_dev_bundle.py does it: add the bundles, activate the first."""
    store = ModelStore(root, key.trusted, max_bundle_bytes=MAX_BUNDLE_BYTES)
    versions = [store.add(b).version for b in bundles]
    if versions:
        store.set_active(versions[0])
    return store


@contextmanager
def store_agent(config: AgentConfig, *, wait_serving: bool = True) -> Iterator[BackgroundAgent]:
    background = start_agent(config, wait_serving=wait_serving)
    try:
        yield background
    finally:
        background.stop(5)


def read_word(client: OcrClient, text: str) -> tuple[str, str]:
    """(text read, model version) of a recognition-only request for a rendered `text`."""
    response = client.recognize(word_png(text), use_det=False, use_cls=False, timeout=60)
    return " ".join(line.text for line in response.lines), response.model_version


def stored_versions(client: OcrClient) -> tuple[str, list[str]]:
    listed = client.models.ListBundles(models_pb2.ListBundlesRequest(), timeout=30)
    return listed.active_version, sorted(b.version for b in listed.bundles)
