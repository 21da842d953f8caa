"""Keys, small model files and bundles made of them, all real (files on disk, ed25519 keys, tar archives).

The model files are random bytes: loading models is the server's business, and random content makes every
sha256 and size check meaningful.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from PIL import Image, ImageDraw

from vkocr.agent.bundles import bundle
from vkocr.agent.bundles.manifest import Manifest
from vkocr.agent.bundles.signing import TrustedKeys, generate_keypair, load_private_key


@dataclass(frozen=True)
class KeyPair:
    private_path: Path
    public_path: Path
    private: Ed25519PrivateKey
    fingerprint: str

    @property
    def trusted(self) -> TrustedKeys:
        return TrustedKeys.from_paths([self.public_path])


def make_keypair(directory: Path, name: str) -> KeyPair:
    fp = generate_keypair(directory / f"{name}.key")
    return KeyPair(directory / f"{name}.key", directory / f"{name}.pub",
                   load_private_key(directory / f"{name}.key"), fp)


@pytest.fixture
def key(tmp_path: Path) -> KeyPair:
    (tmp_path / "keys").mkdir()
    return make_keypair(tmp_path / "keys", "release")


@pytest.fixture
def other_key(tmp_path: Path) -> KeyPair:
    (tmp_path / "other-keys").mkdir()
    return make_keypair(tmp_path / "other-keys", "intruder")


@pytest.fixture
def models(tmp_path: Path) -> dict[str, Path]:
    """Three files of random bytes named like models, of different sizes."""
    rng = np.random.default_rng(7)
    directory = tmp_path / "src"
    directory.mkdir()
    out = {}
    for role, size in (("det", 24_000), ("cls", 9_000), ("rec", 41_000)):
        path = directory / f"{role}.onnx"
        path.write_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        out[role] = path
    return out


@pytest.fixture
def selftest_image(tmp_path: Path) -> Path:
    image = Image.new("RGB", (160, 48), "white")
    ImageDraw.Draw(image).text((10, 16), "LOT 42", fill="black")
    path = tmp_path / "src" / "label.png"
    path.parent.mkdir(exist_ok=True)
    image.save(path)
    return path


BundleFactory = Callable[..., tuple[Path, Manifest]]


@pytest.fixture
def make_bundle(tmp_path: Path, models: dict[str, Path], selftest_image: Path, key: KeyPair) -> BundleFactory:
    """make_bundle(version="1.0.0", signer=key or None, models=…, out=…) → (path, manifest)."""

    def make(version: str = "1.0.0", signer: KeyPair | None = key, model_files: dict[str, Path] | None = None,
             out: Path | None = None, **options: object) -> tuple[Path, Manifest]:
        path = out or tmp_path / "bundles" / f"ocr-{version}.vkb"
        manifest = bundle.create(model_files or models, "ocr", version, path,
                                 options=options or {"box_thresh": 0.6, "limit_side_len": 960},
                                 self_tests=[(selftest_image, "LOT 42")],
                                 private_key=signer.private if signer else None)
        return path, manifest

    return make
