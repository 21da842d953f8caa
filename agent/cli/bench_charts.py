"""PNG charts of a bench's JSON results, beside the tables: `vkocr bench stream|agent --plot PATH.png` and
scripts/plot_benchmarks.py draw them, BENCHMARKS.md shows them.

- `bench stream`: the latency of every image of the stream, ours pass 1 and pass 2 against RapidOCR 1.4.4, each
  sorted from fastest to slowest on a log scale, with each series' median marked.
- `bench agent`: throughput (answered images/s) and the clients' p99 latency against the number of clients,
  one line per agent run (default, plugins with the overlap on and off).

Titles name the machine and the date the JSON records. matplotlib is the optional extra ``plots``
(``pip install 'vkocr[plots]'``); every bench runs without it, only the charts need it. Drawn with the Agg
backend on a Figure of its own (no pyplot, no display, nothing global changed), 1000×500 px at dpi 100 unless
told otherwise.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vkocr.agent.cli.errors import ChartError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

INSTALL_HINT = "pip install 'vkocr[plots]'"
SIZE_PX = (1000, 500)
DPI = 100
# one colour per series, the same in every chart (tests look for them in the PNG)
COLOURS = {"ours pass 1": "#1f77b4", "ours pass 2": "#2ca02c", "RapidOCR 1.4.4": "#d62728"}
OTHER_COLOURS = ("#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#e377c2", "#bcbd22", "#7f7f7f", "#1a1a6e")
RUN_COLOURS = ("#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#17becf")


def require_matplotlib() -> None:
    """Raise ChartError, saying how to install it, unless matplotlib imports; the commands call this before a
    bench starts, so a board without the extra learns it at once, not after the run."""
    try:
        import matplotlib  # noqa: F401 (the import is the check)
    except ImportError as exc:
        raise ChartError(f"charts need matplotlib, which cannot be imported here ({exc}): {INSTALL_HINT}") from exc


def chart_kind(results: Mapping[str, Any]) -> str:
    """``"stream"`` or ``"agent"``: which bench wrote `results`, from its keys; ChartError for anything else."""
    if "per_image" in results:
        return "stream"
    if "runs" in results and "clients" in results:
        return "agent"
    raise ChartError("not the JSON of `vkocr bench stream` (no per_image) or of `vkocr bench agent` (no runs and "
                     "clients): no chart for it")


def render_chart(results: Mapping[str, Any], path: Path, *, size_px: tuple[int, int] = SIZE_PX, dpi: int = DPI
                 ) -> Path:
    """The chart of `results`, whichever bench wrote it (chart_kind), as a PNG at `path`."""
    draw = {"stream": render_stream_chart, "agent": render_agent_chart}[chart_kind(results)]
    return draw(results, path, size_px=size_px, dpi=dpi)


def render_stream_chart(results: Mapping[str, Any], path: Path, *, size_px: tuple[int, int] = SIZE_PX,
                        dpi: int = DPI) -> Path:
    """Per-image latency of a `bench stream` run: each pass of ours (ours_ms) and RapidOCR (rapidocr_ms, when
    it ran), sorted, log scale, medians marked."""
    title = stream_title(results)
    rows = need(results, "per_image", "the stream JSON")
    if not isinstance(rows, list) or not rows:
        raise ChartError("the stream JSON's per_image is empty or not a list: no images to draw")
    series: dict[str, list[float]] = {}
    for k, row in enumerate(rows):
        ours = need(row, "ours_ms", f"per_image[{k}]")
        for number, ms in enumerate(ours, start=1):
            series.setdefault(f"ours pass {number}", []).append(float(ms))
        if row.get("rapidocr_ms") is not None:
            series.setdefault("RapidOCR 1.4.4", []).append(float(row["rapidocr_ms"]))
    figure, ax = new_figure(size_px, dpi)
    others = iter(OTHER_COLOURS)  # passes 3..10
    for name, samples in series.items():
        colour = COLOURS.get(name) or next(others)
        ranks = range(1, len(samples) + 1)
        median = statistics.median(samples)
        ax.plot(ranks, sorted(samples), marker="o", markersize=3, linewidth=2, color=colour,
                label=f"{name}: median {median:.1f} ms")
        ax.axhline(median, color=colour, linestyle="--", linewidth=1.5)
    ax.set_yscale("log")
    ax.set_xlabel(f"images, each series sorted fastest to slowest ({len(rows)} distinct images)")
    ax.set_ylabel("wall time per image (ms, log scale)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left")
    return save(figure, path)


def render_agent_chart(results: Mapping[str, Any], path: Path, *, size_px: tuple[int, int] = SIZE_PX,
                       dpi: int = DPI) -> Path:
    """Throughput and p99 latency against the client count of a `bench agent` run, a line per run."""
    title = agent_title(results)
    runs = need(results, "runs", "the agent JSON")
    if not isinstance(runs, list) or not runs:
        raise ChartError("the agent JSON's runs are empty or not a list: nothing to draw")
    figure, (rate, tail) = new_figure(size_px, dpi, columns=2)
    clients: set[int] = set()
    for k, run in enumerate(runs):
        name = need(run, "name", f"runs[{k}]")
        levels = need(run, "levels", f"runs[{k}]")
        points = [(need(level, "clients", f"runs[{k}].levels[{j}]"),
                   need(level, "images_per_s", f"runs[{k}].levels[{j}]"),
                   need(level, "p99_ms", f"runs[{k}].levels[{j}]")) for j, level in enumerate(levels)]
        colour = RUN_COLOURS[k % len(RUN_COLOURS)]
        counts = [p[0] for p in points]
        clients.update(counts)
        rate.plot(counts, [p[1] for p in points], marker="o", linewidth=2, color=colour, label=name)
        tail.plot(counts, [p[2] for p in points], marker="o", linewidth=2, color=colour, label=name)
    for ax, label in ((rate, "answered images/s"), (tail, "p99 latency at the client (ms)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(clients), [str(c) for c in sorted(clients)])
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    rate.set_title("throughput")
    tail.set_title("p99 latency")
    rate.legend(loc="lower right")
    figure.suptitle(title)
    return save(figure, path)


def stream_title(results: Mapping[str, Any]) -> str:
    machine = need(results, "machine", "the stream JSON")
    device = need(machine, "device", "the stream JSON's machine")
    date = need(results, "date", "the stream JSON")
    cpu = f"{machine.get('cpu', '?')}, {machine.get('cpus', '?')} cores"
    return f"vkocr bench stream: {device} ({cpu}), {date}"


def agent_title(results: Mapping[str, Any]) -> str:
    machine = need(results, "machine", "the agent JSON")
    device = need(machine, "device", "the agent JSON's machine")
    date = need(results, "date", "the agent JSON")
    cpu = f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores"
    return f"vkocr bench agent: {device} ({cpu}), {date}"


def need(mapping: Any, key: str, where: str) -> Any:
    """mapping[key], else ChartError naming the key and where it was looked for."""
    if not isinstance(mapping, Mapping):
        raise ChartError(f"{where} is not a JSON object: cannot read its {key!r}")
    if key not in mapping or mapping[key] is None:
        raise ChartError(f"{where} has no {key!r}: not the JSON of a bench run this chart can draw")
    return mapping[key]


def new_figure(size_px: tuple[int, int], dpi: int, columns: int = 1) -> tuple[Figure, Any]:
    """A Figure on the Agg canvas and its axes (one, or a row of `columns`)."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(size_px[0] / dpi, size_px[1] / dpi), dpi=dpi, layout="constrained")
    FigureCanvasAgg(figure)
    axes: Axes | Sequence[Axes] = figure.subplots(1, columns) if columns > 1 else figure.subplots()
    return figure, axes


def save(figure: Figure, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=figure.dpi)
    return path
