"""Input images → the H×W×3 uint8 RGB pixels the OCR pipeline works on (DESIGN.md, "One request", step 1).

The reference is RapidOCR 1.4.4's ``rapidocr_onnxruntime/utils/load_image.py`` (``LoadImage``): for every input
that it handles sensibly we produce exactly its pixels, only in RGB order (it works in BGR after OpenCV; our GPU
kernels take RGB). Where it does something unusable we deviate, on purpose, and say so below. Pillow only; no
OpenCV here.

What each input becomes (``LoadImage`` = RapidOCR 1.4.4)

=====================  ============================================  =======================================
input                  vkocr                                         LoadImage
=====================  ============================================  =======================================
RGB                    as is                                         same (BGR)
L (gray)               gray replicated to 3 channels                 same
1 (bit)                ``convert("L")`` (0/255), replicated          same
LA / H×W×2 array       gray+alpha rule (``gray_alpha_rule``)        same
RGBA / H×W×4 array     RGBA rule (``rgba_rule``) — note: it         same
                       INVERTS any image whose visible pixels are
                       not all black, opaque ones included
16-bit RGB/RGBA/LA     Pillow keeps the high byte, then as above     same
PNG
P (palette)            palette colours (``convert("RGB")``)          palette *indices* used as gray levels
P with transparency,   ``convert("RGBA")`` then the RGBA rule        indices as gray / (index, alpha) pairs
PA
I;16 (16-bit gray)     high byte (``v >> 8``), as ``cv2.imread``     raw uint16 (its /255 normalisation then
                       and Pillow's own 16-bit RGB/RGBA/LA loaders   sees values up to 257)
                       do
I (32-bit int)         clipped to 0..65535, then ``v >> 8``          fails in ``cv2.cvtColor``
F (32-bit float)       the float rule: values are 0..255, rounded    raw float (its pipeline treats them as
                       half-to-even and clipped                      0..255)
CMYK, YCbCr, LAB, …    Pillow's ``convert("RGB")``                   raw channels taken as RGBA / RGB
other alpha modes      ``convert("RGBA")`` then the RGBA rule        varies
(RGBa, La)
EXIF orientation       applied (2..8); ``apply_exif=False``: not     never applied
=====================  ============================================  =======================================

Arrays: H×W and H×W×1 are gray; H×W×3 is RGB by default (``channel_order="bgr"`` for OpenCV-style arrays —
RapidOCR assumes BGR for every 3-channel array); H×W×4 is RGBA by default, BGRA with ``channel_order="bgr"``
(RapidOCR assumes RGBA for 4-channel arrays, whatever their origin). dtypes: uint8; uint16 (full 16-bit range,
``v >> 8`` as for 16-bit files); float16/32/64 holding **0..255** values (RapidOCR's convention: its
normalisation divides by 255 whatever the dtype), rounded half-to-even and clipped to 0..255, NaN/inf refused;
a float image whose values all lie in (0, 1] is refused ("unsupported", saying to multiply by 255) where
RapidOCR reads it as black and finds nothing. Anything else is refused.

One difference matters for RapidOCR parity: ``text_cls.jpg`` in the compatibility set carries EXIF orientation 3
on upright pixels, so with EXIF applied it is upside down (RapidOCR reads it upright and its classifier says 0°).
Pass ``apply_exif=False`` to reproduce RapidOCR exactly.
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO, Final, Literal

import numpy as np
import numpy.typing as npt
from PIL import Image, UnidentifiedImageError

from vkocr.agent.errors import ImageError
from vkocr.agent.ocr.pixel_rules import (
    RGBA_RULES,
    U8,
    RgbaRule,
    float_to_u8,
    gray_alpha_rule,
    gray_to_rgb,
    pil_to_rgb,
    u16_to_u8,
)

DEFAULT_MAX_PIXELS: Final = 40_000_000

# Pillow plugins we let parse untrusted bytes. Others (EPS runs Ghostscript, PSD, ICO, …) are refused with
# reason "unsupported". The JPEG plugin also opens multi-picture camera JPEGs (Pillow calls those "MPO").
ALLOWED_FORMATS: Final[tuple[str, ...]] = ("JPEG", "PNG", "BMP", "TIFF", "WEBP", "GIF", "PPM")

ChannelOrder = Literal["rgb", "bgr"]
ImageSource = str | os.PathLike[str] | bytes | bytearray | memoryview | npt.NDArray[np.generic] | Image.Image

_EXIF_ORIENTATION: Final = 0x0112
_TRANSPOSE: Final[dict[int, Image.Transpose]] = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}



def decode_image(
    source: ImageSource,
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    channel_order: ChannelOrder = "rgb",
    apply_exif: bool = True,
    copy: bool = True,
    rgba: str = "mask",
) -> U8:
    """Decode ``source`` to a new C-contiguous H×W×3 uint8 **RGB** array.

    ``source``: a path (``str`` or ``os.PathLike``), encoded bytes (``bytes``/``bytearray``/``memoryview``:
    JPEG, PNG, BMP, TIFF, WebP, GIF, PNM — see :data:`ALLOWED_FORMATS`), a decoded NumPy array, or a Pillow
    image. The module docstring lists what every mode/shape/dtype becomes and where that differs from
    RapidOCR 1.4.4.

    ``channel_order`` only concerns 3- and 4-channel **arrays**: ``"rgb"`` (default) means RGB/RGBA,
    ``"bgr"`` means BGR/BGRA (what OpenCV produces). **RapidOCR differs:** it takes every 3-channel array as
    BGR (and every 4-channel one as RGBA), so ``decode_image(a, channel_order="bgr")`` is what RapidOCR would
    make of an array ``a``. Files and bytes have a defined channel order and ignore this argument.

    ``apply_exif``: rotate/flip by the EXIF orientation tag (as ``ImageOps.exif_transpose``). RapidOCR 1.4.4
    does not; pass ``False`` for its exact pixels.

    ``max_pixels``: width × height above this is refused from the header, before any pixel is decoded.

    ``rgba``: how a colour image with alpha becomes RGB: ``"mask"``, RapidOCR 1.4.4's rule (``rgba_rule``), or
    ``"blend"``, RapidOCR 3.10's (``rgba_blend_rule``): the procedure's (agent/ocr/procedures.py).

    ``copy=False``: an array that already is C-contiguous H×W×3 uint8 RGB comes back itself, not copied (for a
    caller that is done with it before its owner can change it: the pipeline copies it into GPU staging).

    Raises :class:`vkocr.agent.errors.ImageError` with ``reason`` "not_found", "unreadable", "empty", "corrupt",
    "unsupported" or "too_large". An all-black image is not an error.
    """
    _check_arguments(max_pixels, channel_order)
    if rgba not in RGBA_RULES:
        raise ValueError(f"rgba must be one of {', '.join(RGBA_RULES)}, not {rgba!r}")
    rule = RGBA_RULES[rgba]
    if isinstance(source, np.ndarray):
        return _from_array(source, max_pixels, channel_order, copy, rule)
    if isinstance(source, Image.Image):
        return _from_pil(source, max_pixels, apply_exif, "image", rule)
    with _open(source, max_pixels) as (img, name):
        return _from_pil(img, max_pixels, apply_exif, name, rule)


def image_size(source: ImageSource, *, apply_exif: bool = True) -> tuple[int, int]:
    """``(width, height)`` of what :func:`decode_image` would return, read from the header only.

    EXIF orientations 5..8 swap the two when ``apply_exif``. For a PNG whose eXIf chunk follows the pixel data
    (rare), the orientation is only known after decoding and is not applied here. Errors as
    :func:`decode_image` (but no pixel limit).
    """
    if isinstance(source, np.ndarray):
        _check_array_shape(source)
        return int(source.shape[1]), int(source.shape[0])
    if isinstance(source, Image.Image):
        return _oriented_size(source, apply_exif, header_only=False)
    with _open(source, None) as (img, _name):
        return _oriented_size(img, apply_exif, header_only=True)


# --- files and bytes ----------------------------------------------------------------------------------------


def open_image_file(path: str | os.PathLike[str]) -> BinaryIO:
    """An image file opened for reading, or ImageError "not_found", "unreadable" or "empty" naming it."""
    name = f"image file {os.fspath(path)!r}"
    try:
        fp = open(path, "rb")  # noqa: SIM115 - the caller closes it
    except FileNotFoundError:
        raise ImageError("not_found", f"{name} does not exist") from None
    except IsADirectoryError:
        raise ImageError("unreadable", f"{name} is a directory") from None
    except OSError as e:
        raise ImageError("unreadable", f"{name} cannot be read: {e.strerror or e}") from None
    if os.fstat(fp.fileno()).st_size == 0:
        fp.close()
        raise ImageError("empty", f"{name} is empty (0 bytes)")
    return fp


def read_image_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of an image file (a client sends them undecoded), with open_image_file's errors."""
    with open_image_file(path) as fp:
        return fp.read()


@contextmanager
def _open(source: object, max_pixels: int | None) -> Iterator[tuple[Image.Image, str]]:
    """Open ``source`` with Pillow (header only), check its size, yield ``(image, name for messages)``."""
    fp: BinaryIO
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        if not data:
            raise ImageError("empty", "image data is empty (0 bytes)")
        fp, name = io.BytesIO(data), "image data"
    elif isinstance(source, str | os.PathLike):
        fp = open_image_file(source)
        name = f"image file {os.fspath(source)!r}"
    else:
        raise ImageError(
            "unsupported",
            f"cannot decode a {type(source).__name__}: pass a path, encoded bytes, a NumPy array or a PIL image",
        )
    with fp:
        img = _pil_open(fp, name)
        with img:
            if max_pixels is not None:
                _check_size(img.size, max_pixels, name)
            yield img, name


def _pil_open(fp: BinaryIO, name: str) -> Image.Image:
    try:
        return Image.open(fp, formats=_available_formats())
    except Image.DecompressionBombError as e:
        raise ImageError("too_large", f"{name} is too large: {e}") from None
    except UnidentifiedImageError:
        fp.seek(0)
        raise _unidentified(fp.read(64), name) from None
    except MemoryError:
        raise ImageError("too_large", f"{name}: out of memory reading the header") from None
    except Exception as e:  # noqa: BLE001 - Pillow plugins raise many types on hostile headers
        raise ImageError("corrupt", f"{name} has a corrupt header: {e}") from None


def _available_formats() -> list[str]:
    Image.init()
    return [fmt for fmt in ALLOWED_FORMATS if fmt in Image.OPEN]  # e.g. WEBP when Pillow lacks libwebp


def _unidentified(prefix: bytes, name: str) -> ImageError:
    """Why Pillow (restricted to ALLOWED_FORMATS) could not open data starting with ``prefix``."""
    dims = _header_dims(prefix)
    if dims is not None and 0 in dims:
        return ImageError("empty", f"{name} has a zero-size image ({dims[0]}×{dims[1]})")
    fmt = _sniff_format(prefix)
    if fmt is None:
        return ImageError("corrupt", f"{name} is not a recognised image ({', '.join(ALLOWED_FORMATS)})")
    if fmt in ALLOWED_FORMATS:
        return ImageError("corrupt", f"{name} looks like {fmt} but its header is corrupt")
    return ImageError(
        "unsupported", f"{name} is a {fmt} image; accepted formats are {', '.join(ALLOWED_FORMATS)}"
    )


def _header_dims(prefix: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG or BMP header (Pillow refuses zero sizes without saying so)."""
    if prefix.startswith(b"\x89PNG\r\n\x1a\n") and len(prefix) >= 24 and prefix[12:16] == b"IHDR":
        w, h = struct.unpack(">II", prefix[16:24])
        return int(w), int(h)
    if prefix.startswith(b"BM") and len(prefix) >= 26:
        (header_size,) = struct.unpack("<I", prefix[14:18])
        if header_size == 12:  # OS/2 BITMAPCOREHEADER
            w, h = struct.unpack("<HH", prefix[18:22])
        else:
            w, h = struct.unpack("<ii", prefix[18:26])
        return abs(int(w)), abs(int(h))
    return None


def _sniff_format(prefix: bytes) -> str | None:
    """The Pillow format whose magic-number test accepts ``prefix`` (no parsing, only the `accept` checks)."""
    Image.init()
    for fmt, (_factory, accept) in Image.OPEN.items():
        try:
            result = accept(prefix) if accept is not None else False
        except Exception:  # noqa: BLE001, S112 - a plugin's prefix test failing just means "not this one"
            continue
        if result and not isinstance(result, str):  # some return a str explaining a missing codec
            return fmt
    return None


def _check_size(size: tuple[int, int], max_pixels: int, name: str) -> None:
    w, h = size
    if w <= 0 or h <= 0:
        raise ImageError("empty", f"{name} has a zero-size image ({w}×{h})")
    if w * h > max_pixels:
        raise ImageError(
            "too_large", f"{name} is {w}×{h} = {w * h:,} pixels, more than the limit of {max_pixels:,}"
        )


def _orientation(img: Image.Image) -> int:
    try:
        value = img.getexif().get(_EXIF_ORIENTATION, 1)
    except Exception:  # noqa: BLE001 - a broken EXIF block must not make a good image undecodable; RapidOCR ignores EXIF
        return 1
    return value if isinstance(value, int) else 1


def _oriented_size(img: Image.Image, apply_exif: bool, *, header_only: bool) -> tuple[int, int]:
    w, h = img.size
    if not apply_exif or (header_only and img.format == "PNG" and "exif" not in img.info):
        return w, h  # PngImageFile.getexif() decodes the whole image to look for a late eXIf chunk
    return (h, w) if _orientation(img) in (5, 6, 7, 8) else (w, h)


def _from_pil(img: Image.Image, max_pixels: int, apply_exif: bool, name: str, rgba_rule: RgbaRule) -> U8:
    _check_size(img.size, max_pixels, name)
    try:
        img.load()
    except Image.DecompressionBombError as e:
        raise ImageError("too_large", f"{name} is too large: {e}") from None
    except MemoryError:
        raise ImageError("too_large", f"{name}: out of memory decoding {img.size[0]}×{img.size[1]}") from None
    except Exception as e:  # noqa: BLE001 - truncated/broken data: OSError, SyntaxError, EOFError, zlib.error…
        raise ImageError("corrupt", f"{name} is corrupt or truncated: {e}") from None
    if apply_exif:
        # Same pixels as ImageOps.exif_transpose, without its copy of unrotated images and its EXIF rewrite.
        method = _TRANSPOSE.get(_orientation(img))
        if method is not None:
            img = img.transpose(method)
    try:
        return pil_to_rgb(img, rgba_rule)
    except ImageError:
        raise
    except Exception as e:  # noqa: BLE001 - a mode Pillow cannot convert to RGB
        raise ImageError("unsupported", f"{name}: cannot convert mode {img.mode} to RGB: {e}") from None


# --- arrays -------------------------------------------------------------------------------------------------


def _check_array_shape(arr: npt.NDArray[np.generic]) -> None:
    if arr.ndim not in (2, 3):
        raise ImageError(
            "unsupported", f"array of shape {arr.shape}: expected H×W, H×W×1, H×W×2, H×W×3 or H×W×4"
        )
    if arr.ndim == 3 and arr.shape[2] not in (1, 2, 3, 4):
        raise ImageError(
            "unsupported", f"array of shape {arr.shape}: {arr.shape[2]} channels, expected 1 to 4"
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ImageError("empty", f"array of shape {arr.shape} has no pixels")


def _from_array(arr: npt.NDArray[np.generic], max_pixels: int, channel_order: ChannelOrder, copy: bool,
                rgba_rule: RgbaRule) -> U8:
    _check_array_shape(arr)
    _check_size((int(arr.shape[1]), int(arr.shape[0])), max_pixels, f"array of shape {arr.shape}")
    kind, itemsize = arr.dtype.kind, arr.dtype.itemsize
    a8: U8
    if kind == "u" and itemsize == 1:
        a8 = np.asarray(arr, dtype=np.uint8)
    elif kind == "u" and itemsize == 2:
        a8 = u16_to_u8(arr)
    elif kind == "f":
        a8 = float_to_u8(arr, f"array of shape {arr.shape}")
    else:
        raise ImageError(
            "unsupported",
            f"array dtype {arr.dtype}: expected uint8, uint16 (0..65535) or float16/32/64 (0..255)",
        )
    if a8.ndim == 2:
        return gray_to_rgb(a8)
    channels = a8.shape[2]
    if channels == 1:
        return gray_to_rgb(a8[..., 0])
    if channels == 2:
        return gray_alpha_rule(a8)
    if channel_order == "bgr":
        a8 = a8[..., [2, 1, 0, 3][:channels]]  # BGR(A) → RGB(A); fancy indexing copies
    if channels == 3:
        if copy and np.may_share_memory(a8, arr):
            return np.array(a8, dtype=np.uint8, order="C")  # never hand back (a view of) the caller's array
        return np.ascontiguousarray(a8)
    return rgba_rule(a8)


def _check_arguments(max_pixels: int, channel_order: str) -> None:
    if isinstance(max_pixels, bool) or not isinstance(max_pixels, int) or max_pixels <= 0:
        raise ValueError(f"max_pixels must be a positive int, not {max_pixels!r}")
    if channel_order not in ("rgb", "bgr"):
        raise ValueError(f"channel_order must be 'rgb' or 'bgr', not {channel_order!r}")
