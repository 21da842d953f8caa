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
    text = vkocr("devices", env={"VKOCR_DEVICE": ""})
    assert text.returncode == 0, text.stderr
    assert "memory heaps:" in text.stdout and "subgroup size" in text.stdout
    assert "not chosen automatically: a CPU implementation of Vulkan" in text.stdout  # lavapipe's line
    assert "\nchosen: " in text.stdout


def test_devices_shows_lavapipe_chosen_by_name() -> None:
    text = vkocr("devices", "--device", "llvmpipe")
    assert text.returncode == 0, text.stderr
    assert "chosen: [" in text.stdout and "device override='llvmpipe' matched by name" in text.stdout


def test_devices_names_the_cpu_backend() -> None:
    text = vkocr("devices", "--device", "cpu")
    assert text.returncode == 0, text.stderr
    assert "chosen: the cpu backend: device='cpu' names the cpu backend" in text.stdout


def test_devices_json_has_every_field() -> None:
    out = vkocr("devices", "--json", "--device", "llvmpipe")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    first = report["devices"][0]
    for key in ("name", "type", "vendor", "driver_version", "api_version", "memory_heaps", "subgroup_size",
                "fp16_storage", "fp16_arithmetic", "int8_storage", "int8_arithmetic", "max_workgroup_size",
                "max_workgroup_invocations", "max_workgroup_count", "uuid", "usable", "unusable_because",
                "workarounds", "subgroup_size_range", "coopmat_shapes", "coopmat", "coopmat_unused_because"):
        assert key in first, key
    assert report["chosen"]["index"] in [d["index"] for d in report["devices"]]
    assert report["chosen"]["backend"] == "vulkan" and report["chosen"]["reason"]


def test_unknown_device_override_is_a_clear_error() -> None:
    out = vkocr("devices", env={"VKOCR_DEVICE": "no-such-gpu"})
    assert out.returncode == 2
    assert "VKOCR_DEVICE='no-such-gpu' matches no Vulkan device" in out.stderr


def test_machine_without_a_vulkan_driver_chooses_the_cpu_and_names_what_to_install(tmp_path) -> None:  # type: ignore[no-untyped-def]
    no_driver = {"VK_DRIVER_FILES": str(tmp_path / "none.json"), "VK_ICD_FILENAMES": str(tmp_path / "none.json"),
                 "VKOCR_DEVICE": ""}
    out = vkocr("devices", env=no_driver)
    assert out.returncode == 0, out.stderr
    assert "chosen: the cpu backend: no usable GPU: no Vulkan loader or driver" in out.stdout
    assert "mesa-vulkan-drivers" in out.stdout and "Traceback" not in out.stderr
    named = vkocr("devices", "--device", "llvmpipe", env=no_driver)  # a named device that is not there: an error
    assert named.returncode == 2 and "mesa-vulkan-drivers" in named.stderr and "Traceback" not in named.stderr
