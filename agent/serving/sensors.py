"""Device temperature and power, where the platform exposes them: NVML (through NVIDIA's nvidia-ml-py), then
Linux hwmon, then a GPU thermal zone.

Nothing here raises: a missing library, a missing file or an unparsable value gives `None` for that reading.
Readings are cached for `ttl_s` (default 1 s) because the status stream may ask often. A software rasteriser
(llvmpipe/lavapipe, SwiftShader) has no sensors of its own, so the CPU's are never reported as the device's.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pynvml

from vkocr.log import get_logger

log = get_logger(__name__)

GPU_HWMON_DRIVERS = frozenset({"amdgpu", "radeon", "nouveau", "i915", "xe"})
_VENDOR_DRIVERS = (  # (words in the Vulkan device name, the hwmon drivers of that vendor)
    (("amd", "radeon"), frozenset({"amdgpu", "radeon"})),
    (("intel",), frozenset({"i915", "xe"})),
    (("nvidia", "geforce", "quadro", "tesla", "nouveau", "nvk"), frozenset({"nouveau"})),
)
_SOFTWARE = ("llvmpipe", "lavapipe", "swiftshader")


@dataclass(frozen=True)
class Sensors:
    temperature_c: float | None
    power_w: float | None
    source: str  # "nvml", "hwmon:<name>", "thermal:<zone type>", joined by "+" when mixed; "none"


NO_SENSORS = Sensors(None, None, "none")


def _words(name: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", name.lower()))


def _read_number(path: Path) -> float | None:
    try:
        return float(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _read_text(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _index(path: Path) -> int:
    digits = re.search(r"(\d+)", path.name)
    return int(digits.group(1)) if digits else 0


def _normal_pci(bus: str) -> str:
    """'0000:03:00.0', '03:00.0' and NVML's '00000000:03:00.0' all become '0000:03:00.0'."""
    parts = bus.strip().lower().split(":")
    if len(parts) == 2:
        parts.insert(0, "0")
    try:
        return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}" if len(parts) == 3 else bus.strip().lower()
    except ValueError:
        return bus.strip().lower()


class Nvml:
    """NVML through NVIDIA's own binding (nvidia-ml-py's `pynvml`), initialised once on first use; any failure
    (no driver, no such device, a reading the device does not give) reads as 'no NVML' or None."""

    def __init__(self) -> None:
        self._tried = False
        self._ready = False

    def _init(self) -> bool:
        if not self._tried:
            self._tried = True
            try:
                pynvml.nvmlInit()
                self._ready = True
            except pynvml.NVMLError as e:  # NVML_ERROR_LIBRARY_NOT_FOUND on a machine without NVIDIA's driver
                log.debug("nvml_unavailable", error=str(e))
        return self._ready

    @staticmethod
    def _handle(device_name: str | None, pci_bus: str | None) -> object | None:
        if pci_bus:
            return pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus)
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            if device_name is None:
                return handle
            name = pynvml.nvmlDeviceGetName(handle)
            nvml_name = (name.decode(errors="replace") if isinstance(name, bytes) else str(name)).lower()
            if nvml_name and (nvml_name in device_name.lower() or device_name.lower() in nvml_name):
                return handle
        return None

    def read(self, device_name: str | None, pci_bus: str | None) -> Sensors | None:
        """The matching device's readings, or None when NVML is absent or has no such device."""
        if not self._init():
            return None
        try:
            handle = self._handle(device_name, pci_bus)
        except pynvml.NVMLError as e:
            log.debug("nvml_read_failed", error=str(e))
            return None
        if handle is None:
            return None
        temperature = _nvml_reading(lambda: float(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)))
        power = _nvml_reading(lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3)  # milliwatts
        return Sensors(temperature, power, "nvml")

    def close(self) -> None:
        if self._ready:
            pynvml.nvmlShutdown()
            self._ready = False


def _nvml_reading(read: Callable[[], float]) -> float | None:
    try:
        return read()
    except pynvml.NVMLError:  # NOT_SUPPORTED: a device or driver that does not give this reading
        return None


def _hwmon_drivers(device_name: str | None) -> frozenset[str] | None:
    """The hwmon drivers that may speak for this device; None: any GPU driver."""
    if device_name is None:
        return None
    words = _words(device_name)
    for vendor_words, drivers in _VENDOR_DRIVERS:
        if words & set(vendor_words):
            return drivers
    return None


def read_hwmon(root: Path, device_name: str | None = None, pci_bus: str | None = None) -> Sensors | None:
    """The first GPU hwmon (a GPU driver's, or one whose name says gpu) that matches the device's vendor and
    PCI address: temp*_input in millidegrees ('edge' preferred), power*_average or power*_input in
    microwatts. None when no such hwmon exists."""
    drivers = _hwmon_drivers(device_name)
    for hw in sorted((root / "class" / "hwmon").glob("hwmon*"), key=_index):
        name = _read_text(hw / "name")
        if name not in GPU_HWMON_DRIVERS and "gpu" not in name.lower():
            continue
        if drivers is not None and name not in drivers:
            continue
        if pci_bus is not None:
            try:
                where = os.path.basename(os.path.realpath(hw / "device"))
            except OSError:
                continue
            if _normal_pci(where) != _normal_pci(pci_bus):
                continue
        temps = sorted(hw.glob("temp*_input"), key=_index)
        edge = [t for t in temps if _read_text(t.with_name(t.name.replace("_input", "_label"))).lower() == "edge"]
        temp = next((v for t in edge + temps if (v := _read_number(t)) is not None), None)
        powers = sorted([*hw.glob("power*_average"), *hw.glob("power*_input")], key=_index)
        power = next((v for p in powers if (v := _read_number(p)) is not None), None)
        return Sensors(temp / 1e3 if temp is not None else None, power / 1e6 if power is not None else None,
                       f"hwmon:{name}")
    return None


def read_thermal_zone(root: Path) -> Sensors | None:
    """The hottest thermal zone whose type mentions gpu (embedded boards), or None: never a CPU zone."""
    best: tuple[float, str] | None = None
    for zone in sorted((root / "class" / "thermal").glob("thermal_zone*"), key=_index):
        kind = _read_text(zone / "type")
        if "gpu" not in kind.lower():
            continue
        millideg = _read_number(zone / "temp")
        if millideg is not None and (best is None or millideg / 1e3 > best[0]):
            best = (millideg / 1e3, kind)
    return Sensors(best[0], None, f"thermal:{best[1]}") if best is not None else None


class SensorReader:
    """Reads NVML, then hwmon, then thermal zones under `sysfs_root`, caching each device's reading."""

    def __init__(
        self,
        sysfs_root: str | Path = "/sys",
        *,
        clock: Callable[[], float] = time.monotonic,
        ttl_s: float = 1.0,
        nvml: bool = True,
    ) -> None:
        self.root = Path(sysfs_root)
        self.ttl_s = ttl_s
        self._clock = clock
        self._nvml = Nvml() if nvml else None  # off: sysfs alone (the tests' built trees)
        self._lock = threading.Lock()
        self._cache: dict[tuple[str | None, str | None], tuple[float, Sensors]] = {}

    def read(self, device_name: str | None = None, pci_bus: str | None = None) -> Sensors:
        """The device's temperature (°C) and power (W); `device_name` is the Vulkan name, `pci_bus` its PCI
        address ('0000:03:00.0'), either narrowing the choice when given."""
        key = (device_name, pci_bus)
        with self._lock:
            now = self._clock()
            cached = self._cache.get(key)
            if cached is not None and now - cached[0] < self.ttl_s:
                return cached[1]
            sensors = self._read(device_name, pci_bus)
            self._cache[key] = (now, sensors)
            return sensors

    def _read(self, device_name: str | None, pci_bus: str | None) -> Sensors:
        if device_name is not None and _words(device_name) & set(_SOFTWARE):
            return NO_SENSORS
        found = self._nvml.read(device_name, pci_bus) if self._nvml is not None else None
        if found is not None and (found.temperature_c is not None or found.power_w is not None):
            return found
        try:
            hw = read_hwmon(self.root, device_name, pci_bus)
            need_zone = pci_bus is None and (hw is None or hw.temperature_c is None)  # SoC zones have no PCI
            zone = read_thermal_zone(self.root) if need_zone else None
        except OSError as e:  # an unreadable directory under the sysfs root
            log.debug("sysfs_read_failed", error=str(e))
            return NO_SENSORS
        if hw is None or zone is None:
            return hw or zone or NO_SENSORS
        return Sensors(zone.temperature_c, hw.power_w, f"{hw.source}+{zone.source}")

    def close(self) -> None:
        with self._lock:
            if self._nvml is not None:
                self._nvml.close()


_default: SensorReader | None = None
_default_lock = threading.Lock()


def read_sensors(device_name: str | None = None, pci_bus: str | None = None) -> Sensors:
    """The device's temperature and power from the process-wide reader over /sys (cached ~1 s)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = SensorReader()
        reader = _default
    return reader.read(device_name, pci_bus)


def serving_device_sensors(backend: str, device_name: str) -> Sensors | None:
    """What the status stream and the metrics report: the sensors of the Vulkan device that serves; None on the
    CPU backends (the host's own temperature is not the accelerator's)."""
    return read_sensors(device_name) if backend == "vulkan" else None
