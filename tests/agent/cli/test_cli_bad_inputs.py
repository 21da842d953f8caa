"""Every `vkocr` command on bad input, as a new user meets it: a missing file, a file that is no model, an
output into a folder that does not exist, an option out of range, an agent that is not there, a closed pipe.
Each answers with one line on stderr naming what is wrong and a non-zero exit, never a traceback.

A closed pipe (`vkocr ocr DIR --json | head -1`) ends quietly with 141 (128 + SIGPIPE), as Unix tools do
(agent/cli/main.py). Most cases run main() in this process (an exception escaping it fails the test, as a
traceback would); the ones that need a real process (a pipe, no Vulkan driver) run the console entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.agent.agents import FONT, running_agent, word_pixels
from tests.paths import ROOT
from vkocr.agent.cli.main import main
from vkocr.agent.ocr.model_files import models_dir

pytestmark = pytest.mark.skipif(not os.path.exists(FONT), reason="fonts-dejavu-core renders the test image")

DET_MODEL = "ch_PP-OCRv4_det_infer.onnx"  # ppocrv4's, fetched by the set-up


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A readable image, a text file that is no image, model or bundle, a file where a folder should be, a tensor,
    and paths that do not exist."""
    folder = tmp_path_factory.mktemp("bad-inputs")
    Image.fromarray(word_pixels("LOT2041")).save(folder / "word.png")
    (folder / "notes.txt").write_text("not an image, a model or a bundle\n")
    np.save(folder / "x.npy", np.ones((1, 3, 32, 32), np.float32))
    return {"image": str(folder / "word.png"), "text": str(folder / "notes.txt"), "tensor": str(folder / "x.npy"),
            "missing": str(folder / "missing.png"), "no_dir": str(folder / "notes.txt" / "out.png"),
            "missing_dir": str(folder / "no-such-folder"), "model": str(models_dir() / DET_MODEL),
            "out": str(folder / "y.npy")}


# (argv with {placeholders} for `files`, words the one line must hold)
CASES: list[tuple[str, str]] = [
    ("ocr {missing} --device cpu", "does not exist"),
    ("ocr {image} --device cpu --det-model {text}", "cannot read ONNX model"),
    ("ocr {image} --device cpu --det-model {missing}", "no such file"),
    ("ocr {image} --device cpu --vis {no_dir}", "is no folder"),
    ("ocr {image} --device cpu --text-score 3", "text_score must be within"),
    ("ocr {image} --device cpu --models {missing_dir}", "neither a model set"),
    ("ocr {image} --device cpu --max-pixels 0", "max_pixels"),
    ("ocrx {image}", "invalid choice"),
    ("client ocr {missing} --target 127.0.0.1:1", "does not exist"),
    ("client ocr {image} --target 127.0.0.1:1 --timeout 3s", "UNAVAILABLE"),
    ("client health --target 127.0.0.1:1 --timeout 3s", "UNAVAILABLE"),
    ("client ocr {image} --target 127.0.0.1:1 --tls-ca {missing}", "does not exist"),
    ("client ocr {image}", "--target"),
    ("devices --device no-such-gpu", "matches no Vulkan device"),
    ("infer {text} --input {missing} --output {out} --device numpy", "cannot read input tensor"),
    ("infer {model} --input {tensor} --output {no_dir} --device cpu", "is no folder"),
    ("infer {text} --input {tensor} --output {out} --device cpu", "onnxruntime cannot run"),
    ("inspect {text} --shape 1x3x32x32 --device numpy", "cannot read ONNX model"),
    ("inspect {model} --shape 1x3x32x32 --device cpu", "--device numpy"),
    ("debug compare {text} --input {missing}", "cannot read input tensor"),
    ("models list --dir {missing_dir}", "no such folder"),
    ("bench kernels --device no-such-gpu", "matches no Vulkan device"),
    ("bench kernels --device llvmpipe --only no-such-case", "invalid choice"),
    ("bench models --device cpu", "Vulkan engine"),
    ("bench pipeline {missing} --device cpu", "does not exist"),
    ("bench stream {missing} --device cpu", "no such file"),
    ("bench agent {missing} --device cpu", "no such file"),
    ("bench startup {missing}", "no image file"),
    ("calibrate --device numpy", "Vulkan engine"),
    ("bundle inspect {text}", "not a vkocr bundle"),
    ("serve --config {missing}", "cannot read config"),
]


def exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as stopped:  # argparse's usage errors
        return int(stopped.code or 0)


@pytest.mark.parametrize(("command", "says"), CASES, ids=[c for c, _ in CASES])
def test_bad_input_is_one_line_and_a_failure(command: str, says: str, files: dict[str, str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code = exit_code(command.format(**files).split())
    err = capsys.readouterr().err
    assert code != 0, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert says in err


def vkocr_process(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "vkocr.agent.cli.main", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})


def read_one_line_and_close(process: subprocess.Popen[str]) -> tuple[str, int, str]:
    """`… | head -1`: the first line of stdout, then stdout closed; the exit status and stderr."""
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()
    process.stdout.close()
    err = process.stderr.read()
    return first, process.wait(timeout=300), err


@pytest.fixture(scope="module")
def agent() -> Iterator[str]:
    with running_agent(**{"device.select": "cpu"}) as background:
        yield background.target


@pytest.mark.parametrize("where", ["local", "agent"])
def test_a_closed_pipe_ends_quietly_with_141(where: str, files: dict[str, str], request: pytest.FixtureRequest
                                             ) -> None:
    images = [files["image"]] * 20  # far more lines than are read: the pipe is closed while they are written
    read = ["--json", "--no-det", "--no-cls"]
    if where == "local":
        process = vkocr_process("ocr", *images, *read, "--device", "cpu", "--models", "ppocrv4")
    else:
        process = vkocr_process("client", "ocr", *images, *read, "--target", request.getfixturevalue("agent"))
    first, code, err = read_one_line_and_close(process)
    assert '"LOT2041"' in first
    assert (code, err) == (141, "")


def test_without_a_vulkan_driver_infer_and_bench_kernels_say_which_device_they_can_use(
        files: dict[str, str]) -> None:
    no_driver = {"VK_DRIVER_FILES": files["missing"], "VK_ICD_FILENAMES": files["missing"], "VKOCR_DEVICE": ""}
    for argv, says in ((("infer", files["model"], "--input", files["tensor"], "--output", files["out"]),
                        "--device cpu (onnxruntime), --device numpy"),
                       (("bench", "kernels"), "name a Vulkan device outright (--device llvmpipe")):
        process = vkocr_process(*argv, env=no_driver)
        out, err = process.communicate(timeout=120)
        assert process.returncode == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert says in err
    done = vkocr_process("infer", files["model"], "--input", files["tensor"], "--output", files["out"],
                         "--device", "cpu", env=no_driver)
    out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    assert np.load(files["out"]).shape == (1, 1, 32, 32)  # the README's `--device cpu` runs it


def test_an_agent_certificate_from_another_ca_is_named_as_such(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A wrong --tls-ca fails our check of the agent's certificate: the hint names the CA, not --tls-cert."""
    from tests.agent.certs import make_tls_files
    from tests.agent.test_tls import identity_server
    from vkocr.agent.serving.tls import server_credentials

    ours, other = make_tls_files(tmp_path / "ours"), make_tls_files(tmp_path / "other")
    with identity_server(server_credentials(ours.server_cert, ours.server_key)) as port:
        code = exit_code(["client", "health", "--target", f"127.0.0.1:{port}", "--tls-ca", str(other.ca),
                          "--timeout", "5s"])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert f"not signed by the CA in --tls-ca {other.ca}" in err and "--tls-cert" not in err


def test_the_kernel_bench_offers_its_own_cases() -> None:
    from vkocr.agent.cli.bench_command import KERNEL_CASES
    from vkocr.engine.bench import CASE_NAMES

    assert KERNEL_CASES == CASE_NAMES
