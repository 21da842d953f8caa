"""One place that turns an OSError from the agent's own disk into the store's error for it.

A full disk is the board's problem, not the bundle's: a rollout tool that saw INVALID_ARGUMENT would blame the
bundle and stop. Full (ENOSPC, EDQUOT) → StorageFull (RESOURCE_EXHAUSTED: free space, retry); anything else the
disk says (EROFS, EACCES, EIO, …) → StorageUnavailable (UNAVAILABLE: the board needs attention).
"""

from __future__ import annotations

import errno
from typing import Final

from vkocr.agent.bundles.errors import StorageError, StorageFull, StorageUnavailable

FULL_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT})


def disk_error(exc: OSError, doing: str) -> StorageError:
    """The StorageError for `exc`, raised while `doing` (e.g. "storing version 2.0.0")."""
    # The errno's name and text, never the path: the message goes to the client and names nothing of the board.
    reason = f"{errno.errorcode.get(exc.errno or 0, 'OSError')}: {exc.strerror or 'error'}"
    if exc.errno in FULL_ERRNOS:
        return StorageFull(f"{doing}: the agent's disk is full ({reason}); nothing half-written was kept; free "
                           "space on the board (or delete stored versions) and retry")
    return StorageUnavailable(f"{doing}: the agent cannot write its store ({reason}); nothing half-written was "
                              "kept; check the board's disk and retry")
