"""What one dispatch costs on a device beyond its work: the floor under every node of a plan.

Records long chains of one small kernel into one command buffer and divides the GPU span of a replay by the
number of dispatches, three ways:
- chained: each dispatch reads the previous one's output, so a barrier sits between every two;
- independent: each writes its own output, so no barrier (the GPU may overlap them);
- chained, timestamped: a profiling recording, a timestamp after each dispatch (what `plan.profile` sums).
Then the same for copies of a few sizes (the copy shader, 16 bytes per invocation), chained, so a kernel's time
can be set against moving its bytes.

    python scripts/dispatch_floor.py [--device SEL] [--json OUT]

It imports vkocr from this checkout (scripts/check_coopmat.py's finder). A measurement, not a test: lavapipe's
figures mean nothing for a GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_coopmat  # noqa: E402,F401  (installs the checkout's finder for vkocr)

from vkocr.engine.commands import Barrier  # noqa: E402
from vkocr.engine.device import Device  # noqa: E402
from vkocr.engine.kernels.elementwise import record_binary  # noqa: E402
from vkocr.engine.kernels.layout import record_copy  # noqa: E402
from vkocr.engine.recorder import Recorder  # noqa: E402
from vkocr.engine.tensor import Tensor  # noqa: E402

CHAIN = 200
COMPUTE = 0x800  # VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
SHADER_ACCESS = 0x20 | 0x40  # VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT
WARMUP_S = 0.5


def span_ms(device: Device, record: Callable[[Recorder], None], profile: bool, replays: int = 20) -> float:
    """Median GPU ms of one replay: the recording's own two timestamps, or the sum of its per-command ones."""
    with Recorder(device, profile=profile) as rec:
        record(rec)
        start = time.perf_counter()
        while time.perf_counter() - start < WARMUP_S:
            rec.run()
        spans = []
        for _ in range(replays):
            before = device.gpu_busy_seconds
            rec.run()
            spans.append(sum(t.ms for t in rec.timings()) if profile else (device.gpu_busy_seconds - before) * 1e3)
    return statistics.median(spans)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default=None, help="index, UUID or name part (default: the automatic choice)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    rng = np.random.default_rng()
    rows: list[dict[str, Any]] = []
    with Device(args.device) as device:
        print(f"device: {device.info.name}")
        small = [device.upload(rng.uniform(-1, 1, 256).astype(np.float32)) for _ in range(CHAIN + 1)]

        def chained(rec: Recorder) -> None:
            for i in range(CHAIN):
                record_binary(rec, "add", small[i], small[0], small[i + 1])

        def independent(rec: Recorder) -> None:
            for i in range(CHAIN):
                record_binary(rec, "add", small[0], small[0], small[i + 1])

        def chained_compute_only(rec: Recorder) -> None:
            """The recorder's barriers narrowed to compute → compute (it makes them compute → compute + transfer,
            so a later copy is ordered too): what the wider destination costs, if anything."""
            chained(rec)
            rec._ops[:] = [op._replace(dst_stage=COMPUTE, dst_access=SHADER_ACCESS) if isinstance(op, Barrier)
                           and op.src_stage == COMPUTE else op for op in rec._ops]

        for what, record, profile in (("add 256, chained", chained, False),
                                      ("add 256, chained, compute-only barriers", chained_compute_only, False),
                                      ("add 256, independent", independent, False),
                                      ("add 256, chained, timestamped", chained, True)):
            us = span_ms(device, record, profile) / CHAIN * 1e3
            rows.append({"case": what, "us_per_dispatch": us})
            print(f"{what:<34} {us:8.2f} us per dispatch", flush=True)
        for t in small:
            device.free(t)
        for mib in (1, 4, 16, 64):
            n = (mib << 20) // 4
            pair: list[Tensor] = [device.upload(rng.uniform(-1, 1, n).astype(np.float32)) for _ in range(2)]

            def copies(rec: Recorder, p: list[Tensor] = pair) -> None:
                for i in range(20):
                    record_copy(rec, p[i % 2], p[1 - i % 2])

            us = span_ms(device, copies, False) / 20 * 1e3
            rows.append({"case": f"copy {mib} MiB, chained", "us_per_dispatch": us,
                         "gbps": 2 * (mib << 20) / (us * 1e3)})
            print(f"{'copy ' + str(mib) + ' MiB, chained':<34} {us:8.2f} us per dispatch, "
                  f"{2 * (mib << 20) / (us * 1e3):7.1f} GB/s", flush=True)
            for t in pair:
                device.free(t)
        if args.json:
            args.json.write_text(json.dumps({"device": device.info.name, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
