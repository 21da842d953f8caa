"""Fixtures shared by every test: one Vulkan device per session, validation messages fail the test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vkocr.engine.device import Device
from vkocr.engine.instance import VALIDATION

LAVAPIPE = "llvmpipe"  # the tests' Vulkan device: a CPU implementation, so never chosen automatically


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes tens of seconds (builds a wheel, a fresh environment); "
                            "still in the default run, deselect with -m 'not slow'")


@pytest.fixture(scope="session")
def device(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Device]:
    dev = Device(LAVAPIPE, cache_dir=tmp_path_factory.mktemp("pipeline-cache"))
    yield dev
    dev.close()


@pytest.fixture(autouse=True)
def no_validation_messages() -> Iterator[None]:
    """With VKOCR_VALIDATION=1 the Khronos layer reports into VALIDATION; any message fails the test."""
    before = len(VALIDATION.messages)
    yield
    new = VALIDATION.messages[before:]
    assert not new, "Vulkan validation messages:\n" + "\n".join(new)
