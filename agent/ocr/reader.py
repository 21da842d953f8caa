"""`vkocr.OCR`: the local OCR API, RapidOCR-style — open an engine on a device, read images, get lines.

A thin class over OcrPipeline (agent/ocr/pipeline.py): options are OcrOptions' fields (agent/ocr/options.py),
results are postproc/result.py's OcrResult/OcrLine/CharBox.
"""

from __future__ import annotations

import os
from typing import Any, Self

from vkocr.agent.errors import EngineClosed, ImageError, OptionsError
from vkocr.agent.ocr.images import ChannelOrder, decode_image
from vkocr.agent.ocr.model_sets import choose_models
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.ocr.pdf_pages import DEFAULT_PDF_DPI
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.ocr.plugin_chains import run_plugins
from vkocr.agent.ocr.precision import PrecisionChoice
from vkocr.agent.ocr.procedures import PROCEDURES
from vkocr.agent.ocr.reader_inputs import ReaderSource, one_image, pdf_in, pdf_pages, without_file_object
from vkocr.postproc.result import OcrResult


class OCR:
    """One OCR engine: PP-OCR's detection, direction classification and recognition models (a model set, read
    as its RapidOCR release reads it) on one Vulkan device. Not thread-safe; ``close()`` (or the ``with``
    block) frees the device.

    ``device``: None for VKOCR_DEVICE, else the best ranked usable Vulkan GPU, else the CPU backend (with a
    warning); an index (``0`` or ``"0"``), UUID or part of the name (e.g. "llvmpipe"); "cpu" for onnxruntime,
    "numpy" for the NumPy reference executor. ``models``: a model set's name ("ppocrv6-small", the default, or
    "ppocrv4": its files in VKOCR_MODELS, else ~/.local/share/vkocr/models), or a folder (agent/ocr/model_sets.py: its
    modelset.toml, else a known set's file names); the set's procedure comes with it. ``options``: OcrOptions
    fields for every read
    (``text_score=0.6``, ``use_cls=False``, ``return_word_box=True``, ``use_doc_orientation=True`` to turn pages
    upright first, …). ``precision``: "auto" (the default:
    fp16 storage on a GPU where the model set's calibrated plan passed its sameness gate, else fp32), "fp32" or
    "fp16" (agent/ocr/precision.py); ``ocr.precision`` says which serves and why.

    Raises vkocr.engine.errors.VulkanUnavailable / DeviceNotFound when there is no such device,
    vkocr.agent.errors.OptionsError for an unknown option or a bad value, FileNotFoundError when a model file
    is missing.
    """

    def __init__(self, device: str | int | None = None, *, models: str | os.PathLike[str] | None = None,
                 precision: str = "auto", **options: Any) -> None:
        if isinstance(device, bool) or not isinstance(device, str | int | None):
            raise OptionsError(f"device: expected an index, a UUID or a name, not {device!r}")
        device = str(device) if isinstance(device, int) else device
        chosen = choose_models(os.fspath(models) if models is not None else None)
        settings = chosen.ocr_options(options)
        self._pipeline: OcrPipeline | None = OcrPipeline.open(
            device, options=settings, model_paths=chosen.paths, precision=precision,
            model_set=chosen.known.name if chosen.known is not None else None)

    @property
    def pipeline(self) -> OcrPipeline:
        """The pipeline underneath (EngineClosed once closed)."""
        if self._pipeline is None:
            raise EngineClosed("this OCR engine is closed: open a new vkocr.OCR()")
        return self._pipeline

    @property
    def device_name(self) -> str:
        """The Vulkan device's name, or "cpu" / "numpy"."""
        return self.pipeline.device_name

    @property
    def precision(self) -> PrecisionChoice:
        """The storage precision that serves (``.precision``: "fp32" or "fp16") and why (``.reason``)."""
        return self.pipeline.precision

    @property
    def options(self) -> OcrOptions:
        """The options every read starts from."""
        return self.pipeline.options

    def read(self, image: ReaderSource, *, channel_order: ChannelOrder = "rgb", **options: Any) -> OcrResult:
        """The lines of one image: a path, encoded bytes (JPEG, PNG, BMP, TIFF, WebP, GIF, PNM), a file opened
        in binary mode (``open(p, "rb")``, ``io.BytesIO``), a one-page PDF (a path or bytes; ``read_pdf`` reads
        several), a Pillow image, or an H×W×3 uint8 array (floats are 0..255) — RGB, or ``channel_order="bgr"``
        for OpenCV's (RapidOCR takes every 3-channel array as BGR). ``options``: OcrOptions fields changed for
        this call.

        Returns an OcrResult: ``.lines`` (OcrLine: ``text``, ``score``, ``box`` 4×2 clockwise from the
        top-left, ``angle`` 0 or 180, ``chars`` with ``return_word_box=True``), ``.timings_ms`` per stage,
        ``.fields`` and ``.errors`` from plugins, ``.page_angle`` with ``use_doc_orientation=True`` (boxes stay
        in the image's own frame). Raises vkocr.agent.errors.ImageError for an unreadable image
        and OptionsError for a bad option."""
        pipeline = self.pipeline
        opts = pipeline.options.replace(**options) if options else pipeline.options
        image = one_image(image, dpi=DEFAULT_PDF_DPI, max_pixels=opts.max_pixels)
        if channel_order == "rgb":
            return pipeline(image, **options)
        pixels = decode_image(image, max_pixels=opts.max_pixels, channel_order=channel_order,
                              apply_exif=opts.apply_exif, copy=False, rgba=PROCEDURES[opts.procedure].rgba)
        request = pipeline.request(pixels, opts, decoded=True)
        return run_plugins(pipeline.run(request), request.chain)

    __call__ = read

    def read_pdf(self, pdf: ReaderSource, *, dpi: float = DEFAULT_PDF_DPI, **options: Any) -> list[OcrResult]:
        """The lines of every page of a PDF (a path, bytes or a binary file object), each page rendered at
        ``dpi`` as `vkocr ocr` renders it, in page order. Raises ImageError for a file that is no PDF."""
        opts = self.pipeline.options.replace(**options) if options else self.pipeline.options
        source = without_file_object(pdf)
        found = pdf_in(source)
        if found is None:
            raise ImageError("unsupported", "not a PDF: OCR.read() reads images")
        name, document = found
        pages = pdf_pages(name, document, dpi=dpi, max_pixels=opts.max_pixels)
        return [self.read(page, **options) for page in pages]

    def close(self) -> None:
        """Free the models and the device; closing twice is a no-op."""
        pipeline, self._pipeline = self._pipeline, None
        if pipeline is not None:
            pipeline.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self._pipeline.device_name if self._pipeline is not None else "closed"
        return f"<vkocr.OCR on {where}>"
