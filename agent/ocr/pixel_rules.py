"""Decoded pixels of every mode and dtype → RGB8, as RapidOCR 1.4.4's LoadImage makes them (agent/ocr/images.py
has the table of what each input becomes, and where we deviate on purpose)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from PIL import Image

from vkocr.agent.errors import ImageError

U8 = npt.NDArray[np.uint8]


def pil_to_rgb(img: Image.Image, rgba_rule: RgbaRule) -> U8:
    mode = img.mode
    if mode == "RGB":
        return np.ascontiguousarray(np.asarray(img, dtype=np.uint8))
    if mode == "L":
        return gray_to_rgb(np.asarray(img, dtype=np.uint8))
    if mode == "1":
        # LoadImage.img_to_ndarray: mode "1" → convert("L") (0/255).
        return gray_to_rgb(np.asarray(img.convert("L"), dtype=np.uint8))
    if mode == "LA":
        return gray_alpha_rule(np.asarray(img, dtype=np.uint8))
    if mode == "RGBA":
        return rgba_rule(np.asarray(img, dtype=np.uint8))
    if mode.startswith("I;16"):  # I;16, I;16L, I;16B, I;16N: any byte order, numpy knows it
        return gray_to_rgb(u16_to_u8(np.asarray(img)))
    if mode == "I":
        return gray_to_rgb(u16_to_u8(np.clip(np.asarray(img), 0, 65535)))
    if mode == "F":
        return gray_to_rgb(float_to_u8(np.asarray(img), "image"))
    if mode in ("P", "PA"):
        # Deviation: LoadImage feeds the palette *indices* to OCR as gray levels. We use the colours.
        if mode == "PA" or "transparency" in img.info:
            return rgba_rule(np.asarray(img.convert("RGBA"), dtype=np.uint8))
        return np.ascontiguousarray(np.asarray(img.convert("RGB"), dtype=np.uint8))
    if "A" in img.getbands() or "a" in img.getbands():  # RGBa, La (premultiplied), …
        return rgba_rule(np.asarray(img.convert("RGBA"), dtype=np.uint8))
    # CMYK, YCbCr, LAB, HSV, RGBX, …: Pillow's conversion (LoadImage would take the raw channels as RGB(A)).
    return np.ascontiguousarray(np.asarray(img.convert("RGB"), dtype=np.uint8))


# --- pixel rules --------------------------------------------------------------------------------------------


def gray_to_rgb(gray: U8) -> U8:
    return np.repeat(gray[:, :, None], 3, axis=2)  # cv2.COLOR_GRAY2BGR: the same value in every channel


def u16_to_u8(a: npt.NDArray[np.generic]) -> U8:
    # 16 → 8 bits keeps the high byte: what cv2.imread(IMREAD_COLOR) does to 16-bit PNG/TIFF and what Pillow's
    # own PNG loader does for 16-bit RGB/RGBA/LA (rawmodes RGB;16B etc.).
    return (np.asarray(a).astype(np.uint16) >> 8).astype(np.uint8)


def float_to_u8(a: npt.NDArray[np.generic], name: str) -> U8:
    f = np.asarray(a, dtype=np.float64)
    if not np.isfinite(f).all():
        raise ImageError("unsupported", f"{name} contains NaN or infinite values")
    # Floats are 0..255 (RapidOCR's convention); rint is round-half-to-even like OpenCV's saturate_cast. One
    # whose values all lie in (0, 1] is a 0..1 image (scikit-image's, a normalised tensor's): taken as 0..255 it
    # is black and reads no line, so it is refused with what to do, not read as nothing.
    top = float(f.max()) if f.size else 0.0
    if 0.0 < top <= 1.0 and float(f.min()) >= 0.0:
        raise ImageError("unsupported", f"{name} holds floats in 0..1, but float pixels are 0..255 (as "
                         "RapidOCR reads them): multiply by 255, or pass uint8")
    return np.rint(np.clip(f, 0.0, 255.0)).astype(np.uint8)


def gray_alpha_rule(la: U8) -> U8:
    """Gray+alpha → RGB, exactly as RapidOCR 1.4.4 ``LoadImage.cvt_two_to_three``.

    It computes ``cv2.add(cv2.bitwise_and(gray, gray, mask=alpha), cv2.bitwise_not(alpha))`` per channel:
    gray where alpha ≠ 0 (0 elsewhere) plus 255 − alpha, saturated at 255. Opaque pixels keep their gray,
    transparent ones become white, and partial alpha only ever lightens — it is not alpha blending.
    """
    gray = la[..., 0].astype(np.uint16)
    alpha = la[..., 1]
    masked = np.where(alpha != 0, gray, 0)
    out = np.minimum(masked + (255 - alpha.astype(np.uint16)), 255).astype(np.uint8)
    return gray_to_rgb(out)


def rgba_rule(rgba: U8) -> U8:
    """RGBA → RGB, exactly as RapidOCR 1.4.4 ``LoadImage.cvt_four_to_three``.

    It keeps the colour where alpha ≠ 0 and zeroes it elsewhere
    (``new_img = cv2.bitwise_and(new_img, new_img, mask=a)``), then looks at ``np.mean(new_img)``:

    * mean ≤ 0, i.e. every visible pixel is pure black (black text on a transparent background): the result is
      ``new_img + (255 − alpha)`` = 255 − alpha in every channel — black text on white;
    * otherwise: ``cv2.bitwise_not(new_img)`` — the image is **inverted**: transparent pixels become white,
      visible ones 255 − colour. White text on transparent becomes black on white; but an ordinary opaque RGBA
      image (alpha 255 everywhere) also comes out as its negative. We reproduce that for parity.
    """
    rgb = rgba[..., :3]
    alpha = rgba[..., 3]
    masked = np.where((alpha != 0)[..., None], rgb, np.uint8(0))
    if not masked.any():
        return gray_to_rgb(255 - alpha)
    return np.ascontiguousarray(255 - masked, dtype=np.uint8)


def rgba_blend_rule(rgba: U8) -> U8:
    """RGBA → RGB, exactly as RapidOCR 3.10 ``LoadImage.cvt_four_to_three``: alpha blending over white when
    the opaque pixels (alpha > 0) are dark on average (luminance 0.299 R + 0.587 G + 0.114 B below 128, or no
    pixel is opaque), else over black; in float32, truncated to uint8."""
    rgb = rgba[..., :3]
    alpha = rgba[..., 3]
    opaque = rgb[alpha > 0]
    if opaque.size == 0:
        background = 255
    else:
        luminance = 0.299 * opaque[:, 0] + 0.587 * opaque[:, 1] + 0.114 * opaque[:, 2]
        background = 255 if np.mean(luminance) < 128 else 0
    weight = alpha.astype(np.float32) / np.float32(255.0)
    ground = np.full_like(rgb, background, dtype=np.uint8).astype(np.float32)
    blended = rgb.astype(np.float32) * weight[..., None] + ground * (np.float32(1.0) - weight)[..., None]
    return np.ascontiguousarray(blended.astype(np.uint8))


RgbaRule = Callable[[U8], U8]
RGBA_RULES: dict[str, RgbaRule] = {"mask": rgba_rule, "blend": rgba_blend_rule}
