"""Fixtures shared by every test: one Vulkan device per session, validation messages fail the test; the
`compat` mark for the tests that read the workspace's shared/ folder (tests/paths.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.paths import COMPAT_ABSENT, COMPAT_IMAGES, SHARED
from vkocr.engine.device import Device
from vkocr.engine.instance import VALIDATION

LAVAPIPE = "llvmpipe"  # the tests' Vulkan device: a CPU implementation, so never chosen automatically


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes tens of seconds (builds a wheel, a fresh environment); "
                            "still in the default run, deselect with -m 'not slow'")
    config.addinivalue_line("markers", "compat: reads RapidOCR's compat images (anything under tests/paths.py "
                            "SHARED, the workspace's shared/ beside the project); skipped where they are absent")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not COMPAT_IMAGES.is_dir():  # a user's clone: the images are the workspace's, not the project's
        skip = pytest.mark.skip(reason=COMPAT_ABSENT)
        for item in items:
            if item.get_closest_marker("compat"):
                item.add_marker(skip)


# A test without the mark that reads under SHARED fails, in every run that has the folder (CI's), so that no
# test passes there only to fail in a clone without it. Python's audit events see every open, listdir and
# scandir made from Python (PIL, NumPy, pathlib); a native reader (cv2.imread) goes unseen.
_SHARED_ROOTS = tuple({os.path.abspath(SHARED), os.path.realpath(SHARED)})
_watched: list[bool] = [False]  # an unmarked test is between its setup and its teardown
_unmarked_reads: list[str] = []


def _watch_shared(event: str, args: tuple[Any, ...]) -> None:
    if not _watched[0] or event not in ("open", "os.listdir", "os.scandir") or not args:
        return
    path = args[0]
    if isinstance(path, (str, bytes, os.PathLike)):
        full = os.path.abspath(os.fsdecode(path))
        if any(full == root or full.startswith(root + os.sep) for root in _SHARED_ROOTS):
            _unmarked_reads.append(full)


sys.addaudithook(_watch_shared)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _unmarked_reads.clear()
    _watched[0] = item.get_closest_marker("compat") is None  # from before its fixtures, of any scope


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    _watched[0] = False


@pytest.fixture(autouse=True)
def shared_reads_are_marked() -> Iterator[None]:
    yield
    reads = sorted(set(_unmarked_reads))
    assert not reads, ("read the workspace's shared/ without @pytest.mark.compat, so a clone without it fails "
                       "here instead of skipping:\n" + "\n".join(reads))


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
