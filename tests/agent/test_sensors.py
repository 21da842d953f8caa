"""Device sensors: NVML (nvidia-ml-py) where present, and sysfs trees built on disk the way Linux lays them out."""

from __future__ import annotations

from pathlib import Path

import pynvml
import pytest

from vkocr.agent.serving.sensors import NO_SENSORS, Nvml, SensorReader, Sensors, read_sensors


class FakeClock:
    def __init__(self) -> None:
        self.t = 500.0

    def __call__(self) -> float:
        return self.t


def hwmon(root: Path, index: int, name: str, files: dict[str, str], pci: str | None = None) -> Path:
    d = root / "class" / "hwmon" / f"hwmon{index}"
    d.mkdir(parents=True)
    (d / "name").write_text(name + "\n")
    for file, value in files.items():
        (d / file).write_text(value + "\n")
    if pci is not None:  # sysfs: hwmonN/device -> ../../../<pci address>
        target = root / "devices" / "pci0000:00" / pci
        target.mkdir(parents=True)
        (d / "device").symlink_to(target)
    return d


def thermal_zone(root: Path, index: int, kind: str, millidegrees: int) -> None:
    d = root / "class" / "thermal" / f"thermal_zone{index}"
    d.mkdir(parents=True)
    (d / "type").write_text(kind + "\n")
    (d / "temp").write_text(f"{millidegrees}\n")


def reader(root: Path, clock: FakeClock | None = None) -> SensorReader:
    return SensorReader(root, clock=clock or FakeClock(), nvml=False)


@pytest.fixture
def amd_desktop(tmp_path: Path) -> Path:
    hwmon(tmp_path, 0, "k10temp", {"temp1_input": "71250", "temp1_label": "Tctl"})
    hwmon(tmp_path, 1, "nvme", {"temp1_input": "40850"})
    hwmon(tmp_path, 2, "amdgpu", {
        "temp1_input": "83000", "temp1_label": "junction",  # edge is preferred wherever it sits
        "temp2_input": "61000", "temp2_label": "edge",
        "temp3_input": "70000", "temp3_label": "mem",
        "power1_average": "152000000", "power1_cap": "300000000",
    }, pci="0000:03:00.0")
    thermal_zone(tmp_path, 0, "acpitz", 30000)
    return tmp_path


def test_amdgpu_hwmon_gives_edge_temperature_and_average_power(amd_desktop: Path) -> None:
    for name in (None, "AMD Radeon RX 7900 XTX (RADV NAVI31)"):
        assert reader(amd_desktop).read(name) == Sensors(61.0, 152.0, "hwmon:amdgpu")
    assert reader(amd_desktop).read(pci_bus="03:00.0") == Sensors(61.0, 152.0, "hwmon:amdgpu")


def test_power_input_when_no_average_and_the_right_card_by_pci_address(tmp_path: Path) -> None:
    hwmon(tmp_path, 0, "amdgpu", {"temp1_input": "45000", "power1_average": "20000000"}, pci="0000:03:00.0")
    hwmon(tmp_path, 1, "amdgpu", {"temp1_input": "52500", "power1_input": "88500000"}, pci="0000:0a:00.0")
    assert reader(tmp_path).read(pci_bus="0000:0a:00.0") == Sensors(52.5, 88.5, "hwmon:amdgpu")
    assert reader(tmp_path).read(pci_bus="00000000:03:00.0") == Sensors(45.0, 20.0, "hwmon:amdgpu")
    assert reader(tmp_path).read(pci_bus="0000:41:00.0") == NO_SENSORS  # no card there: nothing, not card 0


def test_gpu_thermal_zone_on_an_embedded_board(tmp_path: Path) -> None:
    thermal_zone(tmp_path, 0, "soc-thermal", 52000)
    thermal_zone(tmp_path, 1, "bigcore0-thermal", 55000)
    thermal_zone(tmp_path, 2, "gpu-thermal", 48500)
    hwmon(tmp_path, 0, "cpu_thermal", {"temp1_input": "52000"})
    for name in (None, "Mali-G610 (Panfrost)"):
        assert reader(tmp_path).read(name) == Sensors(48.5, None, "thermal:gpu-thermal")


def test_hwmon_power_with_thermal_zone_temperature(tmp_path: Path) -> None:
    hwmon(tmp_path, 0, "gpu_power", {"power1_input": "4250000"})
    thermal_zone(tmp_path, 0, "GPU-therm", 39000)
    assert reader(tmp_path).read() == Sensors(39.0, 4.25, "hwmon:gpu_power+thermal:GPU-therm")


def test_cpu_only_machine_reports_nothing(tmp_path: Path) -> None:
    hwmon(tmp_path, 0, "coretemp", {"temp1_input": "64000", "temp1_label": "Package id 0"})
    hwmon(tmp_path, 1, "acpitz", {"temp1_input": "27800"})
    hwmon(tmp_path, 2, "BAT0", {"power1_input": "9000000"})
    thermal_zone(tmp_path, 0, "x86_pkg_temp", 64000)
    thermal_zone(tmp_path, 1, "cpu-thermal", 58000)
    assert reader(tmp_path).read() == NO_SENSORS
    assert reader(tmp_path / "no-such-sysfs").read() == NO_SENSORS


def test_software_device_and_other_vendor_get_nothing(amd_desktop: Path) -> None:
    assert reader(amd_desktop).read("llvmpipe (LLVM 15.0.7, 256 bits)") == NO_SENSORS
    assert reader(amd_desktop).read("SwiftShader Device (Subzero)") == NO_SENSORS
    assert reader(amd_desktop).read("Intel(R) Arc(tm) A770 Graphics (DG2)") == NO_SENSORS


def test_unparsable_and_missing_values_are_skipped(tmp_path: Path) -> None:
    hwmon(tmp_path, 0, "amdgpu", {"temp1_input": "garbage", "temp2_input": "47000", "power1_average": ""})
    assert reader(tmp_path).read() == Sensors(47.0, None, "hwmon:amdgpu")


def test_readings_are_cached_for_a_second(amd_desktop: Path) -> None:
    clock = FakeClock()
    r = reader(amd_desktop, clock)
    assert r.read().temperature_c == 61.0
    (amd_desktop / "class" / "hwmon" / "hwmon2" / "temp2_input").write_text("66000\n")
    clock.t += 0.9
    assert r.read().temperature_c == 61.0
    assert r.read("AMD Radeon Pro W7900").temperature_c == 66.0  # another device, its own cache entry
    clock.t += 0.2
    assert r.read().temperature_c == 66.0


def test_missing_nvml_reads_as_none(tmp_path: Path) -> None:
    if nvml_present():
        pytest.skip("this machine has NVML: test_real_nvml_when_the_machine_has_one reads it")
    assert Nvml().read(None, None) is None
    assert Nvml().read("NVIDIA H200", "0000:19:00.0") is None
    assert reader(tmp_path).read("NVIDIA H200") == NO_SENSORS
    assert SensorReader(tmp_path).read("NVIDIA H200") == NO_SENSORS  # NVML asked, and absent


def nvml_present() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


def test_real_nvml_when_the_machine_has_one() -> None:
    nvml = Nvml()
    try:
        got = nvml.read(None, None)
        if got is None:
            assert nvml.read("NVIDIA", None) is None
            pytest.skip("no NVML on this machine")
        assert got.source == "nvml"
        assert got.temperature_c is not None and 5.0 < got.temperature_c < 110.0
        assert got.power_w is not None and 1.0 < got.power_w < 2000.0
        assert nvml.read("no such gpu", None) is None
    finally:
        nvml.close()


def test_process_wide_reader_answers_without_raising() -> None:
    got = read_sensors()
    assert isinstance(got, Sensors)
    assert got.temperature_c is None or isinstance(got.temperature_c, float)
    assert read_sensors("llvmpipe (LLVM 15.0.7, 256 bits)") == NO_SENSORS
