"""Fixtures of the model-service and fleet tests: signing keys and bundles of the real models, made once per
session (each bundle takes about a second to write)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.agent.bundles.conftest import KeyPair, make_keypair
from tests.agent.fleet.fleet_agents import (
    WORD,
    WORD_SWAPPED,
    default_models,
    make_bundle,
    swapped_digits_rec,
    word_image,
)
from vkocr.agent.ocr.model_files import PPOCRV4, missing_or_bad

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    skip = None
    if not os.path.exists(FONT):
        skip = pytest.mark.skip(reason="fonts-dejavu-core (installed by ./test.sh) renders the test images")
    elif missing_or_bad(files=PPOCRV4.files):  # the fleet's bundles are ppocrv4's (fleet_agents.py)
        skip = pytest.mark.skip(reason="the ppocrv4 models are missing: run scripts/fetch_models.py")
    if skip is not None:
        for item in items:
            if "tests/agent/fleet/" in str(item.fspath):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def fleet_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fleet")


@pytest.fixture(scope="session")
def release_key(fleet_dir: Path) -> KeyPair:
    (fleet_dir / "keys").mkdir(exist_ok=True)
    return make_keypair(fleet_dir / "keys", "release")


@pytest.fixture(scope="session")
def intruder_key(fleet_dir: Path) -> KeyPair:
    (fleet_dir / "intruder-keys").mkdir(exist_ok=True)
    return make_keypair(fleet_dir / "intruder-keys", "intruder")


@pytest.fixture(scope="session")
def selftest_image(fleet_dir: Path) -> Path:
    return word_image(fleet_dir / "images" / "lot0042.png", WORD)


@dataclass(frozen=True)
class Bundles:
    """v1: the default models. v2: the recogniser's dictionary swaps '0' and '1', so the self-test image
    reads LOT1142 (its self-test expects that). bad_self_test: the default models expecting text the image
    does not hold. v3: like v1 under another version, the base of the tampered ones."""

    v1: Path
    v2: Path
    bad_self_test: Path
    v3: Path


@pytest.fixture(scope="session")
def bundles(fleet_dir: Path, release_key: KeyPair, selftest_image: Path) -> Bundles:
    out = fleet_dir / "bundles"
    rec = swapped_digits_rec(fleet_dir / "swapped")
    return Bundles(
        v1=make_bundle(out / "labels-1.0.0.vkb", "1.0.0", release_key, selftest_image, WORD),
        v2=make_bundle(out / "labels-2.0.0.vkb", "2.0.0", release_key, selftest_image, WORD_SWAPPED,
                       models={**default_models(), "rec": rec}),
        bad_self_test=make_bundle(out / "labels-1.5.0.vkb", "1.5.0", release_key, selftest_image, "LOT9999"),
        v3=make_bundle(out / "labels-3.0.0.vkb", "3.0.0", release_key, selftest_image, WORD),
    )
