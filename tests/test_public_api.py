"""`import vkocr`: the local OCR API (vkocr.OCR), the engine's facade, and logging as a library and as the
CLI.

The OCR runs on lavapipe, named explicitly; the logging tests run in subprocesses, where nothing has
configured structlog or `logging` yet (this process may have: other tests call the CLI's configure_logging).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

import vkocr
import vkocr.engine
from tests.paths import ROOT

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"  # fonts-dejavu-core, installed by the set-up
LAVAPIPE = "llvmpipe"
WORD = "LOT2041"
REC_ONLY = {"use_det": False, "use_cls": False}  # the whole image is one line: the cheapest real read

pytestmark = pytest.mark.skipif(not os.path.exists(FONT), reason="DejaVu Sans is not installed")


def word(text: str = WORD) -> Image.Image:
    """Black text on white, one line, tightly framed: recognition reads it as is."""
    font = ImageFont.truetype(FONT, 28)
    image = Image.new("RGB", (24 + 17 * len(text), 40), "white")
    ImageDraw.Draw(image).text((12, 4), text, fill="black", font=font)
    return image


def page(text: str = WORD) -> Image.Image:
    """The text on a white page with a margin, so detection has a line to find."""
    font = ImageFont.truetype(FONT, 32)
    image = Image.new("RGB", (80 + 20 * len(text), 120), "white")
    ImageDraw.Draw(image).text((40, 40), text, fill="black", font=font)
    return image


def png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def python(script: str, *, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          cwd=cwd, timeout=600, check=False)


@pytest.fixture(scope="module")
def ocr() -> Iterator[vkocr.OCR]:
    with vkocr.OCR(LAVAPIPE, models="ppocrv4") as engine:  # not the default set: half its time on lavapipe
        yield engine


# --- the OCR API ---------------------------------------------------------------------------------------

def test_reads_a_path_bytes_and_arrays_alike(ocr: vkocr.OCR, tmp_path: Path) -> None:
    image = word()
    path = tmp_path / "word.png"
    image.save(path)
    rgb = np.asarray(image)
    results = [ocr(str(path), **REC_ONLY), ocr.read(png(image), **REC_ONLY), ocr.read(rgb, **REC_ONLY),
               ocr.read(np.ascontiguousarray(rgb[:, :, ::-1]), channel_order="bgr", **REC_ONLY)]
    for result in results:
        assert isinstance(result, vkocr.OcrResult)
        (line,) = result.lines
        assert isinstance(line, vkocr.OcrLine) and line.text == WORD and 0.5 < line.score <= 1.0
        assert line.box == [[0, 0], [image.width, 0], [image.width, image.height], [0, image.height]]
        assert line.angle == 0 and line.chars is None
        assert {"decode", "rec"} <= set(result.timings_ms) and result.timings_ms["rec"] > 0
        assert "det" not in result.timings_ms  # this call's options
    assert [r.to_dict()["lines"] for r in results[1:]] == [results[0].to_dict()["lines"]] * 3
    assert ocr.options.use_det and ocr.device_name.startswith(LAVAPIPE)  # the engine's own options stay


def test_a_page_gives_boxes_angles_and_character_boxes(ocr: vkocr.OCR) -> None:
    image = page()
    result = ocr.read(image, return_word_box=True)  # detection, direction, recognition
    (line,) = result.lines
    assert line.text == WORD and line.angle == 0
    box = np.asarray(line.box)
    assert box.shape == (4, 2)
    assert 30 < box[:, 0].min() < box[:, 0].max() < image.width - 20 and 30 < box[:, 1].min() < 60
    assert line.chars is not None and "".join(c.text for c in line.chars) == WORD
    assert all(isinstance(c, vkocr.CharBox) and np.asarray(c.box).shape == (4, 2) for c in line.chars)
    assert {"decode", "det", "db", "cls", "rec"} <= set(result.timings_ms)


def test_bad_options_and_images_are_vkocr_errors(ocr: vkocr.OCR) -> None:
    with pytest.raises(vkocr.OptionsError, match="unknown option"):
        ocr.read(np.asarray(word()), no_such_option=1)
    with pytest.raises(vkocr.ImageError):
        ocr.read(b"not an image")
    with pytest.raises(vkocr.OptionsError):
        vkocr.OCR(LAVAPIPE, text_score=2.0)


def test_close_frees_the_device_and_a_closed_engine_says_so() -> None:
    with vkocr.OCR(LAVAPIPE, use_det=False, use_cls=False) as engine:
        assert engine.pipeline.device is not None and engine.options.use_det is False
        assert [line.text for line in engine(np.asarray(word())).lines] == [WORD]
        pipeline = engine.pipeline
    assert pipeline.device is None  # the pipeline closed its device
    with pytest.raises(ValueError, match="closed"):
        engine.read(np.asarray(word()))
    engine.close()  # twice is fine
    assert "closed" in repr(engine)


def test_unknown_device_is_a_vkocr_error() -> None:
    with pytest.raises(vkocr.VkocrError):
        vkocr.OCR("no-such-gpu")


def test_top_level_names_and_version() -> None:
    assert vkocr.__version__ and vkocr.__version__[0].isdigit()
    assert set(vkocr.__all__) >= {"OCR", "OcrResult", "OcrLine", "CharBox", "OcrOptions", "VkocrError",
                                  "__version__"}
    for name in vkocr.__all__:
        assert getattr(vkocr, name) is not None
    for error in (vkocr.ImageError, vkocr.OptionsError, vkocr.DeviceNotFound, vkocr.VulkanUnavailable):
        assert issubclass(error, vkocr.VkocrError), error
    with pytest.raises(AttributeError):
        vkocr.no_such_name  # noqa: B018


def test_engine_facade() -> None:
    from vkocr.engine.device import Device
    from vkocr.engine.graph.model import Model
    from vkocr.engine.graph.plan import Plan

    assert (vkocr.engine.Device, vkocr.engine.Model, vkocr.engine.Plan) == (Device, Model, Plan)
    for name in ("Tensor", "Recorder", "KernelDef", "VkocrError", "VulkanError", "DeviceLost",
                 "DeviceNotFound"):
        assert name in vkocr.engine.__all__ and getattr(vkocr.engine, name) is not None
    assert issubclass(vkocr.engine.DeviceNotFound, vkocr.VkocrError)


def test_the_wire_contract_imports_light() -> None:
    out = python("""
        import json, sys
        import vkocr.v1.ocr_pb2
        print(json.dumps(sorted(m for m in sys.modules if m.startswith("vkocr"))))
        """, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout)
    assert "vkocr.v1.ocr_pb2" in loaded
    # the root package and its lazy facade (vkocr/lazy.py, importlib only); nothing of the engine or the agent
    assert [name for name in loaded if name not in ("vkocr", "vkocr.lazy") and not name.startswith("vkocr.v1")] == []


# --- logging -----------------------------------------------------------------------------------------------

def test_as_a_library_it_prints_nothing(tmp_path: Path) -> None:
    word().save(tmp_path / "word.png")
    out = python(f"""
        import vkocr
        with vkocr.OCR({LAVAPIPE!r}, use_det=False) as ocr:
            result = ocr.read("word.png")
        assert [line.text for line in result.lines] == [{WORD!r}], result
        """, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (out.stdout, out.stderr) == ("", "")


def test_as_a_library_events_are_logging_records(tmp_path: Path) -> None:
    out = python(f"""
        import json, logging
        records = []

        class Keep(logging.Handler):
            def emit(self, record):
                records.append([record.name, record.levelname, record.getMessage(), record.event_dict])

        logging.getLogger().addHandler(Keep())
        logging.getLogger("vkocr").setLevel(logging.DEBUG)
        from vkocr.engine import Device
        with Device({LAVAPIPE!r}):
            pass
        print(json.dumps(records, default=str))
        """, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    records = {event["event"]: (name, level, message, event)
               for name, level, message, event in json.loads(out.stdout)}
    name, level, message, event = records["device_opened"]
    assert (name, level) == ("vkocr.engine.device", "INFO")
    assert message.startswith("device_opened device='llvmpipe") and event["device"].startswith(LAVAPIPE)
    assert records["instance_created"][:2] == ("vkocr.engine.instance", "DEBUG")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vkocr.agent.cli.main", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, check=False)


@pytest.mark.parametrize("json_logs", [False, True])
def test_the_cli_renders_events_on_stderr(json_logs: bool) -> None:
    out = cli("--log-level", "debug", *(["--log-json"] if json_logs else []), "devices", "--json", "--device",
              LAVAPIPE)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["chosen"]  # stdout holds the report only
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    if json_logs:
        events = [json.loads(line) for line in lines]
        created = next(e for e in events if e["event"] == "instance_created")
        assert {"level": "debug", "logger": "vkocr.engine.instance"}.items() <= created.items()
        assert {"timestamp", "validation", "extensions"} <= set(created)
    else:
        (created,) = [line for line in lines if "instance_created" in line]
        assert "[debug" in created and "validation=" in created and not created.startswith("{")


def test_the_cli_level_filters() -> None:
    for level in ([], ["--log-level", "info"]):
        out = cli(*level, "devices", "--device", LAVAPIPE)
        assert out.returncode == 0 and out.stdout, out.stderr
        assert "instance_created" not in out.stderr
    assert cli("devices", "--device", LAVAPIPE).stderr == ""  # the default level: warnings
