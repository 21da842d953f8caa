"""Check and time the cooperative-matrix convolution (shaders/conv2d_coopmat.comp) on one device.

1. Opens the default device (or `--device SEL`) and says whether cooperative matrices serve there, with the
   shapes the device lists (fp16 A/B, fp32 C) and the one the kernel uses, or why not. Without them (lavapipe,
   a quirk, VKOCR_COOPMAT=0) it says "no cooperative matrix", writes the JSON and exits 0.
2. Runs ~20 convolutions (pointwise, 3×3, strided, dilated, grouped, tiny, partial tiles in M, N and K, det
   shapes) through `Conv2d` with the matrices asked for, fp32 and fp16 storage, against NumPy (vk/ops/conv.py)
   on NaN-poisoned outputs: relative-norm error ≤ 2e-3 (fp16 inputs give ~1e-3 at worst). Any mismatch or error
   prints MISMATCH and the script exits 1 after the table.
3. Times det-sized convolutions by GPU timestamps (as `vkocr bench kernels`): the SIMT kernel with fp32 and fp16
   storage, the matrices with fp32 and fp16 storage (fp16 through the automatic choice, whose kernel each row names).
4. Checks and times the recogniser's products by 2-D weights (its CTC head, 120 -> 18 710 classes, and the
   encoder's projections) through record_gemm: the automatic choice, the staged kernel asked for
   (pointwise_staged.comp) and gemm.comp's tile, each against NumPy, in both storages.

    python scripts/check_coopmat.py [--device SEL] [--json OUT] [--simt] [--small]

It imports vkocr from the checkout it sits in (whatever else is installed; VKOCR_CHECKOUT names another
checkout's root for every script that imports this finder: scripts/ab_models.py), numpy and vulkan only. `--simt`
runs steps 2 and 3 on the SIMT kernel alone: the script's own test on a device without matrices.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(os.environ.get("VKOCR_CHECKOUT") or Path(__file__).resolve().parent.parent).resolve()
# setup.py's FOLDERS: the checkout's folders as the one import package vkocr
FOLDERS = {"vkocr": "proto/vkocr", "vkocr.engine": "vk", "vkocr.agent": "agent", "vkocr.postproc": "postproc",
           "vkocr.shaders": "shaders"}


class _Checkout(importlib.abc.MetaPathFinder):
    """Finds vkocr's top packages in this checkout, ahead of any installed vkocr."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        folder = FOLDERS.get(name)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(name, ROOT / folder / "__init__.py",
                                                      submodule_search_locations=[str(ROOT / folder)])


sys.meta_path.insert(0, _Checkout())

from vkocr.engine.bench import time_replays  # noqa: E402
from vkocr.engine.coopmat import why_not  # noqa: E402
from vkocr.engine.device import Device  # noqa: E402
from vkocr.engine.errors import KernelArgumentError  # noqa: E402
from vkocr.engine.kernels.conv import Conv2d, conv_output_shape  # noqa: E402
from vkocr.engine.kernels.conv_coopmat import CoopmatTile, pick_coopmat_tile  # noqa: E402
from vkocr.engine.kernels.matmul import TILES, pick_tile, record_gemm  # noqa: E402
from vkocr.engine.kernels.pointwise_coopmat import FragmentTile, fragment_tile  # noqa: E402
from vkocr.engine.kernels.pointwise_staged import SQUARE, TALL_16  # noqa: E402
from vkocr.engine.ops.conv import conv2d  # noqa: E402
from vkocr.engine.recorder import Recorder  # noqa: E402
from vkocr.engine.tensor import Tensor  # noqa: E402

TOLERANCE = 2e-3
HARD = {"alpha": 1 / 6, "beta": 0.5}  # ONNX HardSigmoid/HardSwish defaults
WARMUP_S = 0.5
# the labels the convolution kernels dispatch under (vk/kernels/conv.py picks among them)
CONV_KERNELS = ("conv2d", "pointwise_coopmat", "pointwise_staged")


@dataclass(frozen=True)
class Case:
    x: tuple[int, int, int, int]  # N, Cin, H, W
    cout: int
    kernel: tuple[int, int]
    strides: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilations: tuple[int, int] = (1, 1)
    group: int = 1
    bias: bool = True
    activation: str = "none"
    post_affine: tuple[float, float] | None = None
    residual: bool = False  # passes.fuse_residual's Add, in the epilogue
    what: str = ""
    attrs: dict[str, float] = field(default_factory=dict)

    def conv_attrs(self) -> dict[str, Any]:
        return {"strides": self.strides, "pads": self.pads, "dilations": self.dilations, "group": self.group}

    def mnk(self) -> tuple[int, int, int]:
        _, _, oh, ow = conv_output_shape(self.x, self.w_shape(), **self.conv_attrs())
        return self.cout // self.group, oh * ow, self.x[1] // self.group * self.kernel[0] * self.kernel[1]

    def w_shape(self) -> tuple[int, int, int, int]:
        return self.cout, self.x[1] // self.group, *self.kernel

    def __str__(self) -> str:
        m, n, k = self.mnk()
        return f"{self.what:<22} x{self.x} -> {self.cout} k{self.kernel[0]}x{self.kernel[1]}  M{m} N{n} K{k}"


CASES = [
    Case((1, 16, 64, 64), 32, (1, 1), what="pointwise"),
    Case((2, 64, 33, 47), 96, (1, 1), bias=False, what="pointwise, batch 2"),
    Case((1, 16, 40, 56), 16, (3, 3), pads=(1, 1, 1, 1), activation="relu", what="3x3 pad 1, relu"),
    Case((1, 32, 37, 29), 64, (3, 3), pads=(1, 1, 1, 1), bias=False, what="3x3 pad 1, no bias"),
    Case((1, 32, 45, 61), 48, (3, 3), strides=(2, 2), pads=(1, 1, 1, 1), what="3x3 stride 2"),
    Case((1, 24, 31, 33), 32, (3, 3), pads=(2, 2, 2, 2), dilations=(2, 2), what="3x3 dilation 2"),
    Case((1, 64, 20, 24), 64, (3, 3), pads=(1, 1, 1, 1), group=2, what="grouped 3x3 (2)"),
    Case((2, 128, 17, 19), 128, (1, 1), group=4, what="grouped 1x1 (4), batch 2"),
    Case((1, 16, 3, 3), 16, (3, 3), pads=(1, 1, 1, 1), what="tiny 3x3"),
    Case((1, 16, 1, 1), 16, (1, 1), what="tiny 1x1 (N = 1)"),
    Case((1, 20, 23, 19), 17, (3, 3), pads=(1, 1, 1, 1), what="partial M (17)"),
    Case((1, 5, 30, 30), 100, (3, 3), pads=(1, 1, 1, 1), what="partial M, K (45)"),
    Case((1, 3, 96, 128), 16, (3, 3), strides=(2, 2), pads=(1, 1, 1, 1), activation="hardswish",
         what="input conv, hswish"),
    Case((1, 16, 12, 40), 24, (3, 5), strides=(2, 1), pads=(1, 2, 0, 3), what="3x5 asym pads, s(2,1)"),
    Case((1, 16, 19, 17), 32, (5, 5), pads=(2, 2, 2, 2), activation="sigmoid", what="5x5, sigmoid"),
    Case((2, 32, 21, 23), 48, (3, 3), pads=(1, 1, 1, 1), activation="relu", post_affine=(0.5, -0.25),
         what="batch 2, post-affine"),
    Case((1, 16, 368, 512), 16, (1, 1), what="det 1x1 16->16"),
    Case((1, 16, 368, 512), 32, (3, 3), pads=(1, 1, 1, 1), activation="relu", what="det 3x3 16->32"),
    Case((1, 64, 184, 256), 64, (3, 3), pads=(1, 1, 1, 1), what="det 3x3 64->64"),
    Case((1, 128, 92, 128), 96, (3, 3), pads=(1, 1, 1, 1), what="det 3x3 128->96 (K 1152)"),
    Case((1, 96, 46, 64), 96, (1, 1), activation="hardsigmoid", what="det 1x1 96->96"),
    Case((1, 32, 46, 64), 32, (1, 1), activation="relu", residual=True, what="1x1 + residual"),
    Case((1, 20, 23, 19), 17, (3, 3), pads=(1, 1, 1, 1), residual=True, what="partial M + residual"),
    # the fragment kernel's edges (fp16): blocks moved back at M's and N's ends, groups, the epilogue
    Case((2, 48, 23, 40), 40, (1, 1), activation="relu", residual=True, what="1x1 M 40 N 920, residual"),
    Case((1, 64, 10, 12), 64, (1, 1), group=2, activation="hardswish", post_affine=(0.5, -0.25),
         what="grouped 1x1 (2), hswish, post-affine"),
]

# PP-OCRv6 small's costliest convolutions: det at 1x3x736x1024, rec at 16x3x48x320
TIMED = [
    Case((1, 96, 184, 256), 24, (3, 3), pads=(1, 1, 1, 1), what="det Conv.82 3x3 96->24"),
    Case((1, 48, 368, 512), 24, (3, 3), strides=(2, 2), pads=(1, 1, 1, 1), what="det Conv.3 3x3 s2 48->24"),
    Case((1, 48, 184, 256), 96, (1, 1), what="det Conv.8 1x1 48->96"),
    Case((1, 96, 184, 256), 48, (1, 1), what="det Conv.9 1x1 96->48"),
    Case((1, 96, 92, 128), 192, (1, 1), what="det Conv.22 1x1 96->192"),
    Case((1, 192, 46, 64), 384, (1, 1), what="det Conv.41 1x1 192->384"),
    Case((1, 768, 23, 32), 384, (1, 1), what="det Conv.53 1x1 768->384"),
    Case((16, 96, 24, 160), 48, (3, 3), strides=(2, 2), pads=(1, 1, 1, 1), what="rec Conv.3 3x3 s2 96->48"),
    Case((16, 192, 6, 80), 384, (1, 1), what="rec Conv.22 1x1 192->384"),
    Case((16, 768, 3, 80), 384, (1, 1), what="rec Conv.53 1x1 768->384"),
]
# Tiles to compare with the picked one (--tiles): 128 or 256 invocations on a 32-wide subgroup
EXTRA_TILES = {
    "thin 16x128": CoopmatTile(sg_m=1, sg_n=4, fm=1, fn=2),
    "wide 64x128/256": CoopmatTile(sg_m=2, sg_n=4, fm=2, fn=2),
    "big 128x128/256": CoopmatTile(sg_m=4, sg_n=2, fm=2, fn=4),
}


def act_attrs(case: Case) -> dict[str, Any]:
    extra = HARD if case.activation in ("hardswish", "hardsigmoid") else {}
    return {"activation": case.activation, **extra}


def prepared(case: Case) -> Conv2d:
    return Conv2d(case.w_shape(), has_bias=case.bias, **case.conv_attrs(), **act_attrs(case),
                  post_affine=case.post_affine)


def inputs(case: Case, rng: np.random.Generator, dtype: Any) -> list[np.ndarray | None]:
    x = rng.uniform(-1, 1, case.x).astype(dtype)
    w = rng.uniform(-1, 1, case.w_shape()).astype(dtype)
    b = rng.uniform(-1, 1, (case.cout,)).astype(dtype) if case.bias else None
    return [x, w, b]


def reference(case: Case, x: np.ndarray, w: np.ndarray, b: np.ndarray | None, dtype: Any) -> np.ndarray:
    """The exact result on the stored inputs, rounded once to the output's storage dtype."""
    f32 = np.float32
    y = conv2d(x.astype(f32), w.astype(f32), b.astype(f32) if b is not None else None, **case.conv_attrs(),
               **act_attrs(case))
    if case.post_affine is not None:
        y = y * f32(case.post_affine[0]) + f32(case.post_affine[1])
    return np.asarray(y).astype(dtype)


def rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    ref64 = np.asarray(ref, np.float64)
    diff = np.linalg.norm(np.asarray(out, np.float64) - ref64)
    return float(diff / max(float(np.linalg.norm(ref64)), 1e-30))


def record_case(rec: Recorder, conv: Conv2d, t: list[Tensor | None], coopmat: bool | None,
                residual: Tensor | None = None, tile: CoopmatTile | FragmentTile | None = None) -> None:
    x, w, out, b = t
    assert x is not None and w is not None and out is not None
    conv.record(rec, x, w, out, b, coopmat=coopmat, residual=residual, coopmat_tile=tile)


def check_cases(device: Device, precisions: list[Any], coopmat: bool | None, small: bool = False
                ) -> tuple[list[dict[str, Any]], int]:
    rng = np.random.default_rng(36)
    rows, failures = [], 0
    print(f"\n{'case':<72} {'storage':<8} {'tile':<10} {'rel err':>9}  result")
    for case in CASES:
        if small and case.what.startswith("det"):
            continue
        m, n, k = case.mnk()
        # fp16 pointwise convolutions the fragment kernel can take are checked on it too
        found = None
        if coopmat and np.float16 in precisions and case.kernel == (1, 1) and case.strides == (1, 1):
            try:
                found = fragment_tile(device, "fp16", m, k, n, pointwise=case.pads == (0, 0, 0, 0), want=True)
            except KernelArgumentError:
                pass  # not one it takes
        kinds = [(dtype, None) for dtype in precisions] + ([(np.float16, found[1])] if found else [])
        for dtype, fragments in kinds:
            name = np.dtype(dtype).name
            tile = "simt"
            if fragments is not None and device.coopmat_shape is not None:
                rm, rn = fragments.block(device.coopmat_shape)
                tile = f"frag {rm}x{rn}"
            elif coopmat and device.coopmat_shape is not None:
                t = pick_coopmat_tile(m, device.coopmat_shape)
                tile = f"{t.sg_m * t.fm * device.coopmat_shape[0]}x{t.sg_n * t.fn * device.coopmat_shape[1]}"
            row: dict[str, Any] = {"case": str(case).strip(), "storage": name, "m": m, "n": n, "k": k, "tile": tile}
            tensors: list[Tensor] = []
            try:
                x, w, b = inputs(case, rng, dtype)
                assert x is not None and w is not None
                ref = reference(case, x, w, b, dtype)
                tr = None
                if case.residual:
                    r = rng.uniform(-1, 1, ref.shape).astype(dtype)
                    ref = (reference(case, x, w, b, np.float32) + r.astype(np.float32)).astype(dtype)
                    tr = device.upload(r)
                    tensors.append(tr)
                tx, tw = device.upload(x), device.upload(w)
                tensors += [tx, tw]
                tb = device.upload(b) if b is not None else None
                if tb is not None:
                    tensors.append(tb)
                out = device.upload(np.full(ref.shape, np.nan, dtype=dtype))
                tensors.append(out)
                conv = prepared(case)
                with Recorder(device) as rec:
                    record_case(rec, conv, [tx, tw, out, tb], coopmat, tr, fragments)
                    rec.run()
                got = device.download(out)
                unwritten = int(np.isnan(got).sum())
                err = rel_err(got, ref)
                ok = unwritten == 0 and err <= TOLERANCE
                row.update(rel_err=err, unwritten=unwritten, ok=ok)
                verdict = "ok" if ok else f"MISMATCH ({unwritten} unwritten)" if unwritten else "MISMATCH"
            except Exception as exc:  # noqa: BLE001  (a kernel that fails to build or run is a failure too)
                row.update(rel_err=None, ok=False, error=f"{type(exc).__name__}: {exc}")
                verdict = f"MISMATCH (error: {type(exc).__name__}: {exc})"
                traceback.print_exc()
                err = float("nan")
            finally:
                for t in tensors:
                    device.free(t)
            failures += not row["ok"]
            print(f"{str(case):<72} {name:<8} {tile:<10} {err:>9.2e}  {verdict}", flush=True)
            rows.append(row)
    return rows, failures


def time_one(device: Device, case: Case, dtype: Any, coopmat: bool | None, repeats: int, rounds: int,
             tile: CoopmatTile | None = None) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    x, w, b = inputs(case, rng, dtype)
    assert x is not None and w is not None
    shape = conv_output_shape(case.x, case.w_shape(), **case.conv_attrs())
    tx, tw, out = device.upload(x), device.upload(w), device.tensor(shape, dtype)
    tb = device.upload(b) if b is not None else None
    conv = prepared(case)
    try:
        def record(rec: Recorder) -> None:
            record_case(rec, conv, [tx, tw, out, tb], coopmat, tile=tile)

        timings = [t for t in time_replays(device, record, repeats, rounds, WARMUP_S)
                   if t.label.startswith(CONV_KERNELS)]
        kernels = sorted({t.label for t in timings})
        samples = [t.ms for t in timings]
    finally:
        for t in (tx, tw, out, tb):
            if t is not None:
                device.free(t)
    m, n, k = case.mnk()
    flops = 2.0 * m * n * k * case.group * case.x[0]
    best = min(samples)
    return {"kernel": ",".join(kernels), "min_ms": best, "median_ms": statistics.median(samples),
            "tflops": flops / (best * 1e-3) / 1e12}


Variant = tuple[str, Any, "bool | None", "CoopmatTile | None"]  # label, storage dtype, coopmat, forced tile


def time_cases(device: Device, variants: list[Variant], repeats: int, rounds: int
               ) -> tuple[list[dict[str, Any]], int]:
    rows, failures = [], 0
    print(f"\n{'GPU time per conv (min / median ms, TFLOP/s at min)':<60}" + "".join(f"{v[0]:>26}" for v in variants))
    for case in TIMED:
        row: dict[str, Any] = {"case": str(case).strip()}
        cells = []
        for label, dtype, coopmat, tile in variants:
            try:
                got = time_one(device, case, dtype, coopmat, repeats, rounds, tile)
            except Exception as exc:  # noqa: BLE001
                traceback.print_exc()
                got = {"error": f"{type(exc).__name__}: {exc}"}
            if "error" in got:
                failures += 1
                cells.append(f"{'MISMATCH: ' + got['error'][:14]:>26}")
            else:
                cells.append(f"  {got['min_ms']:>7.3f} /{got['median_ms']:>7.3f} {got['tflops']:>5.1f} TF")
            row[label] = got
        ran = ", ".join(sorted({str(got["kernel"]) for label, got in row.items() if label.endswith("(auto)")
                                and isinstance(got, dict) and "kernel" in got}))
        print(f"{case.what:<60}" + "".join(cells) + (f"  auto: {ran}" if ran else ""), flush=True)
        rows.append(row)
    return rows, failures


# PP-OCRv6 small's rec at 16 lines × 40 time steps: (rows, N, K, a bias per column)
GEMMS = [("rec CTC head 120 -> 18710", 640, 18710, 120, True), ("rec qkv 120 -> 360", 640, 360, 120, True),
         ("rec proj 120 -> 120", 640, 120, 120, True), ("rec mlp 120 -> 240", 640, 240, 120, True),
         ("rec mlp 240 -> 120", 640, 120, 240, True)]


def check_gemms(device: Device, precisions: list[Any], repeats: int, rounds: int, small: bool = False
                ) -> tuple[list[dict[str, Any]], int]:
    """Step 4: each of GEMMS under the automatic choice, the staged kernel asked for and gemm.comp's own tile,
    against NumPy (NaN-poisoned outputs) and timed; `small`: one line's 40 rows, untimed."""
    rows: list[dict[str, Any]] = []
    failures = 0
    print(f"\n{'product by 2-D weights (rel err, min / median ms)':<44}{'storage':<9}"
          f"{'automatic':>36}{'staged':>30}{'gemm.comp':>30}")
    for what, m, n, k, has_bias in GEMMS:
        m = 40 if small else m
        for dtype in precisions:
            rng = np.random.default_rng(0)
            a_np = rng.uniform(-1, 1, (m, k)).astype(dtype)
            b_np = (rng.uniform(-1, 1, (k, n)) / np.sqrt(k)).astype(dtype)
            c_np = rng.uniform(-1, 1, (n,)).astype(dtype) if has_bias else None
            ref = a_np.astype(np.float64) @ b_np.astype(np.float64) + (c_np if c_np is not None else 0.0)
            simt = next(name for name, t in TILES.items() if t == pick_tile(m, n, 1, None, k))
            staged = SQUARE if dtype == np.float16 else TALL_16
            row: dict[str, Any] = {"case": what, "storage": np.dtype(dtype).name}
            cells = []
            for label, tile in (("auto", None), ("staged", staged), ("gemm", simt)):
                a, b = device.upload(a_np), device.upload(b_np)
                c = device.upload(c_np) if c_np is not None else None
                out = device.upload(np.full((m, n), np.nan, dtype))
                try:
                    def record(rec: Recorder, tensors: Any = (a, b, out, c), tile: Any = tile) -> None:
                        record_gemm(rec, *tensors[:3], tensors[3], tile=tile)

                    with Recorder(device) as rec:
                        record(rec)
                        rec.run()
                    err = rel_err(device.download(out), ref)
                    timings = time_replays(device, record, 1 if small else repeats, 1 if small else rounds,
                                           0.0 if small else WARMUP_S)
                    samples = [t.ms for t in timings]
                    got = {"kernel": ",".join(sorted({t.label for t in timings})), "rel_err": err,
                           "min_ms": min(samples), "median_ms": statistics.median(samples)}
                    ok = err <= TOLERANCE
                    cell = (f"{got['kernel'][:10]} {err:.1e} {got['min_ms']:.3f}/{got['median_ms']:.3f}"
                            + ("" if ok else " MISMATCH"))
                except Exception as exc:  # noqa: BLE001  (a kernel that fails to build or run is a failure too)
                    traceback.print_exc()
                    got, ok, cell = {"error": f"{type(exc).__name__}: {exc}"}, False, f"MISMATCH: {type(exc).__name__}"
                finally:
                    for t in (a, b, c, out):
                        if t is not None:
                            device.free(t)
                failures += not ok
                row[label] = got
                cells.append(f"  {cell:>28}" if label != "auto" else f"  {cell:>34}")
            print(f"{what:<44}{np.dtype(dtype).name:<9}" + "".join(cells), flush=True)
            rows.append(row)
    return rows, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default=None, help="index, UUID or name part (default: the automatic choice)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--simt", action="store_true", help="check and time the SIMT kernel alone (any device)")
    parser.add_argument("--repeats", type=int, default=20, help="dispatches per timed recording")
    parser.add_argument("--rounds", type=int, default=3, help="timed replays per variant")
    parser.add_argument("--tiles", action="store_true", help="also time fp16 with each tile of EXTRA_TILES")
    parser.add_argument("--small", action="store_true",
                        help="skip the det-sized checks and the timings, and check the products at one line's 40 rows "
                             "(a CPU implementation of Vulkan)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with Device(args.device) as device:
        info = device.info
        result: dict[str, Any] = {
            "device": info.name, "driver": f"{info.driver_name} {info.driver_version}", "api": info.api_version,
            "subgroup_size": info.subgroup_size, "coopmat_shapes": [list(s) for s in info.coopmat_shapes],
            "coopmat": list(device.coopmat_shape) if device.coopmat_shape else None,
            "coopmat_unused_because": device.coopmat_why_not, "fp16_storage": info.fp16_storage,
        }
        print(f"device: {info.name} ({info.driver_name} {info.driver_version}, Vulkan {info.api_version}, "
              f"subgroup {info.subgroup_size})")
        listed = ", ".join("x".join(map(str, s)) for s in info.coopmat_shapes) or "none"
        if device.coopmat_shape is None:
            print(f"no cooperative matrix: {device.coopmat_why_not or why_not(info, device.workarounds)} "
                  f"(shapes listed with fp16 inputs and fp32 accumulators: {listed})")
        else:
            print(f"cooperative matrix: usable, {'x'.join(map(str, device.coopmat_shape))} used "
                  f"(fp16 inputs, fp32 accumulators; listed: {listed})")
        precisions: list[Any] = [np.float32] + ([np.float16] if info.fp16_storage else [])
        failures = 0
        if device.coopmat_shape is not None or args.simt:
            coopmat = False if args.simt else True
            result["checks"], failed = check_cases(device, precisions, coopmat, args.small)
            failures += failed
            variants: list[Variant] = [("simt fp32", np.float32, False, None)]
            if info.fp16_storage:
                variants.append(("simt fp16", np.float16, False, None))
            if not args.simt:
                variants.append(("coopmat fp32", np.float32, True, None))
                if info.fp16_storage:
                    variants.append(("coopmat fp16 (auto)", np.float16, None, None))  # with VKOCR_COOPMAT=1
                    variants += [(f"fp16 {name}", np.float16, True, tile) for name, tile in EXTRA_TILES.items()
                                 if args.tiles]
            if not args.small:
                result["timings"], failed = time_cases(device, variants, args.repeats, args.rounds)
                failures += failed
            if not args.simt:
                result["gemms"], failed = check_gemms(device, precisions, args.repeats, args.rounds, args.small)
                failures += failed
        result["failures"] = failures
        result["seconds"] = round(time.perf_counter() - started, 1)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json}")
    if failures:
        print(f"\n*** MISMATCH: {failures} check(s) failed: see the rows marked MISMATCH above ***", file=sys.stderr)
        return 1
    if "checks" not in result:
        print("no cooperative matrix: nothing to check on this device")
    else:
        print(f"\nall checks passed in {result['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
