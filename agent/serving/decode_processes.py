"""Decoding in processes of their own (experimental.decode_processes): the agent's other threads keep its GIL.

Pillow decodes a PNG or JPEG in chunks, and between chunks it needs the GIL. On the H200 host a 2 MP PNG took 32
ms to decode at 1 client and 45-55 ms at 16, and the GPU worker's own Python steps slowed beside the decode
threads (BENCHMARKS.md). Here each process decodes one image at a time with decode_image, exactly as a decode
thread would (the same pixels, the same ImageError).

Nothing large goes through a pipe (pickling a 4 MB PNG there took up to 25 ms): every calling thread owns a block
of shared memory, reused from call to call and grown when an image needs more, that carries the encoded bytes
in and the pixels back (each process keeps the blocks it has seen mapped, so a call costs no page faults); the
caller copies the pixels out, which NumPy does without the GIL. A process that dies (killed, out of memory) costs
its one request a decode on the calling thread; the pool is started again.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections import OrderedDict
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import shared_memory

import numpy as np

from vkocr.agent.errors import ImageError
from vkocr.agent.ocr.images import decode_image, image_size
from vkocr.log import get_logger

log = get_logger(__name__)

PIXELS_ALIGN = 64  # bytes: where the pixels start after the encoded image in a block
MAPPED_BLOCKS = 16  # blocks a decode process keeps mapped, the oldest unmapped first (a grown block's old one)

_mapped: OrderedDict[str, shared_memory.SharedMemory] = OrderedDict()  # in a decode process: blocks by name


def _block(name: str) -> shared_memory.SharedMemory:
    block = _mapped.get(name)
    if block is None:
        block = _mapped[name] = shared_memory.SharedMemory(name=name)
        while len(_mapped) > MAPPED_BLOCKS:
            _mapped.popitem(last=False)[1].close()
    _mapped.move_to_end(name)
    return block


def decode_in_block(name: str, size: int, max_pixels: int, apply_exif: bool, rgba: str
                    ) -> tuple[int, ...] | np.ndarray:
    """In a decode process: decode_image of the first `size` bytes of block `name`, its pixels written into the
    block after them; the image's shape, or the image itself when the block is too small for it."""
    block = _block(name)
    buf = block.buf
    assert buf is not None  # an open block has its buffer
    image = decode_image(bytes(buf[:size]), max_pixels=max_pixels, apply_exif=apply_exif, rgba=rgba, copy=False)
    start = pixels_offset(size)
    if start + image.nbytes > block.size:  # the header's size was not the decoded one (a late EXIF turn)
        return np.ascontiguousarray(image)
    view = np.ndarray(image.shape, np.uint8, buffer=buf, offset=start)
    view[...] = image
    del view  # the block cannot close while a view of it exists
    return tuple(image.shape)


def pixels_offset(encoded_bytes: int) -> int:
    return -(-encoded_bytes // PIXELS_ALIGN) * PIXELS_ALIGN


def ready() -> None:
    """A no-op a new process runs once: it has imported what decoding needs before the first request."""


class DecodeProcesses:
    """`count` decode processes (spawned: nothing of the agent's threads or Vulkan state is inherited)."""

    def __init__(self, count: int) -> None:
        if count < 1:
            raise ValueError(f"decode processes: at least 1, got {count}")
        self.count = count
        self._lock = threading.Lock()
        self._blocks: list[shared_memory.SharedMemory] = []  # every calling thread's, freed by close()
        self._local = threading.local()
        self._pool = self._start()

    def _start(self) -> ProcessPoolExecutor:
        pool = ProcessPoolExecutor(self.count, mp_context=multiprocessing.get_context("spawn"))
        for _ in range(self.count):  # every process starts now, not on a request's time
            pool.submit(ready)
        return pool

    def decode(self, data: bytes, *, max_pixels: int, apply_exif: bool, rgba: str) -> np.ndarray:
        """decode_image(data, …) in a decode process: a new C-contiguous H×W×3 uint8 RGB array, or its
        ImageError."""
        block = self._block_for(data, max_pixels, apply_exif)
        buf = block.buf
        assert buf is not None  # an open block has its buffer
        buf[:len(data)] = data
        pool = self._pool
        try:
            shape = pool.submit(decode_in_block, block.name, len(data), max_pixels, apply_exif, rgba).result()
        except BrokenProcessPool as exc:
            self._restart(pool, exc)
            return decode_image(data, max_pixels=max_pixels, apply_exif=apply_exif, rgba=rgba)
        if isinstance(shape, np.ndarray):
            return shape
        view = np.ndarray(shape, np.uint8, buffer=buf, offset=pixels_offset(len(data)))
        image = view.copy()
        del view
        return image

    def _block_for(self, data: bytes, max_pixels: int, apply_exif: bool) -> shared_memory.SharedMemory:
        """The calling thread's block, grown to hold `data` and, by its header, the pixels it decodes to."""
        try:
            width, height = image_size(data, apply_exif=apply_exif)
            pixels = 3 * width * height if width * height <= max_pixels else 0  # too large: refused unread
        except ImageError:
            pixels = 0  # the process says what is wrong with it
        need = pixels_offset(len(data)) + pixels
        block: shared_memory.SharedMemory | None = getattr(self._local, "block", None)
        if block is None or block.size < need:
            # twice the old size at least: a thread's block grows a few times, not with every larger image
            grown = shared_memory.SharedMemory(create=True, size=max(need, 2 * block.size if block else 1 << 20))
            with self._lock:
                self._blocks.append(grown)
                if block is not None:
                    self._blocks.remove(block)
                    _free(block)
            self._local.block = block = grown
        return block

    def _restart(self, broken: ProcessPoolExecutor, exc: BaseException) -> None:
        with self._lock:
            if self._pool is broken:  # not already restarted by another request's thread
                log.warning("decode_processes_restarted", processes=self.count, error=str(exc))
                self._pool = self._start()
        broken.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            blocks, self._blocks = self._blocks, []
        for block in blocks:
            _free(block)


def _free(block: shared_memory.SharedMemory) -> None:
    block.close()
    block.unlink()
