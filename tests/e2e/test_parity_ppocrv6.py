"""The pipeline with the `ppocrv6-small` set against RapidOCR 3.10.0 (its reference, run live: tests/rapidocr310.py)
on RapidOCR's compatibility images (../shared/compat/rapidocr-1.4.4/images) and on pages rendered here
(tests/e2e/test_rendered.py's renderer, fresh seed each run; VKOCR_RENDER_SEED=<n> replays one).

Over each set of images: the same number of lines per image, ≥ 99% of lines with identical text, ≥ 99% of boxes
with IoU ≥ 0.9; on the rendered pages our CER within 0.5 points of RapidOCR 3.10's. RapidOCR 3.10 applies EXIF
orientation, as we do by default. On lavapipe (the Vulkan stages) and on the CPU backend (onnxruntime). v6's
recogniser has 18,710 classes: few images, to keep the run short.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from shapely.geometry import Polygon

from tests.e2e.test_rendered import CJK_FONT, LATIN_FONT, cer, render
from tests.paths import COMPAT_IMAGES
from tests.rapidocr310 import lines_310, rapidocr_310
from vkocr.agent.ocr.model_sets import choose_models
from vkocr.agent.ocr.pipeline import OcrPipeline

BACKENDS = ["llvmpipe", "cpu"]
SAME_TEXT = 0.99
CLOSE_BOX = 0.99
OURS_SLACK = 0.005
RENDERED = ("clean", "rot180", "blur", "jpeg")
# on lavapipe: the CJK-and-digits page (18 lines), the two transparent ones (RGBA: 3.10's blend), and short.png,
# whose det input (736×4416) holds a tensor beyond lavapipe's 128 MiB bindings: its det runs on the CPU
ON_LAVAPIPE = ("ch_en_num.jpg", "black_font_color_transparent.png", "white_font_color_transparent.png", "short.png")


@pytest.fixture(scope="module", params=BACKENDS)
def ocr(request: pytest.FixtureRequest) -> Iterator[OcrPipeline]:
    chosen = choose_models("ppocrv6-small")
    if chosen.missing():
        pytest.skip("ppocrv6-small is not installed: scripts/fetch_models.py")
    with OcrPipeline.open(request.param, options=chosen.ocr_options(), model_paths=chosen.paths) as pipeline:
        yield pipeline


@pytest.fixture(scope="module")
def reference() -> Any:
    return rapidocr_310()


def iou(a: list[list[float]], b: list[list[float]]) -> float:
    pa, pb = Polygon(a).buffer(0), Polygon(b).buffer(0)
    union = pa.union(pb).area
    return pa.intersection(pb).area / union if union else 1.0


def compare(ours: list[list[tuple[str, list[list[float]]]]], theirs: list[list[tuple[str, list[list[float]]]]]
            ) -> tuple[int, int, int, list[str]]:
    """(lines, identical texts, boxes with IoU ≥ 0.9, differences) over images read by both."""
    lines = same = close = 0
    diffs = []
    for n, (mine, ref) in enumerate(zip(ours, theirs, strict=True)):
        assert len(mine) == len(ref), f"image {n}: {[t for t, _ in mine]} against {[t for t, _ in ref]}"
        for (text, box), (ref_text, ref_box) in zip(mine, ref):
            lines += 1
            same += text == ref_text
            close += iou(box, ref_box) >= 0.9
            if text != ref_text:
                diffs.append(f"image {n}: {text!r} against {ref_text!r}")
    return lines, same, close, diffs


def test_procedure_is_rapidocr_310(ocr: OcrPipeline) -> None:
    assert ocr.options.procedure == "rapidocr-3.10"


@pytest.mark.compat
def test_compat_images_match_rapidocr_310(ocr: OcrPipeline, reference: Any) -> None:
    """Every compat image on the CPU backend (35 lines); on lavapipe four of them (v6 on lavapipe reads all
    eleven in about 26 minutes, more than CI can give one test). short.png letterboxed to 736x4416 makes v6
    det's stem Concat 149 MiB, beyond lavapipe's 128 MiB maxStorageBufferRange (NVIDIA binds 4 GiB): that
    det shape runs on the CPU backend, with the same answer."""
    names = sorted(p.name for p in COMPAT_IMAGES.iterdir())
    if ocr.device is not None:
        names = [n for n in names if n in ON_LAVAPIPE]
    ours, theirs = [], []
    for name in names:
        path = COMPAT_IMAGES / name
        source: Any = np.load(path) if path.suffix == ".npy" else str(path)
        ours.append([(line.text, line.box) for line in ocr(source).lines])
        theirs.append(lines_310(reference, source))
    lines, same, close, diffs = compare(ours, theirs)
    if ocr.device is not None:
        assert [role for role, _shape in ocr.stages.shapes_on_cpu] == ["det"]  # short.png's, and only it
    least = 20 if ocr.device is not None else 30
    assert lines >= least, f"only {lines} lines over {len(names)} images: the comparison would say little"
    assert same >= SAME_TEXT * lines, diffs
    assert close >= CLOSE_BOX * lines


@pytest.mark.skipif(not (LATIN_FONT.is_file() and CJK_FONT.is_file()), reason="the rendering fonts are absent")
def test_rendered_pages_match_rapidocr_310(ocr: OcrPipeline, reference: Any) -> None:
    seed = int(os.environ.get("VKOCR_RENDER_SEED") or np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    pages = [render(rng, variant) for variant in RENDERED]
    ours, theirs = [], []
    for page in pages:
        ours.append([(line.text, line.box) for line in ocr(page.image).lines])
        theirs.append(lines_310(reference, np.ascontiguousarray(page.image[..., ::-1])))  # it takes arrays as BGR
    lines, same, close, diffs = compare(ours, theirs)
    truths = ["\n".join(p.truth) for p in pages]
    our_cer = cer(["\n".join(t for t, _ in o) for o in ours], truths)
    their_cer = cer(["\n".join(t for t, _ in o) for o in theirs], truths)
    detail = f"seed {seed}: our CER {our_cer:.2%}, RapidOCR 3.10 {their_cer:.2%}; {diffs}"
    print("\n" + detail)
    assert same >= SAME_TEXT * lines, detail
    assert close >= CLOSE_BOX * lines, detail
    assert our_cer <= their_cer + OURS_SLACK, detail
