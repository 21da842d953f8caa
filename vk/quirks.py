"""Known driver problems: devices that `choose()` must not pick, and workarounds a device needs.

A quirk matches a device by vendor id, then by device id or a name pattern (either, both or neither), and by a
range of driver versions (the version as `vkocr devices` prints it, compared number by number; `first`
included, `fixed` excluded; None: open-ended). A matching quirk either denies the device (`deny`: why; the
automatic choice skips it, naming it still opens it) or turns on a named workaround flag (`workaround`), which
`Choice.workarounds` and `Device.workarounds` carry to the code that honours it.

| vendor | device / name | driver versions | effect | why |
|--------|---------------|-----------------|--------|-----|
| AMD | RDNA2 (RX 6000, W6000, NAVI2x, Van Gogh, Rembrandt, …) | all | `no_coopmat` | emulated, slow (ncnn, llama.cpp) |
| Qualcomm | Adreno | all | `no_coopmat` | tile unrolls break the driver (ncnn) |
| Intel | Arc A-series (Xe-HPG, DG2) | all | `no_coopmat` | advertised, regresses (llama.cpp #24404) |

`no_coopmat` turns VK_KHR_cooperative_matrix off on that device (vk/coopmat.py): its convolutions run the plain
shaders. No driver is known to misbehave with vkocr's other kernels; an entry goes here, with the issue that found
it, when one does. Sources: ../shared/research/precision.md (issue 36). The rules for CPU implementations of Vulkan
(lavapipe, SwiftShader) are not quirks: they live in devices.py (`cpu_implementation`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


def version_tuple(text: str) -> tuple[int, ...]:
    """"535.104.5" → (535, 104, 5); non-numeric parts end the tuple."""
    parts = []
    for part in text.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


@dataclass(frozen=True)
class Quirk:
    """One known problem of one driver on some devices. Exactly one of `deny` and `workaround` is set."""

    vendor_id: int
    note: str  # what goes wrong, and where it was found
    device_id: int | None = None  # None: any device of the vendor
    name_pattern: str | None = None  # a regular expression searched in the device name, case-insensitive
    first: str | None = None  # first affected driver version; None: every version before `fixed`
    fixed: str | None = None  # first good driver version; None: not fixed yet
    deny: str | None = None  # the reason the automatic choice skips the device
    workaround: str | None = None  # the flag that turns the workaround on

    def __post_init__(self) -> None:
        if (self.deny is None) == (self.workaround is None):
            raise ValueError(f"quirk {self.note!r}: set exactly one of deny and workaround")

    def matches(self, vendor_id: int, device_id: int, name: str, driver_version: str) -> bool:
        if vendor_id != self.vendor_id or (self.device_id is not None and device_id != self.device_id):
            return False
        if self.name_pattern is not None and not re.search(self.name_pattern, name, re.IGNORECASE):
            return False
        version = version_tuple(driver_version)
        if self.first is not None and version < version_tuple(self.first):
            return False
        return self.fixed is None or version < version_tuple(self.fixed)


NO_COOPMAT = "no_coopmat"  # vk/coopmat.py turns cooperative matrices off where a quirk sets it

QUIRKS: tuple[Quirk, ...] = (  # see the table in the module docstring
    Quirk(0x1002, "RDNA2's cooperative matrix is emulated and slower than plain shaders (ncnn, llama.cpp deny it)",
          name_pattern=r"navi ?2\d|vangogh|van gogh|rembrandt|raphael|mendocino|\brx 6\d{3}|\bw6\d{3}|"
                       r"\bv620\b|radeon ?(\(tm\))? ?6\d0m",
          workaround=NO_COOPMAT),
    Quirk(0x5143, "Adreno: cooperative-matrix tile unrolls break the driver (ncnn denies it)", workaround=NO_COOPMAT),
    Quirk(0x8086, "Intel Arc A-series (Xe-HPG, DG2) advertises cooperative matrices and regresses (llama.cpp #24404)",
          name_pattern=r"arc(\(tm\))? a\d{3}|\bdg2\b", workaround=NO_COOPMAT),
)


def matching(quirks: Sequence[Quirk], vendor_id: int, device_id: int, name: str, driver_version: str
             ) -> list[Quirk]:
    return [q for q in quirks if q.matches(vendor_id, device_id, name, driver_version)]
