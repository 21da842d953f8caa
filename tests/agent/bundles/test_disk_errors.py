"""The agent's own disk refusing a write leaves as the board's fault: RESOURCE_EXHAUSTED when full, UNAVAILABLE
otherwise, never INVALID_ARGUMENT, and without the board's paths. A real full disk:
tests/agent/fleet/test_storage_full.py."""

from __future__ import annotations

import errno
import os

import pytest
from google.rpc import code_pb2

from vkocr.agent.bundles.disk_errors import disk_error
from vkocr.agent.bundles.errors import StorageFull, StorageUnavailable
from vkocr.agent.serving.status_table import status_for


@pytest.mark.parametrize(("number", "kind", "code"), [
    (errno.ENOSPC, StorageFull, code_pb2.RESOURCE_EXHAUSTED),
    (errno.EDQUOT, StorageFull, code_pb2.RESOURCE_EXHAUSTED),
    (errno.EROFS, StorageUnavailable, code_pb2.UNAVAILABLE),
    (errno.EACCES, StorageUnavailable, code_pb2.UNAVAILABLE),
    (errno.EIO, StorageUnavailable, code_pb2.UNAVAILABLE),
])
def test_disk_errors_get_the_boards_codes(number: int, kind: type[Exception], code: int) -> None:
    error = disk_error(OSError(number, os.strerror(number), "/var/lib/vkocr/models/staging/x"), "storing 2.0.0")
    assert isinstance(error, kind)
    status = status_for(error)
    assert status.code == code and "/var/lib" not in status.message
    assert status.message.startswith("storing 2.0.0: ") and errno.errorcode[number] in status.message
