"""Draw the charts of committed bench results: each JSON file given (the output of `vkocr bench stream --json` or
`vkocr bench agent --json`) becomes OUT_DIR/<its name>.png, drawn as `--plot` draws it (agent/cli/bench_charts.py).
Needs the extra ``plots`` (``pip install 'vkocr[plots]'``).

    .venv/bin/python scripts/plot_benchmarks.py benchmarks/2026-12-01-h200-stream-9.json \\
        benchmarks/2026-11-30-h200-agent-3.json            # → benchmarks/charts/2026-12-01-h200-stream-9.png, …
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vkocr.agent.cli.bench_charts import DPI, SIZE_PX, render_chart
from vkocr.agent.cli.errors import ChartError

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Draw a PNG chart of each `vkocr bench stream` or `vkocr bench agent` JSON file: the stream's "
        "per-image latency (ours per pass against RapidOCR, sorted, log scale, medians marked), the agent's "
        "throughput and p99 against the client count. Titles give the machine and date the JSON records.")
    parser.add_argument("results", nargs="+", type=Path, metavar="JSON", help="bench results (benchmarks/*.json)")
    parser.add_argument("-o", "--out-dir", type=Path, default=ROOT / "benchmarks" / "charts", metavar="DIR",
                        help="where the PNGs go, each named as its JSON (default benchmarks/charts)")
    parser.add_argument("--width", type=int, default=SIZE_PX[0], help=f"pixels (default {SIZE_PX[0]})")
    parser.add_argument("--height", type=int, default=SIZE_PX[1], help=f"pixels (default {SIZE_PX[1]})")
    parser.add_argument("--dpi", type=int, default=DPI, help=f"dots per inch: the text's scale (default {DPI})")
    args = parser.parse_args(argv)
    failed = 0
    for source in args.results:
        try:
            results = json.loads(source.read_text(encoding="utf-8"))
            png = render_chart(results, args.out_dir / f"{source.stem}.png", size_px=(args.width, args.height),
                               dpi=args.dpi)
        except (OSError, ValueError, ChartError) as exc:  # json's errors are ValueErrors
            print(f"plot_benchmarks: {source}: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(f"{source} -> {png}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
