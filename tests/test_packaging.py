"""Packaging: the wheel installs one name, `vkocr`, and works outside the checkout (issue 13, deliverable 8).

Slow (a wheel build, a fresh environment, one OCR on lavapipe: a minute or two) but in the default run. The
wheel is built from a copy of the checkout (so no build/ appears in it), with the set-up's setuptools (no
build isolation: no network needed). The fresh environment gets the wheel non-editable, without
dependencies; it sees the test interpreter's installed dependencies (/work/main/.venv) through a .pth file
holding that site-packages path as a plain line — a path line, so the editable install's finder .pth in there
is not processed and `vkocr` can only come from the wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

from tests.paths import ROOT

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"  # fonts-dejavu-core, installed by the set-up
WORDS = "Packaged 77"
NOT_COPIED = shutil.ignore_patterns(".git", ".venv", "build", "dist", "state", "*.egg-info", "__pycache__",
                                    ".*_cache", ".hypothesis", "models", ".gl", ".whl")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(FONT), reason="DejaVu Sans is not installed"),
]


@dataclass
class Installed:
    wheel: Path
    venv: Path
    outside: Path  # a directory outside the checkout, where the commands run

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return subprocess.run(list(args), capture_output=True, text=True, cwd=self.outside, env=env,
                              timeout=timeout, check=False)


def checked(out: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert out.returncode == 0, f"{out.args}: exit status {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    work = tmp_path_factory.mktemp("packaging")
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=NOT_COPIED)
    wheels = work / "wheels"
    checked(subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                            "--no-index", "-q", "-w", str(wheels), str(source)],
                           capture_output=True, text=True, timeout=600, check=False))
    (wheel,) = wheels.glob("vkocr-*.whl")
    venv = work / "venv"
    checked(subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], capture_output=True,
                           text=True, timeout=120, check=False))
    checked(subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                            "--no-deps", "--no-index", "-q", str(wheel)],
                           capture_output=True, text=True, timeout=300, check=False))
    site = Path(checked(subprocess.run([str(venv / "bin" / "python"), "-c",
                                        "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                       capture_output=True, text=True, check=False)).stdout.strip())
    (site / "vkocr-test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    outside = work / "elsewhere"
    outside.mkdir()
    yield Installed(wheel, venv, outside)


def test_the_wheel_holds_one_top_level_name_and_its_data(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = wheel.namelist()
    tops = {name.split("/")[0] for name in names}
    (dist_info,) = [top for top in tops if top.endswith(".dist-info")]
    assert tops == {"vkocr", dist_info}
    assert "vkocr/py.typed" in names
    for sub in ("engine", "agent", "agent/ocr", "agent/cli", "agent/serving", "postproc", "shaders", "v1"):
        assert f"vkocr/{sub}/__init__.py" in names, sub
    spv = ROOT / "shaders" / "spv"
    spirv = {f"vkocr/shaders/{p.relative_to(ROOT / 'shaders').as_posix()}"
             for p in [*spv.glob("*.spv"), *(spv / "ocr").glob("*.spv")]}
    assert spirv and any("/spv/ocr/" in p for p in spirv)
    assert spirv <= set(names), sorted(spirv - set(names))
    assert "vkocr/shaders/spv/manifest.json" in names
    protos = {f"vkocr/v1/{p.name}" for p in (ROOT / "proto" / "vkocr" / "v1").glob("*.proto")}
    assert protos and protos <= set(names), sorted(protos - set(names))
    entry_points = zipfile.ZipFile(installed.wheel).read(f"{dist_info}/entry_points.txt").decode()
    assert "vkocr = vkocr.agent.cli.main:main" in entry_points


def test_vkocr_comes_from_the_fresh_environment(installed: Installed) -> None:
    out = checked(installed.run(str(installed.venv / "bin" / "python"), "-c",
                                "import json, vkocr, vkocr.engine, vkocr.agent.ocr.reader as r; "
                                "print(json.dumps([vkocr.__file__, r.__file__, vkocr.__version__]))"))
    top, reader, version = json.loads(out.stdout)
    venv = installed.venv.resolve()
    for path in (top, reader):
        assert Path(path).resolve().is_relative_to(venv), path
        assert not Path(path).resolve().is_relative_to(ROOT), path
    assert version[0].isdigit()


def test_the_installed_command_runs_outside_the_checkout(installed: Installed) -> None:
    vkocr = str(installed.venv / "bin" / "vkocr")
    version = checked(installed.run(vkocr, "--version"))
    assert version.stdout.startswith("vkocr ") and version.stdout.split()[1][0].isdigit()

    devices = json.loads(checked(installed.run(vkocr, "devices", "--json")).stdout)
    assert devices["devices"] and devices["chosen"]["reason"]

    font = ImageFont.truetype(FONT, 32)
    image = Image.new("RGB", (80 + 20 * len(WORDS), 120), "white")
    ImageDraw.Draw(image).text((40, 40), WORDS, fill="black", font=font)
    image.save(installed.outside / "page.png")
    ocr = checked(installed.run(vkocr, "ocr", "page.png", "--json", "--device", "llvmpipe"))
    (record,) = [json.loads(line) for line in ocr.stdout.splitlines() if line.strip()]
    # the default set (PP-OCRv6) may read the two words as two boxes ("Packaged ", "77"), as RapidOCR 3.10 does
    assert " ".join(line["text"].strip() for line in record["lines"]) == WORDS
    assert record["device"].startswith("llvmpipe") and ocr.stderr == ""
