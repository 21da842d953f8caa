"""`vkocr bench agent`'s numbers as people read them: the gain of each switch (the same deployment with one
thing off) and the table of every run."""

from __future__ import annotations

from collections import Counter
from typing import Any

from vkocr.agent.cli.bench_words import NO_GPU_BUSY, not_applicable, on_gpu


def gain(rows: list[dict[str, Any]], on_run: str, off_run: str) -> list[dict[str, Any]]:
    """Throughput of run `on_run` against `off_run` (the same deployment with one thing switched off), per mode
    and client count."""
    out = []
    for on in (r for r in rows if r["run"] == on_run):
        off = next((r for r in rows if r["run"] == off_run and r["mode"] == on["mode"]), None)
        if off is None:
            continue
        for a, b in zip(on["levels"], off["levels"], strict=True):
            ratio = a["images_per_s"] / b["images_per_s"] if b["images_per_s"] else None
            out.append({"mode": on["mode"], "clients": a["clients"], "on_images_per_s": a["images_per_s"],
                        "off_images_per_s": b["images_per_s"], "on_p50_ms": a["p50_ms"],
                        "off_p50_ms": b["p50_ms"], "throughput_ratio": ratio})
    return out


def format_agent_results(r: dict[str, Any]) -> str:
    m = r["machine"]
    what = ", ".join(f"{k}={v}" for k, v in r["request_options"].items()) or "whole pipeline"
    gpu = on_gpu(m.get("backend", ""))
    header = (f"{'run':<24} {'clients':>7} {'answered':>8} {'errors':>6} {'images/s':>9} {'p50 ms':>9} "
              f"{'p99 ms':>9} {'GPU busy':>8} {'cores':>5} {'queue ms':>9} {'req/read':>8}")
    device = f"{m.get('device', '?')} ({m.get('backend', '?')})"
    if m.get("precision"):
        device += f", {m['precision']} ({m.get('precision_reason', '')})"
    passes = r.get("passes", 1)
    per_level = "once per level" if passes == 1 else f"once per pass, {passes} passes per level"
    lines = [f"machine: {m['cpu']} ({m['cores']} cores); device: {device}",
             f"images: {r['images']} distinct, each sent {per_level}, as {r.get('sent_as', 'files')}; {what}",
             header]
    for row in r["runs"]:
        for level in row["levels"]:
            server = level["server_median_ms"]
            errors = sum(level["errors"].values())
            busy = f"{100 * level['gpu_busy_fraction']:.0f}%" if gpu else "n/a"
            lines.append(
                f"{row['name']:<24} {level['clients']:>7} {level['ok']:>8} {errors:>6} "
                f"{level['images_per_s']:>9.2f} {level['p50_ms']:>9.1f} {level['p99_ms']:>9.1f} "
                f"{busy:>8} {level['agent_cpu_cores']:>5.2f} "
                f"{server.get('queue', 0.0):>9.1f} {level.get('requests_per_read', 0.0):>8.2f}")
    if not gpu:
        lines += not_applicable(m.get("backend", ""), NO_GPU_BUSY)
    failed: Counter[str] = Counter()
    for row in r["runs"]:
        for level in row["levels"]:
            failed.update(level["errors"])
    if failed:
        lines.append("errors by code: " + ", ".join(f"{code} {n}" for code, n in sorted(failed.items())))
    if r.get("reference"):
        ref = r["reference"]
        lines.append(f"{ref['label']}, one process, one image at a time: {ref['images_per_s']:.2f} images/s "
                     f"(median {ref['median_ms']:.1f} ms); the default deployment against it: " + ", ".join(
                         f"{level['clients']} clients {level['ratio_to_reference']:.2f}x" for level in r["levels"]))
    for key, title in (("batching", "cross-request batching (throughput, on ÷ off)"),
                       ("overlap", "overlapped lanes and batching against one request at a time (throughput, ÷)"),
                       ("decode_processes", "decode processes against the default (throughput, ÷)")):
        if r.get(key):
            lines.append(f"{title}:")
            for g in r[key]:
                head = f"  {g['mode']:<6} {g['clients']:>3} clients: "
                lines.append(head + (f"{g['on_images_per_s']:.2f} vs {g['off_images_per_s']:.2f} images/s = "
                                     f"{g['throughput_ratio']:.2f}x" if g["throughput_ratio"] else
                                     "no answers with it switched off"))
    return "\n".join(lines)


FLOW_KEYS = (("experimental", "overlap"), ("throughput", "detect_lanes"), ("throughput", "read_lanes"),
             ("throughput", "batch_requests"), ("throughput", "batch_wait_ms"), ("throughput", "batch_lines"),
             ("throughput", "joint_batches"), ("server", "decode_threads"), ("experimental", "decode_processes"))


def flow_keys(config: Any) -> dict[str, Any]:
    """The keys a run's report shows (under "server", the section they all were in before [throughput] and
    [experimental])."""
    return {key: getattr(getattr(config, section), key) for section, key in FLOW_KEYS}


def describe_flow(config: Any) -> str:
    if not config.experimental.overlap:
        return "overlap off: one lane, one request at a time"
    t = config.throughput
    return (f"{t.detect_lanes} detection and {t.read_lanes} reading lanes, batches of up to "
            f"{t.batch_requests} requests within {t.batch_wait_ms:g} ms")
