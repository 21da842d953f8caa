"""`vkocr devices`: every Vulkan device, what it can do, whether the automatic choice may take it, and the
backend that would serve (a Vulkan device, or the CPU backend) and why."""

from __future__ import annotations

import argparse
import json
from typing import Any

from vkocr.agent.cli.device_option import add_device_option
from vkocr.agent.ocr.backend_choice import choose_backend
from vkocr.agent.ocr.model_files import DEFAULT_SET
from vkocr.agent.ocr.precision import choose_precision, off_the_gpu
from vkocr.engine.coopmat import usable_shape, why_not
from vkocr.engine.devices import assess, cpu_implementation, survey


def device_report(override: str | None = None) -> dict[str, Any]:
    """Every Vulkan device with whether the automatic choice may take it, and the backend that would serve."""
    choice = choose_backend(override)
    devices = list(choice.devices) if choice.kind == "vulkan" or choice.fallback else survey()[0]
    assessments = {a.device.index: a for a in (assess(d) for d in devices)}
    chosen_index = choice.vulkan.device.index if choice.vulkan is not None and choice.vulkan.device else None
    if chosen_index is not None:
        d = devices[chosen_index]
        precision = choose_precision("auto", fp16_storage=d.fp16_storage, model_set=DEFAULT_SET.name,
                                     workarounds=assessments[d.index].workarounds, device_name=d.name,
                                     cpu_driver=cpu_implementation(d))
    else:
        precision = off_the_gpu("auto", f"the {choice.kind} backend")
    return {
        "devices": [{**d.to_json(), "usable": assessments[d.index].usable,
                     "unusable_because": assessments[d.index].unusable_because,
                     "workarounds": sorted(assessments[d.index].workarounds),
                     "coopmat": list(usable_shape(d, assessments[d.index].workarounds) or ()),
                     "coopmat_unused_because": why_not(d, assessments[d.index].workarounds)} for d in devices],
        "chosen": {"backend": choice.kind, "index": chosen_index,
                   "name": devices[chosen_index].name if chosen_index is not None else choice.kind,
                   "reason": choice.reason, "fallback": choice.fallback,
                   "precision": precision.precision, "precision_reason": precision.reason},
    }


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _size_range(d: dict[str, Any]) -> str:
    low, high = d["subgroup_size_range"]
    return f" ({low}..{high})" if low != high else ""


def _coopmat(d: dict[str, Any]) -> str:
    shapes = ", ".join("×".join(str(v) for v in s) for s in d["coopmat_shapes"])
    if d["coopmat"]:
        return f"{'×'.join(str(v) for v in d['coopmat'])} used (fp16 inputs, fp32 accumulators; listed: {shapes})"
    return f"not used: {d['coopmat_unused_because']}" + (f" (listed: {shapes})" if shapes else "")


def format_report(report: dict[str, Any]) -> str:
    lines = []
    chosen = report["chosen"]["index"]
    for d in report["devices"]:
        mark = "*" if d["index"] == chosen else " "
        usable = "usable" if d["usable"] else f"not chosen automatically: {d['unusable_because']}"
        if d["workarounds"]:
            usable += f"; workarounds {', '.join(d['workarounds'])}"
        heaps = ", ".join(
            f"{h['size_mib']} MiB {'device-local' if h['device_local'] else 'host'}" for h in d["memory_heaps"]
        )
        wg = d["max_workgroup_size"]
        count = d["max_workgroup_count"]
        lines += [
            f"{mark} [{d['index']}] {d['name']}",
            f"      {usable}",
            f"      type {d['type']}, vendor {d['vendor']} (0x{d['vendor_id']:04x}), device 0x{d['device_id']:04x}",
            (
                f"      driver {d['driver_name'] or '?'} {d['driver_version']} "
                f"({d['driver_info'] or 'no driver info'}), Vulkan {d['api_version']}"
            ),
            f"      uuid {d['uuid']}",
            f"      memory heaps: {heaps}",
            (
                f"      subgroup size {d['subgroup_size']}{_size_range(d)}; fp16 storage {_yes(d['fp16_storage'])}, "
                f"arithmetic {_yes(d['fp16_arithmetic'])}; int8 storage {_yes(d['int8_storage'])}, "
                f"arithmetic {_yes(d['int8_arithmetic'])}"
            ),
            (
                f"      workgroup: size ≤ {wg[0]}×{wg[1]}×{wg[2]}, ≤ {d['max_workgroup_invocations']} invocations, "
                f"count ≤ {count[0]}×{count[1]}×{count[2]}, shared memory {d['max_shared_memory_bytes'] // 1024} KiB"
            ),
            (
                f"      timestamps {_yes(d['timestamps_supported'])} ({d['timestamp_period_ns']:g} ns/tick), "
                f"push constants {d['max_push_constants_bytes']} B"
            ),
            f"      cooperative matrix: {_coopmat(d)}",
        ]
    if not report["devices"]:
        lines.append("no Vulkan device")
    name = report["chosen"]["name"]
    where = f"[{chosen}] {name}" if chosen is not None else f"the {name} backend"
    lines.append(f"chosen: {where}: {report['chosen']['reason']}")
    lines.append(f"precision (auto, {DEFAULT_SET.name}): {report['chosen']['precision']}: "
                 f"{report['chosen']['precision_reason']}")
    return "\n".join(lines)


def cmd_devices(args: argparse.Namespace) -> int:
    report = device_report(args.device)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


def add_devices_parser(sub: Any) -> None:
    devices = sub.add_parser("devices", help="list Vulkan devices and the backend vkocr would choose",
                             description="List every Vulkan device: name, type, vendor and driver, API version, "
                             "memory heaps, subgroup size, fp16/int8 support, workgroup limits, cooperative-matrix "
                             "shapes (fp16 inputs, fp32 accumulators) and whether convolutions use them, whether it "
                             "is usable "
                             "(CPU implementations of Vulkan and devices a quirk denies are chosen only by name), "
                             "and the backend vkocr would choose and why: a Vulkan device, else the CPU backend "
                             "(onnxruntime).")
    devices.add_argument("--json", action="store_true", help="print the same information as JSON")
    add_device_option(devices, cpu=True)
    devices.set_defaults(func=cmd_devices)
