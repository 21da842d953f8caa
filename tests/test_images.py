"""vkocr.agent.ocr.images: decoding matches RapidOCR 1.4.4's LoadImage pixel for pixel (in RGB), deviations are
deliberate.

RapidOCR (and the OpenCV it pulls in) are test-only references; product code uses Pillow alone.
"""

from __future__ import annotations

import io
import pickle
import secrets
import struct
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, ImageFile, ImageOps

from tests.paths import COMPAT_IMAGES
from vkocr.agent.errors import IMAGE_ERROR_REASONS, ImageError
from vkocr.agent.ocr.images import DEFAULT_MAX_PIXELS, ChannelOrder, decode_image, image_size
from vkocr.errors import VkocrError

load_image = pytest.importorskip("rapidocr_onnxruntime.utils.load_image", reason="RapidOCR 1.4.4 (test-only)")
cv2 = pytest.importorskip("cv2", reason="opencv-python (test-only, pulled in by rapidocr-onnxruntime)")

COMPAT = COMPAT_IMAGES

U8 = npt.NDArray[np.uint8]


def rapid(source: object) -> npt.NDArray[np.generic]:
    """What RapidOCR 1.4.4 feeds its pipeline, converted from its BGR to RGB."""
    out = load_image.LoadImage()(source)
    return np.ascontiguousarray(out[..., ::-1])


def encode(img: Image.Image, fmt: str, **kwargs: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kwargs)
    return buf.getvalue()


def assert_rgb8(out: U8, h: int, w: int) -> None:
    assert out.dtype == np.uint8
    assert out.shape == (h, w, 3)
    assert out.flags.c_contiguous


@pytest.fixture
def rng() -> Iterator[np.random.Generator]:
    seed = secrets.randbits(64)
    print(f"rng seed {seed}")  # shown by pytest when the test fails
    yield np.random.default_rng(seed)


# --- random images of every mode ----------------------------------------------------------------------------

H, W = 23, 37  # odd, non-square: catches transposes and off-by-ones


def _u8(rng: np.random.Generator, *shape: int) -> U8:
    return rng.integers(0, 256, shape, dtype=np.uint8)


def _palette_image(rng: np.random.Generator) -> Image.Image:
    img = Image.frombytes("P", (W, H), _u8(rng, H, W).tobytes())
    img.putpalette(_u8(rng, 768).tobytes())
    return img


def make(mode: str, rng: np.random.Generator) -> tuple[Image.Image, dict[str, object]]:
    """A random image of ``mode`` plus save() keyword arguments."""
    if mode == "1":
        return Image.fromarray(rng.integers(0, 2, (H, W)).astype(bool)), {}
    if mode in ("L", "LA", "RGB", "RGBA"):
        channels = {"L": (), "LA": (2,), "RGB": (3,), "RGBA": (4,)}[mode]
        return Image.fromarray(_u8(rng, H, W, *channels)), {}
    if mode == "P":
        return _palette_image(rng), {}
    if mode == "P+tRNS":  # per-index alpha (PNG tRNS chunk)
        return _palette_image(rng), {"transparency": _u8(rng, 256).tobytes()}
    if mode == "P+index":  # one transparent index (GIF)
        img = _palette_image(rng)
        return img, {"transparency": int(np.asarray(img)[0, 0])}
    if mode == "PA":
        return Image.frombytes("PA", (W, H), _u8(rng, H, W, 2).tobytes()), {}
    if mode == "I;16":
        return Image.fromarray(rng.integers(0, 65536, (H, W), dtype=np.uint16)), {}
    if mode == "I":
        return Image.fromarray(rng.integers(-5000, 80000, (H, W), dtype=np.int32)), {}
    if mode == "F":
        return Image.fromarray((rng.random((H, W)) * 300 - 20).astype(np.float32)), {}
    if mode in ("CMYK", "YCbCr"):
        return Image.frombytes(
            mode, (W, H), _u8(rng, H, W, len(mode) - 1 if mode == "YCbCr" else 4).tobytes()
        ), {}
    raise AssertionError(mode)


def expected(data: bytes) -> npt.NDArray[np.generic]:
    """The reference pixels for encoded ``data``: RapidOCR's, or the documented deviation built on it."""
    img = Image.open(io.BytesIO(data))
    mode = img.mode
    if mode in ("1", "L", "LA", "RGB", "RGBA"):
        return rapid(data)  # identical to RapidOCR
    if mode in ("P", "PA"):
        # RapidOCR would read palette indices as gray; we use the colours, i.e. what it does for the
        # RGB/RGBA equivalent (LoadImage accepts PIL images).
        has_alpha = mode == "PA" or "transparency" in img.info
        return rapid(img.convert("RGBA" if has_alpha else "RGB"))
    if mode == "I;16":
        return rapid(data).astype(np.uint16) >> 8  # RapidOCR passes uint16 through; we keep the high byte
    if mode == "I":
        gray = np.clip(np.asarray(img), 0, 65535).astype(np.uint16) >> 8  # RapidOCR fails on int32
        return np.repeat(gray[..., None], 3, axis=2)
    if mode == "F":
        return np.rint(np.clip(rapid(data), 0, 255))  # RapidOCR passes floats through, as 0..255
    if mode in ("CMYK", "YCbCr"):
        return rapid(img.convert("RGB"))  # RapidOCR would take the raw channels as RGBA / RGB
    raise AssertionError(f"no reference for mode {mode}")


FORMAT_CASES = [
    # (format, mode made, mode Pillow reads back, extra save kwargs)
    ("PNG", "1", "1", {}),
    ("PNG", "L", "L", {}),
    ("PNG", "LA", "LA", {}),
    ("PNG", "RGB", "RGB", {}),
    ("PNG", "RGBA", "RGBA", {}),
    ("PNG", "P", "P", {}),
    ("PNG", "P+tRNS", "P", {}),
    ("PNG", "I;16", "I;16", {}),
    ("JPEG", "L", "L", {"quality": 90}),
    ("JPEG", "RGB", "RGB", {"quality": 90}),
    ("JPEG", "CMYK", "CMYK", {"quality": 90}),
    ("BMP", "1", "1", {}),
    ("BMP", "L", "L", {}),
    ("BMP", "P", "P", {}),
    ("BMP", "RGB", "RGB", {}),
    ("TIFF", "1", "1", {}),
    ("TIFF", "L", "L", {}),
    ("TIFF", "LA", "LA", {}),
    ("TIFF", "P", "P", {}),
    ("TIFF", "PA", "PA", {}),
    ("TIFF", "RGB", "RGB", {"compression": "tiff_lzw"}),
    ("TIFF", "RGBA", "RGBA", {}),
    ("TIFF", "CMYK", "CMYK", {}),
    ("TIFF", "YCbCr", "YCbCr", {}),
    ("TIFF", "I;16", "I;16", {}),
    ("TIFF", "I", "I", {}),
    ("TIFF", "F", "F", {}),
    ("WEBP", "RGB", "RGB", {"lossless": True}),
    ("WEBP", "RGBA", "RGBA", {"lossless": True, "exact": True}),
    ("WEBP", "RGB", "RGB", {"quality": 80}),
    ("GIF", "P", "P", {}),
    ("GIF", "P+index", "P", {}),
    ("GIF", "L", "P", {}),
    ("PPM", "1", "1", {}),
    ("PPM", "L", "L", {}),
    ("PPM", "RGB", "RGB", {}),
    ("PPM", "I;16", "I", {}),  # 16-bit PGM
]


@pytest.mark.parametrize(
    ("fmt", "mode", "read_mode", "kwargs"),
    FORMAT_CASES,
    ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(FORMAT_CASES)],
)
def test_formats_and_modes_match_reference(
    fmt: str, mode: str, read_mode: str, kwargs: dict[str, object], rng: np.random.Generator, tmp_path: Path
) -> None:
    img, save_kwargs = make(mode, rng)
    data = encode(img, fmt, **save_kwargs, **kwargs)
    got_mode = Image.open(io.BytesIO(data)).mode
    if got_mode != read_mode:  # the case must exercise that mode; some Pillow builds decode it to another
        import PIL

        pytest.skip(f"this Pillow ({PIL.__version__}) reads {fmt} {mode} as {got_mode}, not {read_mode}")
    path = tmp_path / f"image.{fmt.lower()}"
    path.write_bytes(data)
    want = expected(data)
    for source in (data, path, str(path), bytearray(data), memoryview(data)):
        out = decode_image(source)
        assert_rgb8(out, H, W)
        np.testing.assert_array_equal(out, want)
    assert image_size(data) == (W, H)


def test_palette_is_a_deliberate_deviation(rng: np.random.Generator) -> None:
    """RapidOCR turns a palette image into its index plane read as gray; we decode the colours."""
    img = _palette_image(rng)
    data = encode(img, "PNG")
    indices = np.asarray(img)
    np.testing.assert_array_equal(rapid(data), np.repeat(indices[..., None], 3, axis=2))
    np.testing.assert_array_equal(decode_image(data), np.asarray(img.convert("RGB")))


def test_palette_with_transparency_equals_its_rgba_twin(rng: np.random.Generator) -> None:
    img, kw = make("P+tRNS", rng)
    data = encode(img, "PNG", **kw)
    twin = encode(Image.open(io.BytesIO(data)).convert("RGBA"), "PNG")
    np.testing.assert_array_equal(decode_image(data), decode_image(twin))


@pytest.mark.parametrize("fmt", ["PNG", "TIFF", "PPM"])
def test_16_bit_gray_keeps_the_high_byte_like_cv2_imread(
    fmt: str, rng: np.random.Generator, tmp_path: Path
) -> None:
    gray16 = rng.integers(0, 65536, (H, W), dtype=np.uint16)
    path = tmp_path / f"gray16.{fmt.lower()}"
    Image.fromarray(gray16).save(path, fmt)
    out = decode_image(path)
    np.testing.assert_array_equal(out, np.repeat((gray16 >> 8).astype(np.uint8)[..., None], 3, axis=2))
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    np.testing.assert_array_equal(out, bgr[..., ::-1])


def test_16_bit_rgb_png_matches_rapidocr_and_cv2(rng: np.random.Generator, tmp_path: Path) -> None:
    rgb16 = rng.integers(0, 65536, (H, W, 3), dtype=np.uint16)
    path = tmp_path / "rgb16.png"
    cv2.imwrite(str(path), np.ascontiguousarray(rgb16[..., ::-1]))
    out = decode_image(path)
    np.testing.assert_array_equal(out, rapid(path))  # Pillow reads 48-bit PNG as RGB (high bytes)
    np.testing.assert_array_equal(out, (rgb16 >> 8).astype(np.uint8))
    np.testing.assert_array_equal(out, cv2.imread(str(path), cv2.IMREAD_COLOR)[..., ::-1])


# --- the RGBA and gray+alpha rules --------------------------------------------------------------------------


def _rgba_png(rgb: U8, alpha: U8) -> bytes:
    return encode(Image.fromarray(np.dstack([rgb, alpha])), "PNG")


def test_black_text_on_transparent_becomes_black_on_white(rng: np.random.Generator) -> None:
    alpha = np.zeros((H, W), np.uint8)
    alpha[5:15, 4:30] = rng.integers(1, 256, (10, 26), dtype=np.uint8)  # the "text", with soft edges
    rgb = _u8(rng, H, W, 3)
    rgb[alpha != 0] = 0  # visible pixels are pure black; hidden ones hold any colour
    data = _rgba_png(rgb, alpha)
    out = decode_image(data)
    np.testing.assert_array_equal(out, rapid(data))
    np.testing.assert_array_equal(out, np.repeat((255 - alpha)[..., None], 3, axis=2))


def test_white_text_on_transparent_becomes_black_on_white(rng: np.random.Generator) -> None:
    alpha = np.zeros((H, W), np.uint8)
    alpha[5:15, 4:30] = 255
    rgb = np.zeros((H, W, 3), np.uint8)
    rgb[alpha != 0] = 255
    data = _rgba_png(rgb, alpha)
    out = decode_image(data)
    np.testing.assert_array_equal(out, rapid(data))
    np.testing.assert_array_equal(out, np.repeat((255 - alpha)[..., None], 3, axis=2))


def test_opaque_rgba_is_inverted_like_rapidocr(rng: np.random.Generator) -> None:
    """RapidOCR's rule inverts every RGBA image whose visible pixels are not all black, opaque ones too."""
    rgb = _u8(rng, H, W, 3)
    data = _rgba_png(rgb, np.full((H, W), 255, np.uint8))
    out = decode_image(data)
    np.testing.assert_array_equal(out, rapid(data))
    np.testing.assert_array_equal(out, 255 - rgb)


def test_fully_transparent_rgba_is_white(rng: np.random.Generator) -> None:
    data = _rgba_png(_u8(rng, H, W, 3), np.zeros((H, W), np.uint8))
    out = decode_image(data)
    np.testing.assert_array_equal(out, rapid(data))
    assert (out == 255).all()


def test_gray_alpha_rule(rng: np.random.Generator) -> None:
    la = _u8(rng, H, W, 2)
    la[0, :5, 1] = [0, 1, 128, 254, 255]
    out = decode_image(la)
    np.testing.assert_array_equal(out, rapid(la))
    gray, alpha = la[..., 0].astype(int), la[..., 1].astype(int)
    want = np.minimum(np.where(alpha != 0, gray, 0) + 255 - alpha, 255).astype(np.uint8)
    np.testing.assert_array_equal(out[..., 1], want)


# --- arrays -------------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    h=st.integers(1, 40),
    w=st.integers(1, 40),
    channels=st.sampled_from([None, 1, 2, 3, 4]),
    black_visible=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_uint8_arrays_match_rapidocr(
    h: int, w: int, channels: int | None, black_visible: bool, seed: int
) -> None:
    r = np.random.default_rng(seed)
    arr = r.integers(0, 256, (h, w) if channels is None else (h, w, channels), dtype=np.uint8)
    if channels == 4 and black_visible:
        arr[..., :3][arr[..., 3] != 0] = 0  # the other branch of the RGBA rule
    # RapidOCR takes 3-channel arrays as BGR and 4-channel ones as RGBA.
    order: ChannelOrder = "bgr" if channels == 3 else "rgb"
    out = decode_image(arr, channel_order=order)
    assert_rgb8(out, h, w)
    np.testing.assert_array_equal(out, rapid(arr))


def test_three_channel_arrays_default_to_rgb(rng: np.random.Generator) -> None:
    arr = _u8(rng, H, W, 3)
    np.testing.assert_array_equal(decode_image(arr), arr)
    np.testing.assert_array_equal(decode_image(arr, channel_order="bgr"), arr[..., ::-1])
    np.testing.assert_array_equal(
        decode_image(arr[..., ::-1], channel_order="bgr"), rapid(arr[..., ::-1].copy())
    )


def test_bgra_arrays(rng: np.random.Generator) -> None:
    rgba = _u8(rng, H, W, 4)
    bgra = rgba[..., [2, 1, 0, 3]]
    np.testing.assert_array_equal(decode_image(bgra, channel_order="bgr"), decode_image(rgba))
    np.testing.assert_array_equal(decode_image(rgba), rapid(rgba))


@pytest.mark.parametrize("shape", [(H, W), (H, W, 1), (H, W, 2), (H, W, 3), (H, W, 4)])
def test_uint16_arrays_use_the_high_byte(shape: tuple[int, ...], rng: np.random.Generator) -> None:
    arr16 = rng.integers(0, 65536, shape, dtype=np.uint16)
    np.testing.assert_array_equal(decode_image(arr16), decode_image((arr16 >> 8).astype(np.uint8)))
    np.testing.assert_array_equal(decode_image(arr16.astype(">u2")), decode_image(arr16))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(H, W), (H, W, 2), (H, W, 3), (H, W, 4)])
def test_float_arrays_are_0_to_255(shape: tuple[int, ...], dtype: type, rng: np.random.Generator) -> None:
    values: npt.NDArray[np.generic] = rng.integers(0, 256, shape).astype(dtype)
    np.testing.assert_array_equal(decode_image(values), decode_image(values.astype(np.uint8)))
    # fractions round half to even, out-of-range values clip
    f: npt.NDArray[np.generic] = rng.uniform(-40, 300, shape).astype(dtype)
    f.flat[:4] = [0.5, 1.5, 254.5, 255.49]
    want = np.rint(np.clip(f.astype(np.float64), 0, 255)).astype(np.uint8)
    np.testing.assert_array_equal(decode_image(f), decode_image(want))


def test_float_matches_rapidocr_on_integral_values(rng: np.random.Generator) -> None:
    f = rng.integers(0, 256, (H, W, 3)).astype(np.float32)
    np.testing.assert_array_equal(decode_image(f, channel_order="bgr"), rapid(f))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_float_in_unit_range_is_refused_saying_what_to_do(dtype: type, rng: np.random.Generator) -> None:
    """Floats are 0..255 like RapidOCR, where a [0, 1] image is black and reads no line: refused instead."""
    unit = rng.uniform(0.0, 1.0, (H, W, 3)).astype(dtype)
    with pytest.raises(ImageError, match="multiply by 255") as e:
        decode_image(unit)
    assert e.value.reason == "unsupported"
    assert decode_image(unit * 255).shape == (H, W, 3)  # what the message says to do
    assert (decode_image(np.zeros((4, 4), dtype)) == 0).all()  # black (no value above 0) is an image still


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_floats_are_refused(bad: float) -> None:
    arr = np.zeros((4, 4, 3), np.float32)
    arr[1, 2, 0] = bad
    with pytest.raises(ImageError) as e:
        decode_image(arr)
    assert e.value.reason == "unsupported"
    assert "NaN" in str(e.value)


@pytest.mark.parametrize(
    "dtype", [np.int8, np.int16, np.int32, np.int64, np.uint32, np.uint64, np.bool_, np.complex64, object]
)
def test_other_dtypes_are_refused(dtype: type) -> None:
    with pytest.raises(ImageError) as e:
        decode_image(np.zeros((4, 5, 3), dtype=dtype))
    assert e.value.reason == "unsupported"
    assert "dtype" in str(e.value)


@pytest.mark.parametrize("shape", [(7,), (2, 3, 4, 3), (4, 5, 5), (4, 5, 0), ()])
def test_other_shapes_are_refused(shape: tuple[int, ...]) -> None:
    with pytest.raises(ImageError) as e:
        decode_image(np.zeros(shape, np.uint8))
    assert e.value.reason == "unsupported"
    assert "shape" in str(e.value)


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 0, 3), (4, 0, 4)])
def test_zero_size_arrays_are_empty(shape: tuple[int, ...]) -> None:
    with pytest.raises(ImageError) as e:
        decode_image(np.zeros(shape, np.uint8))
    assert e.value.reason == "empty"


def test_arrays_over_the_pixel_limit_are_refused() -> None:
    arr = np.zeros((100, 100, 3), np.uint8)
    assert decode_image(arr, max_pixels=10_000).shape == (100, 100, 3)
    with pytest.raises(ImageError) as e:
        decode_image(arr, max_pixels=9_999)
    assert e.value.reason == "too_large"


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a[::2, ::3],
        lambda a: a[::-1, :, :],
        lambda a: a.transpose(1, 0, 2),
        lambda a: np.asfortranarray(a),
        lambda a: a,
    ],
)
@pytest.mark.parametrize("order", ["rgb", "bgr"])
def test_output_is_a_fresh_contiguous_array(
    view: Callable[[U8], U8], order: ChannelOrder, rng: np.random.Generator
) -> None:
    base = _u8(rng, H, W, 3)
    arr = view(base)
    want = np.array(arr[..., ::-1] if order == "bgr" else arr)
    out = decode_image(arr, channel_order=order)
    assert_rgb8(out, arr.shape[0], arr.shape[1])
    np.testing.assert_array_equal(out, want)
    assert not np.shares_memory(out, base)
    base[...] = 0  # the caller reusing its buffer does not change our result
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("view", [lambda a: a, lambda a: a[::2, ::3], lambda a: a[..., ::-1]])
def test_copy_false_hands_back_only_a_ready_array_itself(view: Callable[[U8], U8], rng: np.random.Generator) -> None:
    """copy=False skips the copy of an array that is already C-contiguous H×W×3 uint8 RGB (the pipeline copies
    it into GPU staging itself); any other array still becomes a new one, with the same pixels either way."""
    arr = view(_u8(rng, H, W, 3))
    out = decode_image(arr, copy=False)
    assert_rgb8(out, arr.shape[0], arr.shape[1])
    np.testing.assert_array_equal(out, arr)
    assert (out is arr) == arr.flags.c_contiguous


def test_all_black_decodes_fine() -> None:
    black = np.zeros((640, 640, 3), np.uint8)
    np.testing.assert_array_equal(decode_image(black), black)
    np.testing.assert_array_equal(decode_image(encode(Image.fromarray(black), "PNG")), black)


def test_pil_image_input(rng: np.random.Generator) -> None:
    img = Image.fromarray(_u8(rng, H, W, 3))
    np.testing.assert_array_equal(decode_image(img), np.asarray(img))
    la = Image.fromarray(_u8(rng, H, W, 2))
    np.testing.assert_array_equal(decode_image(la), rapid(la))


# --- EXIF orientation ---------------------------------------------------------------------------------------

# What each EXIF orientation asks a viewer to do to the stored pixels (TIFF/EXIF spec).
ORIENT: dict[int, Callable[[U8], U8]] = {
    1: lambda a: a,
    2: lambda a: a[:, ::-1],  # mirror horizontally
    3: lambda a: a[::-1, ::-1],  # rotate 180°
    4: lambda a: a[::-1],  # mirror vertically
    5: lambda a: a.transpose(1, 0, 2),  # transpose (mirror about the main diagonal)
    6: lambda a: np.rot90(a, -1),  # rotate 90° clockwise
    7: lambda a: a[::-1, ::-1].transpose(1, 0, 2),  # transverse
    8: lambda a: np.rot90(a, 1),  # rotate 90° counter-clockwise
}


def _exif(orientation: int) -> Image.Exif:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_jpeg(orientation: int, rng: np.random.Generator) -> None:
    img = Image.fromarray(np.kron(_u8(rng, 4, 6, 3), np.ones((8, 8, 1), np.uint8)))  # 32×48 blocks
    data = encode(img, "JPEG", exif=_exif(orientation), quality=95)
    stored = decode_image(data, apply_exif=False)
    np.testing.assert_array_equal(stored, rapid(data))  # RapidOCR 1.4.4 ignores EXIF orientation
    out = decode_image(data)
    np.testing.assert_array_equal(out, ORIENT[orientation](stored))
    np.testing.assert_array_equal(out, np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(data)))))
    assert image_size(data) == (out.shape[1], out.shape[0])
    assert image_size(data, apply_exif=False) == (48, 32)


def test_exif_rotation_is_really_a_rotation() -> None:
    """A lossless check of the direction: orientation 6 means "rotate 90° clockwise to view"."""
    stored = np.zeros((2, 3, 3), np.uint8)
    stored[0, 0] = (255, 0, 0)  # red top-left
    data = encode(Image.fromarray(stored), "PNG", exif=_exif(6))
    out = decode_image(data)
    assert out.shape == (3, 2, 3)
    assert tuple(out[0, 1]) == (255, 0, 0)  # now top-right
    assert image_size(data) == (2, 3)


@pytest.mark.filterwarnings("ignore:Corrupt EXIF data")
def test_broken_exif_is_ignored(rng: np.random.Generator) -> None:
    img = Image.fromarray(_u8(rng, H, W, 3))
    data = encode(img, "PNG", exif=b"Exif\x00\x00II*\x00\xff\xff\xff\x7fgarbage")
    np.testing.assert_array_equal(decode_image(data), np.asarray(img))


# --- RapidOCR's own test images -----------------------------------------------------------------------------

COMPAT_IMAGES = [
    "black_font_color_transparent.png",
    "ch_en_num.jpg",
    "issue_170.png",
    "short.png",
    "test_letterbox_like.jpg",
    "test_without_det.jpg",
    "text_cls.jpg",
    "text_rec.jpg",
    "text_vertical_words.png",
    "white_font_color_transparent.png",
]


@pytest.mark.compat
@pytest.mark.parametrize("name", COMPAT_IMAGES)
def test_compat_images_equal_rapidocr(name: str) -> None:
    path = COMPAT / name
    want = rapid(path)
    np.testing.assert_array_equal(decode_image(path, apply_exif=False), want)
    np.testing.assert_array_equal(decode_image(path.read_bytes(), apply_exif=False), want)
    out = decode_image(path)
    if name == "text_cls.jpg":
        # EXIF orientation 3 on upright pixels: with EXIF applied it is upside down, RapidOCR reads it upright.
        assert Image.open(path).getexif().get(0x0112) == 3
        np.testing.assert_array_equal(out, want[::-1, ::-1])
    else:
        np.testing.assert_array_equal(out, want)


@pytest.mark.compat
def test_compat_transparent_images_take_both_branches() -> None:
    black = decode_image(COMPAT / "black_font_color_transparent.png")
    white = decode_image(COMPAT / "white_font_color_transparent.png")
    for out in (black, white):  # both become dark text on a white background
        assert set(np.unique(out)) == {0, 255}
        assert (out == 255).mean() > 0.5


@pytest.mark.compat
def test_compat_1_bit_png() -> None:
    assert Image.open(COMPAT / "issue_170.png").mode == "1"
    out = decode_image(COMPAT / "issue_170.png")
    assert set(np.unique(out)) <= {0, 255}


@pytest.mark.compat
def test_compat_two_channel_array() -> None:
    arr = np.load(COMPAT / "two_dim_image.npy")
    assert arr.shape[2] == 2 and arr.dtype == np.uint8
    out = decode_image(arr)
    np.testing.assert_array_equal(out, rapid(arr))
    assert (out[arr[..., 1] == 0] == 255).all()  # transparent → white
    opaque = arr[..., 1] == 255
    np.testing.assert_array_equal(out[opaque][:, 0], arr[..., 0][opaque])  # opaque → its gray


@pytest.mark.compat
def test_compat_decoded_arrays_as_rapidocr_takes_them() -> None:
    path = COMPAT / "ch_en_num.jpg"
    bgr = load_image.LoadImage()(path)  # a BGR array, as RapidOCR's tests pass it
    np.testing.assert_array_equal(decode_image(bgr, channel_order="bgr"), rapid(bgr))
    np.testing.assert_array_equal(decode_image(bgr, channel_order="bgr"), decode_image(path))
    gray = np.asarray(Image.open(path).convert("L"))[..., None]  # the H×W×1 case
    np.testing.assert_array_equal(decode_image(gray), rapid(gray))


# --- errors -------------------------------------------------------------------------------------------------


def _reason(source: object, **kwargs: object) -> ImageError:
    with pytest.raises(ImageError) as e:
        decode_image(source, **kwargs)  # type: ignore[arg-type]
    assert isinstance(e.value, VkocrError)  # the root of vkocr's errors (no longer a ValueError)
    assert e.value.reason in IMAGE_ERROR_REASONS
    return e.value


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.png"
    for source in (missing, str(missing)):
        err = _reason(source)
        assert err.reason == "not_found"
        assert "nope.png" in str(err)
    with pytest.raises(ImageError) as e:
        image_size(missing)
    assert e.value.reason == "not_found"


def test_directory_is_unreadable(tmp_path: Path) -> None:
    assert _reason(tmp_path).reason == "unreadable"


def test_empty_inputs(tmp_path: Path) -> None:
    (tmp_path / "empty.png").write_bytes(b"")
    assert _reason(b"").reason == "empty"
    assert _reason(tmp_path / "empty.png").reason == "empty"


def _png(width: int, height: int, idat: bytes, color_type: int = 0) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


@pytest.mark.parametrize(("w", "h"), [(0, 5), (5, 0)])
def test_zero_size_png_is_empty(w: int, h: int) -> None:
    err = _reason(_png(w, h, zlib.compress(b"")))
    assert err.reason == "empty"
    assert "zero-size" in str(err)


def test_zero_size_bmp_is_empty() -> None:
    data = bytearray(encode(Image.new("L", (3, 3)), "BMP"))
    data[18:22] = struct.pack("<i", 0)
    assert _reason(bytes(data)).reason == "empty"


@pytest.mark.parametrize(
    "data",
    [b"not an image at all", b"\x00" * 100, b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff"],
    ids=["text", "zeros", "png-signature-only", "jpeg-soi-only"],
)
def test_garbage_is_corrupt(data: bytes) -> None:
    assert _reason(data).reason == "corrupt"


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "TIFF", "GIF", "BMP"])
def test_truncated_is_corrupt(fmt: str, rng: np.random.Generator, tmp_path: Path) -> None:
    img = Image.fromarray(_u8(rng, 64, 64, 3))
    data = encode(img, fmt)
    cut = data[: len(data) // 2]
    err = _reason(cut)
    assert err.reason == "corrupt", err
    (tmp_path / "cut").write_bytes(cut)
    err = _reason(tmp_path / "cut")
    assert err.reason == "corrupt"
    assert "cut" in str(err)


def test_corrupt_pixel_data(rng: np.random.Generator) -> None:
    raw = b"".join(b"\x00" + _u8(rng, 16).tobytes() for _ in range(16))
    idat = bytearray(zlib.compress(raw))
    idat[len(idat) // 2 :] = b"\xff" * (len(idat) - len(idat) // 2)
    assert _reason(_png(16, 16, bytes(idat))).reason == "corrupt"


def test_other_formats_are_unsupported() -> None:
    ico = encode(Image.new("RGB", (16, 16), "red"), "ICO")
    assert Image.open(io.BytesIO(ico)).format == "ICO"  # Pillow could, we do not
    err = _reason(ico)
    assert err.reason == "unsupported"
    assert "ICO" in str(err)
    eps = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n"
    assert _reason(eps).reason == "unsupported"


@pytest.mark.parametrize("source", [12, 3.5, None, [1, 2, 3]])
def test_wrong_source_type(source: object) -> None:
    assert _reason(source).reason == "unsupported"


def test_bad_arguments() -> None:
    arr = np.zeros((4, 4, 3), np.uint8)
    for kwargs in ({"channel_order": "rgba"}, {"max_pixels": 0}, {"max_pixels": 1.5}):
        with pytest.raises(ValueError, match="must be"):
            decode_image(arr, **kwargs)  # type: ignore[arg-type]


def test_image_error_carries_reason_and_pickles() -> None:
    err = ImageError("corrupt", "image data is broken")
    assert err.reason == "corrupt"
    assert str(err) == "image data is broken"
    again = pickle.loads(pickle.dumps(err))
    assert (again.reason, str(again)) == ("corrupt", "image data is broken")
    with pytest.raises(ValueError, match="unknown ImageError reason"):
        ImageError("nonsense", "x")  # type: ignore[arg-type]


# --- the pixel limit is enforced from the header ------------------------------------------------------------


@pytest.fixture
def no_pixel_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: ImageFile.ImageFile) -> None:
        raise AssertionError("pixels were decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", refuse)


def _big_png(width: int, height: int) -> bytes:
    """A valid single-colour gray PNG, compressed row by row (never materialised in memory)."""
    comp = zlib.compressobj(1)
    row = bytes(width + 1)  # filter byte 0 + zeros
    idat = b"".join(comp.compress(row) for _ in range(height)) + comp.flush()
    return _png(width, height, idat)


def test_too_large_is_refused_from_the_header(rng: np.random.Generator, no_pixel_decoding: None) -> None:
    data = encode(Image.fromarray(_u8(rng, 300, 200, 3)), "PNG")  # 200×300 = 60,000 pixels
    err = _reason(data, max_pixels=59_999)
    assert err.reason == "too_large"
    assert "200×300" in str(err)
    assert image_size(data) == (200, 300)  # header only as well


def test_pixel_limit_is_inclusive(rng: np.random.Generator) -> None:
    data = encode(Image.fromarray(_u8(rng, 300, 200, 3)), "PNG")
    assert decode_image(data, max_pixels=60_000).shape == (300, 200, 3)


def test_large_image_refused_without_decoding(no_pixel_decoding: None) -> None:
    data = _big_png(8000, 8000)  # 64 M pixels: over our default limit, under Pillow's own warning level
    assert len(data) < 1_000_000
    err = _reason(data)
    assert err.reason == "too_large"
    assert f"8000×8000 = 64,000,000 pixels, more than the limit of {DEFAULT_MAX_PIXELS:,}" in str(err)
    assert image_size(data) == (8000, 8000)


def test_pillow_decompression_bomb_guard_maps_to_too_large(no_pixel_decoding: None) -> None:
    data = _big_png(20_000, 20_000)  # 400 M pixels, ~0.4 MB
    # Beyond 2 × Image.MAX_IMAGE_PIXELS Pillow refuses at open, even with our own limit lifted.
    assert 20_000 * 20_000 > 2 * (Image.MAX_IMAGE_PIXELS or 0) > 0
    for kwargs in ({}, {"max_pixels": 10**12}):
        err = _reason(data, **kwargs)
        assert err.reason == "too_large"
        assert "decompression bomb" in str(err)
    with pytest.raises(ImageError) as e:
        image_size(data)
    assert e.value.reason == "too_large"


def test_big_single_colour_png_within_limit_decodes() -> None:
    data = _big_png(3000, 2000)
    out = decode_image(data)
    assert out.shape == (2000, 3000, 3)
    assert not out.any()
