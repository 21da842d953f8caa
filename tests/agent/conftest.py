"""Fixtures of the agent tests: one throw-away PKI per session."""

from __future__ import annotations

import pytest

from tests.agent.certs import TlsFiles, make_tls_files


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("pki"))
