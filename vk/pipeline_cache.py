"""A VkPipelineCache persisted on disk, rejected when the device, driver or cache UUID changed.

File layout: magic, 32-byte sha256 of (vendorID, deviceID, driverVersion, pipelineCacheUUID), driver data.
The driver checks its own header too, but not driverVersion on every vendor: our key makes it explicit.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from vkocr.engine.loader import binding, call, check
from vkocr.log import get_logger

if TYPE_CHECKING:
    from vkocr.engine.devices import DeviceInfo

log = get_logger(__name__)

MAGIC = b"VKOCRPC1"


def default_cache_dir() -> Path:
    if os.environ.get("VKOCR_CACHE_DIR"):
        return Path(os.environ["VKOCR_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vkocr"


def cache_key(info: DeviceInfo) -> bytes:
    ident = f"{info.vendor_id}:{info.device_id}:{info.driver_version_raw}:{info.pipeline_cache_uuid}"
    return hashlib.sha256(ident.encode()).digest()


class PipelineCache:
    """Loads at device open (or starts empty, saying why), saves atomically at close. `path=None`: memory only."""

    def __init__(self, device_handle: object, info: DeviceInfo, path: Path | None) -> None:
        vk = binding()
        self.device_handle, self.path, self.key = device_handle, path, cache_key(info)
        self.loaded_bytes = 0
        self.rejected_reason: str | None = None
        initial = self._read()
        data = vk.ffi.new("char[]", initial) if initial else None
        create = vk.VkPipelineCacheCreateInfo(initialDataSize=len(initial), pInitialData=data)
        self.handle = call(vk.vkCreatePipelineCache, device_handle, create, None)
        del data, create

    def _read(self) -> bytes:
        if self.path is None or not self.path.exists():
            return b""
        blob = self.path.read_bytes()
        if blob[: len(MAGIC)] != MAGIC:
            self.rejected_reason = "not a vkocr pipeline cache"
        elif blob[len(MAGIC) : len(MAGIC) + 32] != self.key:
            self.rejected_reason = "device, driver version or pipelineCacheUUID changed"
        else:
            self.loaded_bytes = len(blob) - len(MAGIC) - 32
            log.debug("pipeline_cache_loaded", path=str(self.path), bytes=self.loaded_bytes)
            return blob[len(MAGIC) + 32 :]
        log.info("pipeline_cache_rejected", path=str(self.path), reason=self.rejected_reason)
        return b""

    def data(self) -> bytes:
        vk = binding()
        size = vk.ffi.new("size_t*")
        check(vk.lib.vkGetPipelineCacheData(self.device_handle, self.handle, size, vk.ffi.NULL),
              "vkGetPipelineCacheData")
        buf = vk.ffi.new("char[]", size[0])
        check(vk.lib.vkGetPipelineCacheData(self.device_handle, self.handle, size, buf), "vkGetPipelineCacheData")
        return bytes(vk.ffi.buffer(buf, size[0]))

    def save(self) -> None:
        """Write atomically (temp file + rename), so a crash never leaves a half-written cache."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(MAGIC + self.key + self.data())
        os.replace(tmp, self.path)

    def close(self) -> None:
        if self.handle is not None:
            binding().vkDestroyPipelineCache(self.device_handle, self.handle, None)
            self.handle = None
