"""The memory every plan of one model shares: activations, input staging and output staging.

One thread drives a model and runs one plan at a time, so its plans need not keep their activations apart:
each plan places its tensors at offsets of one device region, and its staging at offsets of one upload and
one readback region. A region is sized by the largest plan in use and grows when a larger one arrives; then
every plan recorded against the old regions is stale (its command buffer names freed buffers) and the model
drops it. A cache of hundreds of shapes so costs command buffers and descriptors, not arenas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vkocr.engine.memory import Allocation
from vkocr.log import get_logger

if TYPE_CHECKING:
    from vkocr.engine.device import Device

log = get_logger(__name__)

KINDS = ("device", "upload", "readback")
GROWTH = 1.5  # a region grows by at least this factor, so a rising run of shapes re-records few times


class SharedMemory:
    """Three growable regions (device activations, upload and readback staging) and a generation that
    changes whenever one of them is replaced."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.generation = 0
        self._regions: dict[str, Allocation | None] = dict.fromkeys(KINDS)

    def reserve(self, device_bytes: int, upload_bytes: int = 0, readback_bytes: int = 0) -> bool:
        """Make each region at least this large; True when one was replaced (plans recorded before are stale)."""
        grew = False
        for kind, need in zip(KINDS, (device_bytes, upload_bytes, readback_bytes), strict=True):
            current = self._regions[kind]
            if need <= 0 or (current is not None and current.nbytes >= need):
                continue
            size = need if current is None else max(need, int(current.nbytes * GROWTH))
            if current is not None:
                self.device.pool.free(current)
                self._regions[kind] = None
                self.generation += 1  # now, not after the allocation: when that fails, the old plans are stale
            self.device.pool.trim()  # the old region's arena goes back to the driver before the new one comes
            self._regions[kind] = self.device.pool.alloc(size, kind)
            log.debug("plan_memory_grown", kind=kind, mib=round(size / 2**20, 1))
            grew = True
        return grew

    def region(self, kind: str) -> Allocation:
        region = self._regions[kind]
        if region is None:
            raise ValueError(f"no {kind} region reserved")
        return region

    @property
    def nbytes(self) -> int:
        """Bytes the regions hold now."""
        return sum(r.nbytes for r in self._regions.values() if r is not None)

    def bytes_of(self, kind: str) -> int:
        region = self._regions[kind]
        return region.nbytes if region is not None else 0

    def close(self) -> None:
        for kind, region in self._regions.items():
            if region is not None:
                self.device.pool.free(region)
                self._regions[kind] = None
        self.generation += 1
