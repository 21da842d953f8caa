"""Fixtures of the agent tests: one throw-away PKI per session, a pipeline on lavapipe."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.agent.certs import TlsFiles, make_tls_files
from vkocr.agent.ocr.pipeline import OcrPipeline


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def first() -> Iterator[OcrPipeline]:
    """A pipeline on lavapipe (named), for a worker to serve; closed here unless the worker closed it."""
    pipeline = OcrPipeline.open("llvmpipe")
    yield pipeline
    if pipeline.device is not None:
        pipeline.close()
