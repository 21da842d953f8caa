"""`vkocr infer`, `inspect` and `debug compare` on the real classifier model, as a user runs them."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest

from tests.agent.cli.test_cli import vkocr
from tests.paths import MODELS

CLS = MODELS / "ch_ppocr_mobile_v2.0_cls_infer.onnx"


@pytest.fixture
def cls_input(tmp_path) -> tuple[str, np.ndarray]:  # type: ignore[no-untyped-def]
    x = np.random.default_rng().uniform(-1, 1, (2, 3, 48, 192)).astype(np.float32)
    path = tmp_path / "in.npy"
    np.save(path, x)
    return str(path), x


@pytest.mark.parametrize("device", ["llvmpipe", "numpy"])
def test_infer_writes_what_onnxruntime_computes(cls_input, tmp_path, device) -> None:  # type: ignore[no-untyped-def]
    path, x = cls_input
    out = tmp_path / "out.npy"
    args = ["infer", str(CLS), "--input", path, "--output", str(out), "--device", device]
    run = vkocr(*args)
    assert run.returncode == 0, run.stderr
    assert ("cpu (numpy)" in run.stdout) == (device == "numpy")
    ref = ort.InferenceSession(str(CLS), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = np.load(out)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) <= 1e-4


def test_inspect_reports_passes_dispatches_and_memory() -> None:
    run = vkocr("inspect", str(CLS), "--shape", "6x3x48x192", "--json", "--device", "llvmpipe")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["nodes_after_passes"] < report["nodes_imported"]
    assert "BatchNormalization" not in report["ops_after_passes"]
    assert report["dispatches"] > 0 and report["weights_mib"] > 0
    assert 0 < report["activation_peak_mib"] < report["one_buffer_per_tensor_mib"]
    assert "conv2d" in report["pipelines"]
    assert report["output_shape"] == [6, 2]


def test_debug_compare_finds_no_divergence_on_a_correct_model(cls_input) -> None:  # type: ignore[no-untyped-def]
    run = vkocr("debug", "compare", str(CLS), "--input", cls_input[0], "--json", "--device", "llvmpipe")
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert report["compared"] > 50 and report["first_divergence"] is None


def test_infer_refuses_a_wrong_input_clearly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((2, 3, 48, 192), np.float64))
    run = vkocr("infer", str(CLS), "--input", str(bad), "--output", str(tmp_path / "o.npy"))
    assert run.returncode == 2 and "float32" in run.stderr and "Traceback" not in run.stderr
    wrong_channels = tmp_path / "wrong.npy"
    np.save(wrong_channels, np.ones((1, 4, 48, 192), np.float32))
    run = vkocr("infer", str(CLS), "--input", str(wrong_channels), "--output", str(tmp_path / "o.npy"),
                "--device", "llvmpipe")
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert "dimension 1 must be 3" in run.stderr, run.stderr


def test_infer_on_cpu_runs_onnxruntime(cls_input, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`--device cpu` is the CPU backend, onnxruntime, as the README's table says (it once asked for numpy)."""
    path, x = cls_input
    run = vkocr("infer", str(CLS), "--input", path, "--output", str(tmp_path / "o.npy"), "--device", "cpu")
    assert run.returncode == 0 and "onnxruntime" in run.stdout and "Traceback" not in run.stderr, run.stderr
    ref = ort.InferenceSession(str(CLS), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.linalg.norm(np.load(tmp_path / "o.npy") - ref) / np.linalg.norm(ref) <= 1e-6
