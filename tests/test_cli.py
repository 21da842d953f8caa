"""`vkocr devices` through the real console entry point, in a subprocess like a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.paths import ROOT


def vkocr(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vkocr.agent.cli.main", *args], capture_output=True, text=True,
                          cwd=ROOT, check=False, env={**os.environ, **(env or {})}, timeout=120)


def test_devices_lists_and_chooses() -> None:
    text = vkocr("devices")
    assert text.returncode == 0, text.stderr
    assert "memory heaps:" in text.stdout and "subgroup size" in text.stdout
    assert "chosen: [" in text.stdout and "discrete > integrated > virtual > cpu" in text.stdout


def test_devices_json_has_every_field() -> None:
    out = vkocr("devices", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    first = report["devices"][0]
    for key in ("name", "type", "vendor", "driver_version", "api_version", "memory_heaps", "subgroup_size",
                "fp16_storage", "fp16_arithmetic", "int8_storage", "int8_arithmetic", "max_workgroup_size",
                "max_workgroup_invocations", "max_workgroup_count", "uuid"):
        assert key in first, key
    assert report["chosen"]["index"] in [d["index"] for d in report["devices"]]
    assert report["chosen"]["reason"]


def test_unknown_device_override_is_a_clear_error() -> None:
    out = vkocr("devices", env={"VKOCR_DEVICE": "no-such-gpu"})
    assert out.returncode == 2
    assert "VKOCR_DEVICE='no-such-gpu' matches no Vulkan device" in out.stderr


def test_machine_without_a_vulkan_driver_names_what_to_install(tmp_path) -> None:  # type: ignore[no-untyped-def]
    no_driver = {"VK_DRIVER_FILES": str(tmp_path / "none.json"), "VK_ICD_FILENAMES": str(tmp_path / "none.json")}
    out = vkocr("devices", env=no_driver)
    assert out.returncode == 2
    assert "mesa-vulkan-drivers" in out.stderr and "Traceback" not in out.stderr
