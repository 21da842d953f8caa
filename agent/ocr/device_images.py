"""The prepared images on the device (agent/ocr/gpu_stages.py reads them from every stage's shaders): the image
slots, a buffer of device-local memory that holds several images at once (reading host memory over PCIe is slow
on discrete GPUs), and each stream's way into them, a host-visible staging buffer and the recorded copy or
resize (RapidOCR's resize of an oversized image and its letterbox, in the image_resize shader) into a slot."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from vkocr.agent.ocr.image_kernels import RESIZE_PARAMS_WORDS, ImageSource, record_image_resize, resize_params
from vkocr.agent.ocr.prep import Prepared
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError, OutOfMemory, VulkanError
from vkocr.engine.memory import Allocation, BufferView
from vkocr.engine.recorder import Recorder
from vkocr.engine.streams import Stream
from vkocr.engine.tensor import Tensor
from vkocr.log import get_logger

log = get_logger(__name__)

DEFAULT_MAX_STAGING = 64 << 20  # host-visible bytes for the raw image (20 MP); a bigger one is resized on the host
PARALLEL_COPY_BYTES = 2 << 20  # images above this go into staging on several threads
COPY_THREADS = min(4, os.cpu_count() or 1)


class HostBuffer:
    """A persistent host-visible allocation bound straight into shaders (no copy), as a uint32 tensor."""

    def __init__(self, device: Device, words: int) -> None:
        self.device = device
        self.alloc: Allocation = device.pool.alloc(4 * words, "upload")
        self.tensor = Tensor(self.alloc, (words,), np.dtype(np.uint32))

    def write(self, words: np.ndarray) -> None:
        self.alloc.array(np.uint32)[: len(words)] = words
        self.alloc.flush()

    def write_image(self, rgb: np.ndarray, pool: ThreadPoolExecutor | None = None) -> int:
        """An H×W×3 uint8 image as packed bytes (rgb_words' layout), straight into the mapping; its size in
        bytes. A large one is copied in parts on ``pool``'s threads (NumPy releases the GIL while it copies):
        one core alone does not reach the memory bandwidth that copying tens of MB from DRAM wants."""
        data = np.ascontiguousarray(rgb, dtype=np.uint8).reshape(-1)
        target = self.alloc.array(np.uint8)[: data.size]
        if pool is None or data.size < PARALLEL_COPY_BYTES:
            target[...] = data
        else:
            step = -(-data.size // COPY_THREADS)
            parts = [slice(i, i + step) for i in range(0, data.size, step)]
            for done in [pool.submit(np.copyto, target[part], data[part]) for part in parts]:
                done.result()
        self.alloc.flush()
        return int(data.size)

    def close(self) -> None:
        self.device.pool.free(self.alloc)


COPY_GRANULE = 1 << 20  # copies and resizes are recorded per MiB of output, so at most capacity/granule recordings


class ImageSlots:
    """The prepared images in device-local memory, which every stage's shaders read (reading host memory over
    PCIe is slow on discrete GPUs): `count` slots of up to `capacity` bytes each, one after another (slot k from
    byte offset(k)), so that the crops of several requests' images can go through one cls or rec batch. Shared by
    every stream's stages; where each slot's image is (`sources`) is written by the stream that loads it and read
    by the one that crops it."""

    def __init__(self, device: Device, capacity: int, count: int) -> None:
        if count < 1:
            raise KernelArgumentError(f"{count} image slots; at least 1")
        self.device, self.capacity, self.count = device, capacity, count
        self.slot_bytes = -(-capacity // device.alignment) * device.alignment  # each slot aligned for binding
        self.tensor = device.tensor((count * self.slot_bytes // 4,), np.uint32)
        self.slots = [Tensor(self.tensor.alloc.sub(k * self.slot_bytes, self.slot_bytes), (self.slot_bytes // 4,),
                             np.dtype(np.uint32)) for k in range(count)]
        self.sources: dict[int, ImageSource] = {}  # by slot: the prepared image there
        self.host_images: dict[int, tuple[np.ndarray, Prepared]] = {}  # by slot, for a shape run on the CPU

    def offset(self, slot: int) -> int:
        """Where image slot `slot` starts in the buffer, in bytes."""
        return slot * self.slot_bytes

    def check(self, slot: int) -> None:
        if not 0 <= slot < self.count:
            raise KernelArgumentError(f"image slot {slot} outside 0..{self.count - 1}")

    def close(self) -> None:
        self.device.free(self.tensor)


class DeviceImage:
    """One stream's way into the image slots: a host-visible staging buffer the image is written to, then copied
    into its slot as it is, or resized into it by the image_resize shader (RapidOCR's resize of an oversized
    image and its letterbox, and a page turned upright), which reads the raw image from staging. Both are
    recorded once per MiB of output and slot, and replayed on the stream. Staging grows with the largest raw
    image seen (an image of more than 2000 px a side arrives whole), up to max_staging bytes (GpuStages.load
    resizes a bigger one on the host)."""

    def __init__(self, device: Device, slots: ImageSlots, max_staging: int = DEFAULT_MAX_STAGING,
                 stream: Stream | None = None, copiers: ThreadPoolExecutor | None = None) -> None:
        self.device, self.store, self.max_staging = device, slots, max_staging
        self.capacity, self.tensor, self.slots = slots.capacity, slots.tensor, slots.slots
        self.stream = stream
        self.staging = HostBuffer(device, -(-slots.capacity // 4))
        self.resize_params = HostBuffer(device, RESIZE_PARAMS_WORDS)
        self._recordings: dict[tuple[str, int, int], Recorder] = {}  # (kind, bytes, slot)
        self._pending: Recorder | None = None
        self._copiers = copiers

    def offset(self, slot: int) -> int:
        return self.store.offset(slot)

    def settle(self) -> None:
        """Wait for the last copy or resize (staging may be rewritten after this)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.wait()

    def can_stage(self, nbytes: int) -> bool:
        """Whether staging holds (or may grow to hold, and did) an image of nbytes; False past max_staging or
        when the host-visible memory is not there (the caller then resizes on the host)."""
        if nbytes <= self.staging.alloc.nbytes:
            return True
        if nbytes > self.max_staging:
            return False
        self.settle()
        try:
            bigger = HostBuffer(self.device, -(-nbytes // COPY_GRANULE) * COPY_GRANULE // 4)
        except OutOfMemory as exc:  # nothing changed: the old buffer and its recordings stay
            log.warning("staging_not_grown", bytes=nbytes, error=str(exc))
            return False
        for rec in self._recordings.values():  # they bind the old buffer
            rec.close()
        self._recordings.clear()
        self.staging.close()
        self.staging = bigger
        return True

    def _stage(self, image: np.ndarray) -> None:
        self.settle()
        if not self.can_stage(image.nbytes):
            raise KernelArgumentError(f"an image of {image.nbytes} bytes does not fit GPU staging "
                                      f"({self.staging.alloc.nbytes} bytes, at most {self.max_staging})")
        self.staging.write_image(image, self._copiers)

    def _replay(self, kind: str, nbytes: int, slot: int, record: Callable[[Recorder, int, Tensor], None]) -> None:
        """Submit the recording of `kind` for `nbytes` of output into image slot `slot` without waiting for it:
        the stage submitted next on the stream starts with a full barrier, so it reads the whole image, and its
        fence covers this submission too (one round trip less)."""
        self.store.check(slot)
        size = min(self.store.slot_bytes, -(-max(nbytes, 1) // COPY_GRANULE) * COPY_GRANULE)
        rec = self._recordings.get((kind, size, slot))
        if rec is None:
            rec = self._recordings[(kind, size, slot)] = Recorder(self.device, stream=self.stream)
            record(rec, size, self.slots[slot])
            rec.end()
        rec.submit()
        self._pending = rec

    def copy(self, image: np.ndarray, slot: int = 0) -> None:
        """The image (H×W×3 uint8, at most the capacity) as it is, into image slot `slot`."""
        def record(rec: Recorder, size: int, out: Tensor) -> None:
            src, dst = self.staging.tensor.view, out.view
            rec.copy(BufferView(src.buffer, src.offset, size), BufferView(dst.buffer, dst.offset, size))

        self._stage(image)
        self._replay("copy", image.nbytes, slot, record)

    def resize(self, image: np.ndarray, out_h: int, out_w: int, pad_top: int, slot: int = 0, turn: int = 0
               ) -> None:
        """The image (H×W×3 uint8, any size staging can hold), turned `turn` quarter turns counterclockwise
        (np.rot90's k: a page turned upright, in the shader's reads), resized to out_h × out_w as cv2.resize
        INTER_LINEAR does, with pad_top black rows above and below, into image slot `slot`."""
        def record(rec: Recorder, size: int, out: Tensor) -> None:
            record_image_resize(rec, self.staging.tensor, self.resize_params.tensor, out, words=size // 4)

        h, w = image.shape[:2] if turn % 2 == 0 else image.shape[1::-1]
        params = resize_params(h, w, out_h, out_w, pad_top=pad_top, out_capacity=self.capacity, turn=turn)
        self._stage(image)
        self.resize_params.write(params)
        self._replay("resize", (out_h + 2 * pad_top) * out_w * 3, slot, record)

    def close(self) -> None:
        try:
            self.settle()
        except VulkanError as exc:  # a lost device: the copy no longer matters, the resources still do
            log.warning("image_copy_not_settled", error=str(exc))
        for rec in self._recordings.values():
            rec.close()
        self.staging.close()
        self.resize_params.close()
