"""Time PP-OCRv6 small's convolutions under every tile of both convolution kernels, on one device.

For each convolution shape (det at 1x3x736x1024, rec at 16x3x48x320) and each variant (the SIMT GEMM kernel under
each GemmTile, fp32 storage; the cooperative-matrix kernel under each CoopmatTile, fp32 as hi + lo pairs and fp16
storage; the 1×1 kernels under each FragmentTile (fp16) and StagedTile (both storages); the direct kernel for few
output channels under each of DIRECT_SHAPES, both storages; the tap-by-tap cooperative-matrix kernel of k×k
convolutions, vk/kernels/conv_taps.py's tile, both storages), the script checks the output against NumPy once
(relative error ≤ 2e-3, none of the NaN poison left) and then times the dispatch by GPU timestamps after a warm-up
(TFLOP/s, and GB/s of the bytes it must move at least: near a copy's bandwidth a kernel waits on memory, far below
it on something else). It prints, per shape, the automatic choice and the fastest correct variants, and writes
every figure to --json: the data that vk/kernels/conv.py's and vk/kernels/conv_coopmat.py's choices are drawn
from.

    python scripts/sweep_conv_tiles.py [--device SEL] [--json OUT] [--only det|rec] [--kxk] [--no-coopmat]
        [--variants PREFIXES]

It imports vkocr from this checkout (scripts/check_coopmat.py's finder) and runs on any Vulkan device; without
cooperative matrices (lavapipe) it sweeps the SIMT tiles alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_coopmat as cc  # noqa: E402  (installs the checkout's finder for vkocr)

from vkocr.engine.bench import time_replays  # noqa: E402
from vkocr.engine.device import PIPELINE_STATS_ENV, PIPELINE_STATS_EXTENSION, Device  # noqa: E402
from vkocr.engine.kernels import conv_direct  # noqa: E402
from vkocr.engine.kernels import pointwise_staged as staged  # noqa: E402
from vkocr.engine.kernels.conv import conv_output_shape  # noqa: E402
from vkocr.engine.kernels.conv_coopmat import CoopmatTile  # noqa: E402
from vkocr.engine.kernels.conv_taps import TapsTile  # noqa: E402
from vkocr.engine.kernels.matmul import TILES, GemmTile  # noqa: E402
from vkocr.engine.kernels.pointwise_coopmat import FragmentTile  # noqa: E402
from vkocr.engine.kernels.pointwise_staged import StagedTile  # noqa: E402
from vkocr.engine.recorder import Recorder  # noqa: E402
from vkocr.engine.tensor import Tensor  # noqa: E402

Case = cc.Case
P1 = (1, 1, 1, 1)
SAME_UPPER_2X2 = (0, 0, 1, 1)
SHAPES = [
    Case((1, 3, 736, 1024), 24, (3, 3), strides=(2, 2), pads=P1, what="det Conv.0 3x3 s2 3->24"),
    Case((1, 24, 368, 512), 12, (2, 2), pads=SAME_UPPER_2X2, what="det Conv.1 2x2 24->12"),
    Case((1, 12, 368, 512), 24, (2, 2), pads=SAME_UPPER_2X2, what="det Conv.2 2x2 12->24"),
    Case((1, 48, 368, 512), 24, (3, 3), strides=(2, 2), pads=P1, what="det Conv.3 3x3 s2 48->24"),
    Case((1, 96, 184, 256), 24, (3, 3), pads=P1, what="det Conv.82 3x3 96->24"),
    Case((1, 48, 184, 256), 96, (1, 1), what="det Conv.8 1x1 48->96"),
    Case((1, 96, 184, 256), 48, (1, 1), what="det Conv.9 1x1 96->48"),
    Case((1, 96, 184, 256), 24, (1, 1), what="det Conv.79 1x1 96->24"),
    Case((1, 96, 92, 128), 192, (1, 1), what="det Conv.19 1x1 96->192"),
    Case((1, 192, 92, 128), 96, (1, 1), what="det Conv.20 1x1 192->96"),
    Case((1, 96, 92, 128), 96, (1, 1), what="det Conv.15 1x1 96->96"),
    Case((1, 192, 46, 64), 384, (1, 1), what="det Conv.30 1x1 192->384"),
    Case((1, 384, 46, 64), 192, (1, 1), what="det Conv.31 1x1 384->192"),
    Case((1, 384, 23, 32), 768, (1, 1), what="det Conv.49 1x1 384->768"),
    Case((1, 768, 23, 32), 384, (1, 1), what="det Conv.50 1x1 768->384"),
    Case((16, 3, 48, 320), 48, (3, 3), strides=(2, 2), pads=P1, what="rec Conv.0 3x3 s2 3->48"),
    Case((16, 48, 24, 160), 24, (2, 2), pads=SAME_UPPER_2X2, what="rec Conv.1 2x2 48->24"),
    Case((16, 24, 24, 160), 48, (2, 2), pads=SAME_UPPER_2X2, what="rec Conv.2 2x2 24->48"),
    Case((16, 96, 24, 160), 48, (3, 3), strides=(2, 2), pads=P1, what="rec Conv.3 3x3 s2 96->48"),
    Case((16, 96, 12, 80), 192, (1, 1), what="rec Conv.8 1x1 96->192"),
    Case((16, 192, 12, 80), 96, (1, 1), what="rec Conv.9 1x1 192->96"),
    Case((16, 192, 6, 80), 384, (1, 1), what="rec Conv.22 1x1 192->384"),
    Case((16, 384, 6, 80), 192, (1, 1), what="rec Conv.23 1x1 384->192"),
    Case((16, 384, 3, 80), 768, (1, 1), what="rec Conv.49 1x1 384->768"),
    Case((16, 768, 3, 80), 384, (1, 1), what="rec Conv.53 1x1 768->384"),
    Case((16, 384, 3, 80), 384, (1, 1), what="rec Conv.45 1x1 384->384"),
    Case((16, 384, 1, 40), 120, (1, 1), what="rec Conv.54 1x1 384->120"),
]
REC_BATCH = 16  # the rec cases' batch above; --batch sets another
# SIMT tiles beyond TILES: deeper BK (fewer steps along K, 8 fetched elements per operand), 8×8 per thread on 128
# invocations. On the H100 they beat TILES' best by up to ~10 % on a few deep-K convolutions (det Conv.31/49, rec
# Conv.49), which the matrices ran faster still (benchmarks/2026-12-05-h100-sweep-conv-tiles.json).
SIMT_EXTRA = {
    "wide16": GemmTile(64, 128, 16, 4, 8),
    "thin16": GemmTile(32, 128, 16, 4, 4),
    "tall16": GemmTile(128, 64, 16, 8, 4),
    "wide88": GemmTile(64, 128, 8, 8, 8),
    # K split between slices of one workgroup in other proportions than TILES' sliced (32×32, 4 slices): for
    # the small batches of rec that real traffic brings, whose convolutions make few workgroups of any tile
    "sliced2": GemmTile(32, 32, 8, 4, 4, slices=2),
    "sliced16x2": GemmTile(32, 32, 16, 4, 4, slices=2),
    "sliced32x64x2": GemmTile(32, 64, 8, 4, 4, slices=2),
    "sliced64x32x2": GemmTile(64, 32, 8, 4, 4, slices=2),
}
COOPMAT_TILES = {
    "narrow": CoopmatTile(sg_m=1, sg_n=4, fm=2, fn=2),
    "wide": CoopmatTile(sg_m=2, sg_n=4, fm=2, fn=2),
    "big": CoopmatTile(sg_m=4, sg_n=2, fm=2, fn=4),
    "sq64": CoopmatTile(sg_m=2, sg_n=2, fm=2, fn=2),
    # half of wide's accumulators per subgroup (fewer registers: more workgroups per multiprocessor)
    "wide_fn1": CoopmatTile(sg_m=2, sg_n=4, fm=2, fn=1),
    "tall_fm1": CoopmatTile(sg_m=4, sg_n=2, fm=1, fn=2),
    "flat_fm1": CoopmatTile(sg_m=1, sg_n=8, fm=1, fn=2),
}
# the fragment kernel's (fp16 pointwise convolutions, vk/kernels/pointwise_coopmat.py); the first is the engine's
FRAGMENT_TILES = {
    "single": FragmentTile(sg_m=1, sg_n=1),
    "square": FragmentTile(),
    "square_fm1": FragmentTile(fm=1),
    "flat": FragmentTile(sg_m=1, sg_n=4),
    "wide": FragmentTile(sg_m=2, sg_n=4),
    "tall": FragmentTile(sg_m=4, sg_n=2),
}
# the staged kernel's (vk/kernels/pointwise_staged.py: 16-byte copies into shared tiles), fp16 and fp32 storage
STAGED_TILES = {
    "wide": staged.WIDE,                                      # 64 × 128, 8 subgroups
    "wide_k4": StagedTile(sg_m=2, sg_n=4, fm=2, fn=2, ksteps=4),
    "big": StagedTile(sg_m=2, sg_n=2, fm=2, fn=4),            # 64 × 128, 4 subgroups of 8 accumulators
    "large": StagedTile(sg_m=4, sg_n=2, fm=2, fn=4),          # 128 × 128, 8 subgroups of 8 accumulators
    "tall": StagedTile(sg_m=4, sg_n=2, fm=2, fn=2),           # 128 × 64 (16 deep: the engine's in fp32)
    "sq64": staged.SQUARE,                                    # 64 × 64, 4 subgroups: the engine's in fp16
    "sq64_k4": StagedTile(sg_m=2, sg_n=2, fm=2, fn=2, ksteps=4),
    "flat": StagedTile(sg_m=1, sg_n=4, fm=2, fn=2),           # 32 × 128
    "small": StagedTile(sg_m=1, sg_n=2, fm=2, fn=2),          # 32 × 64, 2 subgroups
    "small_k4": StagedTile(sg_m=1, sg_n=2, fm=2, fn=2, ksteps=4),
}
# the direct kernel's (output columns per invocation, workgroup columns × rows); the first is the engine's
DIRECT_SHAPES = [(2, (16, 4)), (1, (16, 4)), (4, (16, 4)), (2, (32, 4)), (1, (32, 4))]
WARMUP_S = 0.1  # per variant, after a first second that brings the clocks up


Variant = tuple[str, Any, "bool | None", Any, "CoopmatTile | FragmentTile | None", "tuple[int, tuple[int, int]] | None",
                "bool | tuple[int, int]"]
# the tap-by-tap kernel's (rows, column blocks) beyond its own choice; each case's output channels give the rest
TAPS_SHAPES = [(4, 1), (4, 2), (4, 4), (2, 2), (8, 1), (8, 2)]


def variants(device: Device, coopmat: bool, simt_tiles: list[str] | None = None,
             coopmat_tiles: list[str] | None = None) -> list[Variant]:
    """(label, storage dtype, coopmat, SIMT tile, coopmat tile, direct shape, taps): the direct kernel runs
    exactly where a direct shape is given (it refuses more than DIRECT_MAX_COUT output channels: an error row),
    the tap-by-tap kernel where taps is True (an error row where it cannot take the convolution)."""
    out: list[Variant] = [("auto fp32", np.float32, None, None, None, None, False),
                          ("auto fp16", np.float16, None, None, None, None, False)]
    out += [(f"simt {name}", np.float32, False, tile, None, None, False)
            for name, tile in {**TILES, **SIMT_EXTRA}.items() if simt_tiles is None or name in simt_tiles]
    for tw, local in DIRECT_SHAPES:
        for dtype in (np.float32, np.float16):
            out.append((f"direct tw{tw} {local[0]}x{local[1]} {np.dtype(dtype).name[5:]}", dtype, False, None, None,
                        (tw, local), False))
    if coopmat and device.coopmat_shape is not None:
        limit = device.info.max_shared_memory_bytes
        for name, tile in COOPMAT_TILES.items():
            if coopmat_tiles is not None and name not in coopmat_tiles:
                continue
            for dtype, split, depths in ((np.float32, True, (1, 2)), (np.float16, False, (2, 4))):
                for ksteps in depths:
                    t = CoopmatTile(tile.sg_m, tile.sg_n, tile.fm, tile.fn, ksteps)
                    if t.shared_bytes(device.coopmat_shape, split) <= limit:
                        label = f"cm {name} k{ksteps} {np.dtype(dtype).name[5:]}"
                        out.append((label, dtype, True, None, t, None, False))
        out += [(f"frag {name} fp16", np.float16, True, None, t, None, False) for name, t in FRAGMENT_TILES.items()]
        for name, t in STAGED_TILES.items():
            if t.shared_bytes(device.coopmat_shape) <= limit:
                out.append((f"staged {name} fp16", np.float16, True, None, t, None, False))
            # fp32's hi and lo tiles: half as deep where the fp16 depth does not fit
            t32 = (t if t.shared_bytes(device.coopmat_shape, True) <= limit
                   else dataclasses.replace(t, ksteps=t.ksteps // 2))
            if t32.ksteps and t32.shared_bytes(device.coopmat_shape, True) <= limit:
                out.append((f"staged {name} k{t32.ksteps} fp32", np.float32, True, None, t32, None, False))
        for dtype in (np.float32, np.float16):
            out.append((f"taps {np.dtype(dtype).name[5:]}", dtype, None, None, None, None, True))
            out += [(f"taps r{rows} fp{fp} {np.dtype(dtype).name[5:]}", dtype, None, None, None, None, (rows, fp))
                    for rows, fp in TAPS_SHAPES]
    return out


def run_variant(device: Device, case: cc.Case, dtype: Any, coopmat: bool | None, simt: Any,
                tile: CoopmatTile | FragmentTile | None, repeats: int, rounds: int,
                direct: tuple[int, tuple[int, int]] | None = None, taps: bool | tuple[int, int] = False
                ) -> dict[str, Any]:
    saved = conv_direct.COLUMNS_PER_INVOCATION, conv_direct.LOCAL_XY
    if direct is not None:  # the kernel reads these when it records: set for this variant, restored after
        conv_direct.COLUMNS_PER_INVOCATION, conv_direct.LOCAL_XY = direct
    try:
        return timed_variant(device, case, dtype, coopmat, simt, tile, repeats, rounds,
                             True if direct is not None else None if coopmat is None and simt is None else False,
                             taps)
    finally:
        conv_direct.COLUMNS_PER_INVOCATION, conv_direct.LOCAL_XY = saved


def timed_variant(device: Device, case: cc.Case, dtype: Any, coopmat: bool | None, simt: Any,
                  tile: CoopmatTile | FragmentTile | None, repeats: int, rounds: int, direct: bool | None,
                  taps: bool | tuple[int, int] = False) -> dict[str, Any]:
    rng = np.random.default_rng()
    x, w, b = cc.inputs(case, rng, dtype)
    assert x is not None and w is not None
    ref = cc.reference(case, x, w, b, dtype)
    shape = conv_output_shape(case.x, case.w_shape(), **case.conv_attrs())
    tx, tw = device.upload(x), device.upload(w)
    tb = device.upload(b) if b is not None else None
    out = device.upload(np.full(shape, np.nan, dtype=dtype))
    conv = cc.prepared(case)
    forced = None
    if isinstance(taps, tuple) and device.coopmat_shape is not None:
        forced = TapsTile(*taps, fn=-(-case.cout // device.coopmat_shape[1]))
    try:
        def record(rec: Recorder, t: list[Tensor | None] = [tx, tw, out, tb]) -> None:  # noqa: B006
            xx, ww, oo, bb = t
            assert xx is not None and ww is not None and oo is not None
            conv.record(rec, xx, ww, oo, bb, tile=simt, coopmat=coopmat, coopmat_tile=tile, direct=direct,
                        taps=True if taps else None, taps_tile=forced)

        with Recorder(device) as rec:
            record(rec)
            rec.run()
        got = device.download(out)
        err, unwritten = cc.rel_err(got, ref), int(np.isnan(got).sum())
        if unwritten or not err <= cc.TOLERANCE:
            return {"error": f"wrong: rel err {err:.2e}, {unwritten} unwritten"}
        timings = time_replays(device, record, repeats, rounds, WARMUP_S)
        kernels = {t.label for t in timings}
        samples = [t.ms for t in timings]
    finally:
        for t in (tx, tw, out, tb):
            if t is not None:
                device.free(t)
    m, n, k = case.mnk()
    best = min(samples)
    # what the dispatch must move at least (input, weights, bias, output once each): set against a copy's
    # bandwidth, whether a kernel waits on memory or on something else
    moved = x.nbytes + w.nbytes + (b.nbytes if b is not None else 0) + ref.size * np.dtype(dtype).itemsize
    return {"kernel": ",".join(sorted(kernels)), "min_ms": best, "median_ms": statistics.median(samples),
            "tflops": 2.0 * m * n * k * case.group * case.x[0] / (best * 1e-3) / 1e12,
            "gb_per_s": moved / (best * 1e-3) / 1e9, "rel_err": err}


def pipeline_statistics(device: Device) -> list[dict[str, Any]]:
    """Each pipeline's kernel, constants and driver statistics, printed one line each."""
    rows = []
    if not device.pipeline_stats:
        print(f"no pipeline statistics on {device.info.name} ({PIPELINE_STATS_EXTENSION} not offered)")
    for pipeline in device.pipelines():
        stats = pipeline.statistics()
        rows.append({"kernel": pipeline.kernel.spirv_name, "constants": list(pipeline.constants), "stats": stats})
        if stats:
            shown = ", ".join(f"{k}={v}" for k, v in stats.items())
            print(f"{pipeline.kernel.spirv_name:<22} {str(pipeline.constants):<58} {shown}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default=None, help="index, UUID or name part (default: the automatic choice)")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    parser.add_argument("--only", choices=("det", "rec"), default=None, help="one model's shapes")
    parser.add_argument("--pointwise", action="store_true", help="only the 1×1 convolutions")
    parser.add_argument("--kxk", action="store_true", help="only the k×k convolutions")
    parser.add_argument("--no-coopmat", action="store_true", help="the SIMT kernels' tiles alone")
    parser.add_argument("--simt-tiles", default=None, help="comma-separated names of TILES to time (default: all)")
    parser.add_argument("--coopmat-tiles", default=None,
                        help=f"comma-separated names of {', '.join(COOPMAT_TILES)} to time (default: all)")
    parser.add_argument("--variants", default=None,
                        help="comma-separated label prefixes of the variants to time (e.g. 'auto,staged,frag single'; "
                             "default: all)")
    parser.add_argument("--stats", action="store_true",
                        help="also the driver's statistics of every pipeline (registers, shared and local memory; "
                             "VKOCR_PIPELINE_STATS=1, where the driver offers them)")
    parser.add_argument("--batch", type=int, default=REC_BATCH,
                        help=f"lines per rec case (1..64; default {REC_BATCH}): real traffic reads 1 to 6 at a time")
    parser.add_argument("--repeats", type=int, default=10, help="dispatches per timed recording (1..1000)")
    parser.add_argument("--rounds", type=int, default=3, help="timed replays per variant (1..100)")
    args = parser.parse_args(argv)
    if not 1 <= args.repeats <= 1000 or not 1 <= args.rounds <= 100 or not 1 <= args.batch <= 64:
        parser.error("--repeats is 1..1000, --rounds 1..100 and --batch 1..64")
    batched = [dataclasses.replace(s, x=(args.batch, *s.x[1:]), what=s.what.replace("rec ", f"rec{args.batch} "))
               if s.what.startswith("rec ") else s for s in SHAPES]
    shapes = [s for s in batched if (args.only is None or s.what.startswith(args.only))
              and (not args.pointwise or s.kernel == (1, 1)) and (not args.kxk or s.kernel != (1, 1))]
    rows: list[dict[str, Any]] = []
    failures = 0
    if args.stats:
        os.environ[PIPELINE_STATS_ENV] = "1"
    with Device(args.device) as device:
        result: dict[str, Any] = {"device": device.info.name, "driver": device.info.driver_info,
                                  "coopmat_shape": device.coopmat_shape, "shapes": rows}
        print(f"device: {device.info.name}; cooperative matrices: {device.coopmat_shape}", flush=True)
        chosen = variants(device, not args.no_coopmat,
                          args.simt_tiles.split(",") if args.simt_tiles else None,
                          args.coopmat_tiles.split(",") if args.coopmat_tiles else None)
        if args.variants:
            chosen = [v for v in chosen if v[0].startswith(tuple(args.variants.split(",")))]
        # a second of work first: idle clocks read several times slow
        first = shapes[0]
        start = time.perf_counter()
        while time.perf_counter() - start < 1.0:
            run_variant(device, first, np.float32, None, None, None, args.repeats, 1)
        print(f"{'shape':<34} {'auto fp32':>10} {'auto fp16':>10} {'best fp32':>24} {'best fp16':>26} "
              f"{'best fragments':>26} {'best staged':>26}", flush=True)
        for case in shapes:
            row: dict[str, Any] = {"case": str(case).strip(), "variants": {}}
            for label, dtype, coopmat, simt, tile, direct, taps in chosen:
                try:
                    got = run_variant(device, case, dtype, coopmat, simt, tile, args.repeats, args.rounds, direct,
                                      taps)
                except Exception as exc:  # noqa: BLE001  (a tile that fails to build or run is a finding too)
                    got = {"error": f"{type(exc).__name__}: {exc}"}
                    if not str(exc).startswith(("conv2d", "conv2d_coopmat", "conv2d_direct", "conv2d_taps",
                                                "pointwise_coopmat", "pointwise_staged")):
                        traceback.print_exc()
                if "error" in got and got["error"].startswith("wrong"):
                    failures += 1
                    print(f"  WRONG {case.what} {label}: {got['error']}", flush=True)
                row["variants"][label] = got
            timed = {k: v for k, v in row["variants"].items() if "min_ms" in v}

            def best(keep: Any, timed: dict[str, Any] = timed) -> str:
                found = [k for k in timed if keep(k)]
                if not found:
                    return f"{'-':>26}"
                k = min(found, key=lambda k: timed[k]["min_ms"])
                return f"{k:>18} {timed[k]['min_ms']:.4f}"

            autos = [timed.get(f"auto {p}", {}).get("min_ms", float("nan")) for p in ("fp32", "fp16")]
            print(f"{case.what:<34} {autos[0]:>10.4f} {autos[1]:>10.4f} {best(lambda k: 'fp16' not in k)} "
                  f"{best(lambda k: 'fp16' in k and not k.startswith(('frag', 'staged')))} "
                  f"{best(lambda k: k.startswith('frag'))} {best(lambda k: k.startswith('staged'))}", flush=True)
            rows.append(row)
        if args.stats:
            result["pipelines"] = pipeline_statistics(device)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(result, indent=1))
    if failures:
        print(f"{failures} variant(s) gave wrong answers", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
